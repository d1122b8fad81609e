"""__consumer_offsets stays bounded under constant commits (issue 15's fourth proof): the topic is compacted, so
however many commits a group makes, its partition keeps about one record per (group, topic, partition) plus the
segments not yet cleaned. A member commits thousands of times, each commit carrying ~1 KB of metadata per partition,
with offsets.topic.segment.bytes small; the partition's log files on every replica stay under a bound a fraction of
what was written, and the group's last commit (offsets and metadata) is what OffsetFetch reads back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, partition_for
from tests.integration.group_cluster import GroupCluster, group_cluster

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 64 * 1024
OFFSETS_PARTITIONS = 3
BOUND = 16 * SEGMENT_BYTES  # the active segment, the cleaned ones, and what piles up between two cleanings
TOPIC = GROUP = "committer"
PARTITIONS = 8
METADATA = "m" * 1000
COMMITS = 600  # ~8 KB each: over 4.8 MB written to the group's offsets partition


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("offsets-compaction") / "cluster",
                       (f"offsets.topic.segment.bytes={SEGMENT_BYTES}",
                        f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}", "log.cleaner.backoff.ms=200")) as c:
        yield c


def partition_bytes(cluster: GroupCluster) -> dict[int, int]:
    """broker id -> bytes of the group's __consumer_offsets partition's segments (.log files) on that broker."""
    name = f"{GROUP_METADATA_TOPIC_NAME}-{partition_for(GROUP, OFFSETS_PARTITIONS)}"
    return {broker.id: _segment_bytes(Path(broker.log_dir) / name) for broker in cluster.local.load().brokers}


def _segment_bytes(directory: Path) -> int:
    """The live cleaner swaps and deletes segments, so a file listed a moment ago may be gone when it is sized."""
    total = 0
    for segment in directory.glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:
            pass
    return total


def test_offsets_partition_stays_bounded_under_constant_commits(cluster: GroupCluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, "never assigned the topic"
            consumer.poll(0.1)
        largest = 0
        for n in range(1, COMMITS + 1):
            consumer.commit(offsets=[TopicPartition(TOPIC, p, n, metadata=f"{n}:{METADATA}")
                                     for p in range(PARTITIONS)], asynchronous=False)
            if n % 50 == 0:
                largest = max(largest, *partition_bytes(cluster).values())
                consumer.poll(0)
        written = COMMITS * PARTITIONS * len(METADATA)
        print(f"\n{COMMITS} commits, over {written / 1e6:.1f} MB of metadata: the partition was at most"
              f" {largest / 1024:.0f} KiB on a replica (segment.bytes {SEGMENT_BYTES // 1024} KiB)")
        assert largest < BOUND < written / 4
        # Once the last dirty segments are cleaned, a replica keeps little more than its active segment.
        deadline = time.monotonic() + 60
        while max(partition_bytes(cluster).values()) > 4 * SEGMENT_BYTES:
            assert time.monotonic() < deadline, partition_bytes(cluster)
            time.sleep(0.2)
        final = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert [(tp.offset, tp.metadata) for tp in final] == [(COMMITS, f"{COMMITS}:{METADATA}")] * PARTITIONS
    finally:
        consumer.close()
