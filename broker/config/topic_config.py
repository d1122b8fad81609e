"""A topic's effective configuration: its `/config/topics/<t>` overrides over the broker's defaults.

Topic keys are Kafka's (`retention.ms`, `min.insync.replicas`, ...). The storage
ones go to LogConfig, which already knows topic-over-broker precedence; the two
replication ones the log does not use are kept here. Kafka topic configs this
broker does not implement are refused rather than silently ignored, except
`message.format.version`, which Kafka 3 accepts and ignores (broker/config/message_format.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from broker.config import message_format
from broker.config.kafka_config import KafkaConfig
from broker.config.log_config import LogConfig, broker_key_synonyms
from common.config import UNCLEAN_LEADER_ELECTION_ENABLE
from proto.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MIN_INSYNC_REPLICAS = "min.insync.replicas"
MESSAGE_FORMAT_VERSION = "message.format.version"

# The topic-level names LogConfig reads (broker/config/log_config.py); a unit test keeps the two in step.
LOG_CONFIG_KEYS = frozenset({
    "segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes", "max.message.bytes",
    "retention.ms", "retention.bytes", "flush.messages", "flush.ms", "message.timestamp.type", "preallocate",
    "cleanup.policy", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms",
    "delete.retention.ms", "compression.type",
})
# The topic configs of Kafka's ConfigDef.Type.LIST that this broker serves: IncrementalAlterConfigs may APPEND to
# and SUBTRACT from them.
TOPIC_LIST_CONFIG_KEYS = frozenset({"cleanup.policy"})

TOPIC_CONFIG_KEYS = LOG_CONFIG_KEYS | {MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE, MESSAGE_FORMAT_VERSION}


@dataclass(frozen=True, slots=True)
class TopicConfig:
    log: LogConfig
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    # Described as given, never used: every batch is v2 (broker/config/message_format.py).
    message_format_version: str = message_format.DEFAULT_MESSAGE_FORMAT_VERSION

    def values(self) -> dict[str, str]:
        """Every topic config key with its effective value, as DescribeConfigs reports them."""
        return {**self.log.topic_values(), MIN_INSYNC_REPLICAS: str(self.min_insync_replicas),
                UNCLEAN_LEADER_ELECTION_ENABLE: str(self.unclean_leader_election_enable).lower(),
                MESSAGE_FORMAT_VERSION: self.message_format_version}


class TopicConfigs:
    """Turns a topic's overrides into its TopicConfig, with the broker's values as defaults."""

    def __init__(self, broker: KafkaConfig) -> None:
        self._broker = broker
        self.default = TopicConfig(
            LogConfig.from_properties(broker.log_properties()),
            broker.min_insync_replicas,
            broker.unclean_leader_election_enable,
            broker.log_message_format_version,
        )

    def with_broker_overrides(self, dynamic: Mapping[str, str]) -> TopicConfig:
        """The topic defaults once dynamic broker configs (log.retention.ms, min.insync.replicas, ...) override
        the static ones; ValueError naming a bad key. A dynamic value for one synonym (log.retention.hours)
        replaces the static value of every synonym (log.retention.ms)."""
        props = dict(self._broker.log_properties())
        for synonyms in broker_key_synonyms():
            if any(key in dynamic for key in synonyms):
                for key in synonyms:
                    props.pop(key, None)
        props.update({k: v for k, v in dynamic.items() if any(k in group for group in broker_key_synonyms())})
        log_config = LogConfig.from_properties(props)
        min_isr = self._broker.min_insync_replicas
        if MIN_INSYNC_REPLICAS in dynamic:
            min_isr = _parse_min_insync_replicas(dynamic[MIN_INSYNC_REPLICAS])
        unclean = self._broker.unclean_leader_election_enable
        if UNCLEAN_LEADER_ELECTION_ENABLE in dynamic:
            unclean = _parse_unclean_leader_election(dynamic[UNCLEAN_LEADER_ELECTION_ENABLE])
        return TopicConfig(log_config, min_isr, unclean, self.default.message_format_version)

    def validate(self, overrides: Mapping[str, str]) -> TopicConfig:
        """The config the overrides give; KafkaError(INVALID_CONFIG) naming the first bad key."""
        for key in overrides:
            if key not in TOPIC_CONFIG_KEYS:
                raise KafkaError(f"Unknown topic config name: {key}", ErrorCode.INVALID_CONFIG)
        try:
            log_config = LogConfig.from_properties(
                {k: v for k, v in overrides.items() if k in LOG_CONFIG_KEYS}, defaults=self.default.log
            )
            min_isr = self._min_insync_replicas(overrides)
            unclean = self._unclean_leader_election(overrides)
            format_version = self._message_format_version(overrides)
        except ValueError as e:
            raise KafkaError(str(e), ErrorCode.INVALID_CONFIG) from None
        return TopicConfig(log_config, min_isr, unclean, format_version)

    def load(self, topic: str, overrides: Mapping[str, str], warn: bool = True) -> TopicConfig:
        """The config of an existing topic: overrides ZooKeeper should never hold fall back to the defaults,
        since refusing to host the partition would not make them valid. `warn=False` (describing it) leaves out
        the warning about an ignored message.format.version, which applying the config logs."""
        try:
            config = self.validate(overrides)
        except KafkaError as e:
            log.error("Ignoring the config overrides of topic %s, using the broker defaults: %s", topic, e)
            return self.default
        # Kafka 3's LogManager warns as it reads a topic's overrides: the format asked for is not written.
        if warn and MESSAGE_FORMAT_VERSION in overrides and message_format.precedes_v2(config.message_format_version):
            log.warning(message_format.topic_warning(topic, config.message_format_version))
        return config

    def _min_insync_replicas(self, overrides: Mapping[str, str]) -> int:
        text = overrides.get(MIN_INSYNC_REPLICAS)
        return self.default.min_insync_replicas if text is None else _parse_min_insync_replicas(text)

    def _message_format_version(self, overrides: Mapping[str, str]) -> str:
        text = overrides.get(MESSAGE_FORMAT_VERSION)
        if text is None:
            return self.default.message_format_version
        reason = message_format.validate(text)
        if reason is not None:
            raise ValueError(f"Invalid value {text} for configuration {MESSAGE_FORMAT_VERSION}: {reason}")
        return text.strip()

    def _unclean_leader_election(self, overrides: Mapping[str, str]) -> bool:
        text = overrides.get(UNCLEAN_LEADER_ELECTION_ENABLE)
        return self.default.unclean_leader_election_enable if text is None else _parse_unclean_leader_election(text)


def _parse_min_insync_replicas(text: str) -> int:
    value = _java_int(text.strip())
    if value is None or value < 1:
        raise ValueError(f"Invalid value {text} for configuration {MIN_INSYNC_REPLICAS}: must be an integer >= 1")
    return value


def _parse_unclean_leader_election(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(
            f"Invalid value {text} for configuration {UNCLEAN_LEADER_ELECTION_ENABLE}: expected true or false"
        )
    return lowered == "true"


def _java_int(text: str) -> int | None:
    """Integer.parseInt: optional sign, ASCII digits, 32 bits."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None
