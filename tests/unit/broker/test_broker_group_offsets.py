"""Committed offsets in ZooKeeper at Kafka 0.8's paths: validation, and what is stored and answered."""

from __future__ import annotations

import pytest
from broker_helpers import live_broker, metadata_state

from broker.server.group_offsets import CommittedOffset, OffsetCommit, ZkGroupOffsets
from broker.server.metadata_cache import MetadataCache
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeZk
from zk import paths

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_paths_and_format() -> None:
    assert paths.consumer_offset_path("g", TP1) == "/consumers/g/offsets/orders/1"
    committed = paths.ConsumerOffset(42, "meta")
    assert paths.decode_consumer_offset("p", paths.encode_consumer_offset(committed)) == committed
    assert paths.encode_consumer_offset(committed) == b'{"version":1,"offset":42,"metadata":"meta"}'
    # Kafka 0.8's format (and minibroker's before it kept metadata): the bare offset.
    assert paths.decode_consumer_offset("p", b"17") == paths.ConsumerOffset(17, "")
    for bad in ("", ".", "..", "a/b", "nul\x00"):
        with pytest.raises(KafkaError) as e:
            paths.consumer_offsets_path(bad)
        assert e.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(ValueError, match="malformed znode"):
        paths.decode_consumer_offset("p", b"not a number")



def store() -> tuple[ZkGroupOffsets, FakeZk]:
    cache = MetadataCache(1)
    cache.update_metadata(0, [(TP0, metadata_state()), (TP1, metadata_state())], [live_broker(1)])
    zk = FakeZk()
    return ZkGroupOffsets(zk, cache), zk  # type: ignore[arg-type]


def test_commit_checks_each_partition() -> None:
    offsets, zk = store()
    unknown = TopicPartition("nope", 0)
    result = offsets.commit("g", [OffsetCommit(TP0, 5), OffsetCommit(unknown, 1), OffsetCommit(TP1, 7, "m" * 5000)])
    assert result == [(TP0, ErrorCode.NONE), (unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                      (TP1, ErrorCode.OFFSET_METADATA_TOO_LARGE)]
    assert zk.consumer_offsets == {"g": {TP0: paths.ConsumerOffset(5)}}
    assert offsets.commit("a/b", [OffsetCommit(TP0, 1)]) == [(TP0, ErrorCode.INVALID_REQUEST)]


def test_fetch_unknown_offsets_are_minus_one() -> None:
    offsets, _ = store()
    offsets.commit("g", [OffsetCommit(TP1, 9, "meta")])
    assert offsets.fetch("g", [TP0, TP1, TopicPartition("bad/topic", 0)]) == [
        CommittedOffset(TP0, -1), CommittedOffset(TP1, 9, "meta"),
        CommittedOffset(TopicPartition("bad/topic", 0), -1, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert offsets.fetch("g", None) == [CommittedOffset(TP1, 9, "meta")]
    assert offsets.fetch("other", None) == []
