"""LogConfig: Kafka's defaults, topic and broker property names, precedence, precise errors."""

from __future__ import annotations

import pytest

from broker.config.log_config import LONG_MAX, LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096
    assert config.max_index_size == 10 << 20
    assert config.max_message_bytes == 1048588
    assert (config.retention_ms, config.retention_bytes) == (7 * 24 * 3600 * 1000, -1)
    assert (config.flush_interval_messages, config.flush_interval_ms) == (LONG_MAX, LONG_MAX)
    assert (config.message_timestamp_type, config.preallocate) == ("CreateTime", False)


def test_topic_and_broker_names() -> None:
    topic = LogConfig.from_properties({
        "segment.bytes": "1000", "segment.ms": "5", "index.interval.bytes": "10", "segment.index.bytes": "80",
        "max.message.bytes": "500", "retention.ms": "-1", "retention.bytes": "9000", "flush.messages": "3",
        "flush.ms": "7", "message.timestamp.type": "LogAppendTime", "preallocate": "true",
        "cleanup.policy": "delete",  # other settings pass through untouched
    })
    broker = LogConfig.from_properties({
        "log.segment.bytes": "1000", "log.roll.ms": "5", "log.index.interval.bytes": "10",
        "log.index.size.max.bytes": "80", "message.max.bytes": "500", "log.retention.ms": "-1",
        "log.retention.bytes": "9000", "log.flush.interval.messages": "3", "log.flush.interval.ms": "7",
        "log.message.timestamp.type": "LogAppendTime", "log.preallocate": "true",
    })
    assert topic == broker == LogConfig(
        segment_bytes=1000, segment_ms=5, index_interval_bytes=10, max_index_size=80, max_message_bytes=500,
        retention_ms=-1, retention_bytes=9000, flush_interval_messages=3, flush_interval_ms=7,
        message_timestamp_type="LogAppendTime", preallocate=True,
    )
    assert topic.log_append_time


def test_precedence_topic_over_broker_and_finer_units_first() -> None:
    config = LogConfig.from_properties({
        "log.segment.bytes": "5000", "segment.bytes": "4000",
        "log.roll.hours": "2",
        "log.retention.hours": "1", "log.retention.minutes": "3",
    })
    assert config.segment_bytes == 4000
    assert config.segment_ms == 2 * 3600 * 1000
    assert config.retention_ms == 3 * 60 * 1000
    assert LogConfig.from_properties({"log.retention.hours": "-1"}).retention_ms == -1
    assert LogConfig.from_properties({"log.retention.ms": "10", "log.retention.hours": "1"}).retention_ms == 10


def test_topic_overrides_apply_on_top_of_broker_defaults() -> None:
    broker = LogConfig.from_properties({"log.segment.bytes": "5000", "log.retention.bytes": "100"})
    topic = LogConfig.from_properties({"retention.bytes": "200"}, defaults=broker)
    assert (topic.segment_bytes, topic.retention_bytes) == (5000, 200)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.bytes": "big"}, "Invalid value 'big' for configuration segment.bytes: not a number"),
        ({"log.segment.bytes": "60"}, "log.segment.bytes: value must be at least 61"),
        ({"segment.bytes": str(2**31)}, "segment.bytes: value must be at most 2147483647"),
        ({"retention.ms": "-2"}, "retention.ms: value must be at least -1"),
        ({"flush.messages": "0"}, "flush.messages: value must be at least 1"),
        ({"log.message.timestamp.type": "Now"}, "log.message.timestamp.type: expected one of"),
        ({"preallocate": "yes"}, "preallocate: expected true or false"),
    ],
)
def test_invalid_values_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_properties(props)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=10)
    with pytest.raises(ValueError, match=r"message\.timestamp\.type"):
        LogConfig(message_timestamp_type="createtime")
