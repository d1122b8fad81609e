"""Kafka's DefaultPartitioner: murmur2 for keyed records, the sticky partitioner (KIP-480) for the rest.

A Producer without a partitioner hashes keys with partition_for_key and leaves
keyless records to the accumulator's built-in partitioner (KIP-794,
client/builtin_partitioner.py), as Kafka 3.3 does without partitioner.class;
a DefaultPartitioner given to it is asked for every record, KIP-480's way.

Keyed records go to toPositive(murmur2(key)) % num_partitions with Kafka's
exact murmur2, so a key lands on the same partition whether a Java, librdkafka
(murmur2_random) or kafka-python producer wrote it.

Records without a key stick to one partition until a batch for it is closed
(Kafka 2.4+): batches fill up instead of every partition getting a sliver, which
is what makes linger_ms=0 producers batch well. Like Kafka 2.4 the sticky
choice is not revisited when its leader goes away; the batch waits for the new
leader (or expires after delivery_timeout_ms).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), as Java's signed 32-bit int."""
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = words << 2
    remaining = length & 3
    if remaining == 3:
        h ^= data[tail + 2] << 16
    if remaining >= 2:
        h ^= data[tail + 1] << 8
    if remaining >= 1:
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: drop the sign bit (not abs(), which differs for Integer.MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Kafka 2.4's DefaultPartitioner with its StickyPartitionCache."""

    def __init__(self, rand: random.Random | None = None) -> None:
        self._rand = rand or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        partition = self._sticky.get(topic)
        return self._next_partition(topic, num_partitions, available, None) if partition is None else partition

    def on_new_batch(self, topic: str, num_partitions: int, available: Sequence[int], prev_partition: int) -> None:
        """A keyless record would open a new batch on `prev_partition`: move on to another partition."""
        self._next_partition(topic, num_partitions, available, prev_partition)

    def _next_partition(self, topic: str, num_partitions: int, available: Sequence[int], prev: int | None) -> int:
        old = self._sticky.get(topic)
        if old is not None and old != prev:
            return old  # another thread already moved on
        if not available:
            new = self._rand.randrange(num_partitions)
        elif len(available) == 1:
            new = available[0]
        else:
            new = self._rand.choice(available)
            while new == old:
                new = self._rand.choice(available)
        self._sticky[topic] = new
        return new
