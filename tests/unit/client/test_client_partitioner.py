"""murmur2 against Kafka's own vectors and kafka-python; the keyed and sticky partitioning rules."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from client.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (apache/kafka, clients/src/test/java).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items(), ids=lambda v: repr(v)[:20])
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python_for_random_keys() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        key = rng.randbytes(rng.randrange(0, 64))
        # kafka-python returns the same 32 bits unsigned.
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key), key
        assert partition_for_key(key, 12) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % 12


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5


def test_keyed_records_ignore_availability() -> None:
    partitioner = DefaultPartitioner(random.Random(1))
    # Kafka hashes over all partitions, available or not, so a key never moves.
    assert partitioner.partition("t", b"foobar", 50, available=[0]) == to_positive(-790332482) % 50


def test_keyless_records_stick_until_a_new_batch() -> None:
    partitioner = DefaultPartitioner(random.Random(3))
    first = partitioner.partition("t", None, 8, available=range(8))
    assert all(partitioner.partition("t", None, 8, available=range(8)) == first for _ in range(100))
    partitioner.on_new_batch("t", 8, range(8), first)
    second = partitioner.partition("t", None, 8, available=range(8))
    assert second != first
    assert all(partitioner.partition("t", None, 8, available=range(8)) == second for _ in range(100))


def test_new_batch_on_a_partition_already_left_does_not_move_again() -> None:
    partitioner = DefaultPartitioner(random.Random(3))
    first = partitioner.partition("t", None, 8, available=range(8))
    partitioner.on_new_batch("t", 8, range(8), first)
    second = partitioner.partition("t", None, 8, available=range(8))
    partitioner.on_new_batch("t", 8, range(8), first)  # a second thread's stale notice
    assert partitioner.partition("t", None, 8, available=range(8)) == second


def test_sticky_choice_uses_available_partitions() -> None:
    partitioner = DefaultPartitioner(random.Random(5))
    assert partitioner.partition("t", None, 8, available=[6]) == 6
    partitioner.on_new_batch("t", 8, [6], 6)
    assert partitioner.partition("t", None, 8, available=[6]) == 6  # the only one there is
    # Stickiness outlives a change of availability (as in Kafka 2.4) until the next batch...
    assert partitioner.partition("t", None, 8, available=[2, 5]) == 6
    seen = set()
    for _ in range(50):
        partitioner.on_new_batch("t", 8, [2, 5], partitioner.partition("t", None, 8, available=[2, 5]))
        seen.add(partitioner.partition("t", None, 8, available=[2, 5]))
    assert seen == {2, 5}  # ...and every later choice is an available partition


def test_no_available_partition_falls_back_to_any() -> None:
    partitioner = DefaultPartitioner(random.Random(5))
    assert 0 <= partitioner.partition("t", None, 4, available=()) < 4


def test_sticky_partitions_are_per_topic() -> None:
    partitioner = DefaultPartitioner(random.Random(11))
    a = partitioner.partition("a", None, 100, available=range(100))
    partitioner.on_new_batch("b", 100, range(100), 0)
    assert partitioner.partition("a", None, 100, available=range(100)) == a
