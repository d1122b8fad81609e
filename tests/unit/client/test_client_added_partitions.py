"""A producer sending to a partition its metadata does not know yet (Kafka's waitOnMetadata): partitions may have
been added (CreatePartitions), so it refreshes until they appear or max_block_ms passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

from client import KafkaTimeoutError, Producer


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.create("t", 3)
        yield b


def test_a_partition_past_the_known_count_is_waited_for(broker: FakeBroker) -> None:
    with Producer(broker.address, max_block_ms=300) as producer:
        assert producer.partitions_for("t") == {0, 1, 2}
        missing = producer.send("t", b"x", partition=4)
        with pytest.raises(KafkaTimeoutError,
                           match="Partition 4 of topic t with partition count 3 is not present in metadata after 300"):
            missing.get(timeout=5)
        broker.create("t", 5)  # the topic grew
        assert producer.send("t", b"x", partition=4).get(timeout=10).partition == 4
        with pytest.raises(ValueError, match="negative"):
            producer.send("t", b"x", partition=-1)
