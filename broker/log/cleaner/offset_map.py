"""The cleaner's key -> last offset map, bounded in memory (Kafka's SkimpyOffsetMap).

Kafka keeps only a hash of each key (MD5, 16 bytes) and its offset (8 bytes) in
a fixed buffer of `log.cleaner.dedupe.buffer.size / log.cleaner.threads` bytes,
filled to `log.cleaner.io.buffer.load.factor` (0.9). Two keys with the same
hash are one key to the cleaner; with MD5 that is not a practical concern.
Here the slots are a dict of digest -> offset, with the same capacity rule, so
the memory the operator configures still bounds how much of the dirty section
one cleaning can cover.
"""

from __future__ import annotations

import hashlib

__all__ = ["BYTES_PER_ENTRY", "LOAD_FACTOR", "SkimpyOffsetMap"]

HASH_SIZE = 16  # MD5, as Kafka's default hash algorithm
BYTES_PER_ENTRY = HASH_SIZE + 8
LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor default


class SkimpyOffsetMap:
    """hash(key) -> the largest offset seen for it; full at `slots * LOAD_FACTOR` distinct keys."""

    def __init__(self, memory: int) -> None:
        self.slots = max(memory // BYTES_PER_ENTRY, 1)
        self.capacity = max(int(self.slots * LOAD_FACTOR), 1)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` for `key` (offsets come in increasing order; a put past capacity is refused)."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        if digest not in self._offsets and self.full:
            raise OverflowError(f"the offset map is full ({self.capacity} keys)")
        self._offsets[digest] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset recorded for `key`, -1 if none."""
        return self._offsets.get(hashlib.md5(key, usedforsecurity=False).digest(), -1)

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
