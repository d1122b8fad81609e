"""Java's int arithmetic where Kafka's placement depends on it: String.hashCode and Kafka's Utils.abs, so a
partition or fetcher is chosen here exactly as a Kafka broker chooses it (a group's __consumer_offsets
partition, a partition's replica fetcher thread)."""

from __future__ import annotations


def java_int(n: int) -> int:
    """`n` wrapped to a signed 32-bit int, as Java's int overflow does."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return java_int(h)


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself (Math.abs would leave it negative)."""
    return 0 if n == -(1 << 31) else abs(n)
