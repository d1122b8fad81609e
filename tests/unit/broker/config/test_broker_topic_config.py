"""Topic configs: overrides over broker defaults, Kafka's names, INVALID_CONFIG for anything else."""

from __future__ import annotations

import pytest

from broker.config.log_config import LogConfig
from broker.config.topic_config import LOG_CONFIG_KEYS, TopicConfigs
from proto.errors import ErrorCode, KafkaError
from tests.unit.broker.broker_helpers import broker_config

# A value for each key that differs from LogConfig's default.
_SAMPLES = {
    "segment.bytes": "4096", "segment.ms": "1000", "segment.index.bytes": "4096", "index.interval.bytes": "1",
    "max.message.bytes": "100", "retention.ms": "1", "retention.bytes": "1", "flush.messages": "1",
    "flush.ms": "1", "message.timestamp.type": "LogAppendTime", "preallocate": "true",
    "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "min.compaction.lag.ms": "5",
    "max.compaction.lag.ms": "60000", "delete.retention.ms": "7", "compression.type": "gzip",
}


def test_every_log_config_key_is_one_log_config_reads() -> None:
    assert set(_SAMPLES) == LOG_CONFIG_KEYS
    for key, value in _SAMPLES.items():
        assert LogConfig.from_properties({key: value}) != LogConfig(), key


def test_overrides_win_over_broker_defaults() -> None:
    configs = TopicConfigs(broker_config(**{"min.insync.replicas": "2", "log.retention.hours": "1"}))
    assert configs.default.min_insync_replicas == 2
    assert configs.default.log.retention_ms == 3_600_000
    config = configs.validate({"min.insync.replicas": "3", "retention.ms": "5", "cleanup.policy": "delete"})
    assert (config.min_insync_replicas, config.log.retention_ms) == (3, 5)
    assert config.log.segment_bytes == configs.default.log.segment_bytes


@pytest.mark.parametrize("overrides", [
    {"no.such.config": "1"},
    {"log.retention.ms": "1"},  # a broker key is not a topic key
    {"segment.bytes": "ten"},
    {"retention.ms": "-5"},
    {"min.insync.replicas": "0"},
    {"min.insync.replicas": "1.5"},
    {"unclean.leader.election.enable": "yes"},
    {"cleanup.policy": "compacted"},
    {"cleanup.policy": ""},
    {"min.cleanable.dirty.ratio": "1.5"},
    {"min.compaction.lag.ms": "-1"},
    {"max.compaction.lag.ms": "0"},
    {"delete.retention.ms": "x"},
    {"compression.type": "brotli"},
    {"compression.type": "GZIP"},  # Kafka's ValidString is case-sensitive
    {"message.format.version": "2.9"},
])
def test_invalid_config(overrides: dict[str, str]) -> None:
    with pytest.raises(KafkaError) as e:
        TopicConfigs(broker_config()).validate(overrides)
    assert e.value.code is ErrorCode.INVALID_CONFIG


def test_stored_invalid_overrides_fall_back_to_the_defaults() -> None:
    configs = TopicConfigs(broker_config())
    assert configs.load("t", {"segment.bytes": "ten"}) == configs.default


def test_cleanup_policy_is_a_list_and_the_broker_default_applies() -> None:
    configs = TopicConfigs(broker_config(**{"log.cleanup.policy": "compact", "log.cleaner.delete.retention.ms": "9"}))
    assert configs.default.log.compact and not configs.default.log.delete
    assert configs.default.log.delete_retention_ms == 9
    both = configs.validate({"cleanup.policy": "compact, delete"}).log
    assert both.cleanup_policy == ("compact", "delete") and both.compact and both.delete
