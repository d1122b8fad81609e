"""Which broker configs may change live, and whether a set of overrides is valid (Kafka's
DynamicBrokerConfig.validate): shared by AlterConfigs (broker/admin/config_admin.py), which refuses a bad one,
and the dynamic config listener (broker/server/dynamic_config.py), which applies the good ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config.log_config import broker_key_synonyms
from broker.config.topic_config import MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE, TopicConfigs
from proto.errors import ErrorCode, KafkaError

NUM_REPLICA_FETCHERS = "num.replica.fetchers"

# Kafka's DynamicBrokerConfig.AllDynamicConfigs, the part that names something this broker has: the broker
# synonyms of topic configs (DynamicLogConfig), the thread pools (DynamicThreadPool) and the log cleaner's.
DYNAMIC_BROKER_CONFIGS = frozenset({
    *(key for synonyms in broker_key_synonyms() for key in synonyms),
    MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE, "log.cleanup.policy", "compression.type",
    NUM_REPLICA_FETCHERS, "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
    "background.threads",
    "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms",
})


def validate_broker_overrides(overrides: Mapping[str, str], topic_configs: TopicConfigs) -> None:
    """KafkaError(INVALID_CONFIG) unless every key may change live and every value parses."""
    static = sorted(k for k in overrides if k not in DYNAMIC_BROKER_CONFIGS)
    if static:
        # Scala's Set.toString, as Kafka's message prints it.
        raise KafkaError(f"Cannot update these configs dynamically: Set({', '.join(static)})",
                         ErrorCode.INVALID_CONFIG)
    try:
        topic_configs.with_broker_overrides(overrides)
        if NUM_REPLICA_FETCHERS in overrides:
            positive_int(NUM_REPLICA_FETCHERS, overrides[NUM_REPLICA_FETCHERS])
    except ValueError as e:
        raise KafkaError(str(e), ErrorCode.INVALID_CONFIG) from None


def positive_int(key: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {key}: not a number") from None
    if value < 1:
        raise ValueError(f"Invalid value {text} for configuration {key}: Value must be at least 1")
    return value
