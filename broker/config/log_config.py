"""LogConfig: the per-partition storage settings, with Kafka's names, defaults and precedence.

Each setting has a topic-level name (`segment.bytes`, set per topic) and a
broker-level name (`log.segment.bytes`, the default for every topic). A topic
name beats a broker name; among broker names the finer unit wins, as in
KafkaConfig (`log.roll.ms` over `log.roll.hours`, `log.retention.ms` over
`.minutes` over `.hours`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from common.config import INT_MAX, LONG_MAX
from common.recompression import COMPRESSION_TYPES, PRODUCER, target_codec
from common.record import HEADER_SIZE, CompressionType

__all__ = ["COMPACT", "CREATE_TIME", "DELETE", "LOG_APPEND_TIME", "LONG_MAX", "LogConfig", "broker_key_synonyms"]


CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# cleanup.policy values: a list of `delete` and `compact` (Kafka's LogConfig.Delete / Compact).
DELETE = "delete"
COMPACT = "compact"

_MS_PER_MINUTE = 60 * 1000
_MS_PER_HOUR = 60 * _MS_PER_MINUTE


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * _MS_PER_HOUR
    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024
    max_message_bytes: int = 1024 * 1024 + 12  # Kafka's 1048588: 1 MiB plus LOG_OVERHEAD
    retention_ms: int = 7 * 24 * _MS_PER_HOUR
    retention_bytes: int = -1
    # Long.MaxValue: never fsync on count or time; durability comes from replication
    # and the page cache, as in Kafka's defaults.
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    preallocate: bool = False
    # Compaction (Kafka's LogConfig and LogCleaner): which policies apply, and when a log may be cleaned.
    cleanup_policy: tuple[str, ...] = (DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * _MS_PER_HOUR  # how long tombstones outlive their first cleaning
    # The codec the leader writes batches with; `producer` keeps each producer's (no recompression).
    compression_type: str = PRODUCER

    def __post_init__(self) -> None:
        for spec in _SPECS:
            spec.check(getattr(self, spec.field), spec.topic_key)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Build a config from Kafka properties; unrelated keys are ignored.

        Raises ValueError naming the offending key when a value does not parse
        or is out of range.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for spec in _SPECS:
            for key, scale in spec.lookup_order():
                if key in props:
                    changes[spec.field] = spec.parse(key, props[key], scale)
                    break
        return dataclasses.replace(base, **changes)

    def topic_values(self) -> dict[str, str]:
        """Every setting under its topic-level name, as Kafka's DescribeConfigs prints it."""
        return {spec.topic_key: _show(getattr(self, spec.field)) for spec in _SPECS}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compression_codec(self) -> CompressionType | None:
        """The codec every batch is recompressed to, None for `producer`."""
        return target_codec(self.compression_type)

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the cleaner keeps the newest record per key, offsets have gaps."""
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention.ms / retention.bytes drop old segments."""
        return DELETE in self.cleanup_policy


def _show(value: object) -> str:
    """A value as Kafka shows it: booleans lower case, lists (cleanup.policy) comma-separated."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not a number") from None


def _parse_double(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("not a number") from None


def _parse_policy(text: str) -> tuple[str, ...]:
    """Kafka's cleanup.policy: a comma-separated list of `delete` and `compact`, at least one."""
    items = tuple(sorted({item.strip().lower() for item in text.split(",") if item.strip()}))
    if not items or any(item not in (DELETE, COMPACT) for item in items):
        raise ValueError(f"expected a list of {DELETE} and {COMPACT}")
    return items


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


@dataclass(frozen=True, slots=True)
class _Spec:
    field: str
    topic_key: str
    # Broker keys in precedence order, each with the factor that turns its unit into the field's.
    broker_keys: tuple[tuple[str, int], ...]
    parser: Callable[[str], Any] = _parse_int
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None

    def lookup_order(self) -> list[tuple[str, int]]:
        return [(self.topic_key, 1), *self.broker_keys]

    def parse(self, key: str, text: str, scale: int) -> Any:
        try:
            value = self.parser(text)
        except ValueError as exc:
            raise ValueError(f"Invalid value {text!r} for configuration {key}: {exc}") from None
        if scale != 1:
            # KafkaConfig turns any negative retention in minutes or hours into -1 (unlimited).
            value = -1 if value < 0 and self.minimum == -1 else value * scale
        self.check(value, key, shown=text)
        return value

    def check(self, value: Any, key: str, shown: object = None) -> None:
        shown = value if shown is None else shown
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"Invalid value {shown!r} for configuration {key}: expected one of {self.choices}")
            return
        if self.parser is _parse_policy:
            if not value or any(item not in (DELETE, COMPACT) for item in value):
                raise ValueError(f"Invalid value {shown!r} for configuration {key}: expected {DELETE} and/or {COMPACT}")
            return
        if self.parser is _parse_double:
            if not isinstance(value, float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"Invalid value {shown} for configuration {key}: value must be between 0 and 1")
            return
        if self.parser is _parse_bool:
            if not isinstance(value, bool):
                raise ValueError(f"Invalid value {shown!r} for configuration {key}: expected true or false")
            return
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"Invalid value {shown!r} for configuration {key}: not an integer")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"Invalid value {shown} for configuration {key}: value must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"Invalid value {shown} for configuration {key}: value must be at most {self.maximum}")


_SPECS: tuple[_Spec, ...] = (
    # Kafka's floor is one v0 record; a v2 segment must at least hold one batch header.
    _Spec("segment_bytes", "segment.bytes", (("log.segment.bytes", 1),), minimum=HEADER_SIZE, maximum=INT_MAX),
    _Spec("segment_ms", "segment.ms", (("log.roll.ms", 1), ("log.roll.hours", _MS_PER_HOUR)), minimum=1),
    _Spec("index_interval_bytes", "index.interval.bytes", (("log.index.interval.bytes", 1),),
          minimum=0, maximum=INT_MAX),
    _Spec("max_index_size", "segment.index.bytes", (("log.index.size.max.bytes", 1),), minimum=4, maximum=INT_MAX),
    _Spec("max_message_bytes", "max.message.bytes", (("message.max.bytes", 1),), minimum=0, maximum=INT_MAX),
    _Spec("retention_ms", "retention.ms",
          (("log.retention.ms", 1), ("log.retention.minutes", _MS_PER_MINUTE), ("log.retention.hours", _MS_PER_HOUR)),
          minimum=-1),
    _Spec("retention_bytes", "retention.bytes", (("log.retention.bytes", 1),), minimum=-1),
    _Spec("flush_interval_messages", "flush.messages", (("log.flush.interval.messages", 1),), minimum=1),
    _Spec("flush_interval_ms", "flush.ms", (("log.flush.interval.ms", 1),), minimum=0),
    _Spec("message_timestamp_type", "message.timestamp.type", (("log.message.timestamp.type", 1),),
          parser=str.strip, choices=(CREATE_TIME, LOG_APPEND_TIME)),
    _Spec("preallocate", "preallocate", (("log.preallocate", 1),), parser=_parse_bool),
    _Spec("cleanup_policy", "cleanup.policy", (("log.cleanup.policy", 1),), parser=_parse_policy),
    _Spec("min_cleanable_dirty_ratio", "min.cleanable.dirty.ratio", (("log.cleaner.min.cleanable.ratio", 1),),
          parser=_parse_double),
    _Spec("min_compaction_lag_ms", "min.compaction.lag.ms", (("log.cleaner.min.compaction.lag.ms", 1),), minimum=0),
    _Spec("max_compaction_lag_ms", "max.compaction.lag.ms", (("log.cleaner.max.compaction.lag.ms", 1),), minimum=1),
    _Spec("delete_retention_ms", "delete.retention.ms", (("log.cleaner.delete.retention.ms", 1),), minimum=0),
    # The broker's key has the topic's name (Kafka's KafkaConfig.CompressionTypeProp).
    _Spec("compression_type", "compression.type", (("compression.type", 1),), parser=str.strip,
          choices=COMPRESSION_TYPES),
)


def broker_key_synonyms() -> list[tuple[str, ...]]:
    """The broker-level names of each setting, finest unit first (log.retention.ms, .minutes, .hours): a
    dynamic value for any of them replaces the static value of all (Kafka's brokerConfigSynonyms)."""
    return [tuple(key for key, _ in spec.broker_keys) for spec in _SPECS]
