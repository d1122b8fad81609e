"""The `minibroker` Spark data source's options, with the JVM Kafka connector's names and defaults.

Kept free of Spark and client imports: the planning functions and their unit tests use these alone.
Names are the connector's (Spark's KafkaSourceProvider): `kafka.bootstrap.servers`, `subscribe` /
`subscribePattern` / `assign`, `startingOffsets`, `endingOffsets`, `startingTimestamp`, `maxOffsetsPerTrigger`,
`minPartitions`, `failOnDataLoss`, `includeHeaders`, `kafkaConsumer.pollTimeoutMs`, `topic` (the sink's),
`exactlyOnce` and `exactlyOnce.ledgerTopic` (the sink's transactional mode; the JVM connector has none), and
every `kafka.*` option handed to librdkafka without its prefix (its names for the security settings are
Kafka's: security.protocol, sasl.mechanism, sasl.username, ssl.ca.location, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

# Offsets in the connector's JSON: -2 is the earliest offset, -1 the latest.
EARLIEST, LATEST = -2, -1
OffsetSpec = Literal["earliest", "latest"] | dict[tuple[str, int], int]

# Spark's connector refuses these (KafkaSourceProvider.validateGeneralOptions): the source owns them.
_UNSUPPORTED_CLIENT_OPTIONS = ("auto.offset.reset", "key.deserializer", "value.deserializer",
                               "enable.auto.commit", "interceptor.classes", "key.serializer", "value.serializer")
DEFAULT_POLL_TIMEOUT_MS = 120_000  # kafkaConsumer.pollTimeoutMs: the connector's spark.network.timeout default


# An option's value by its lowercased name (Spark's options are case-insensitive).
_Getter = Callable[[str], str | None]


class OptionError(ValueError):
    """An option the connector would refuse too: the message says which and why."""


@dataclass(frozen=True)
class Subscription:
    """What to read: topics by name (`subscribe`), by regex (`subscribePattern`) or partitions (`assign`)."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether a topic of the cluster belongs to this subscription (not for `assign`)."""
        if self.pattern is not None:
            # Java's pattern subscription leaves internal topics out (exclude.internal.topics=true).
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int

    @property
    def isolation_level(self) -> str:
        return self.client["isolation.level"]


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    exactly_once: bool = False
    ledger_topic: str = "minibroker-sink-ledger"  # kafka_ledger.py: which micro-batches each task committed


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options without their prefix: librdkafka's configuration, bootstrap servers required."""
    config = {key[len("kafka."):]: value for key, value in options.items() if key.lower().startswith("kafka.")}
    for name in _UNSUPPORTED_CLIENT_OPTIONS:
        if name in config:
            raise OptionError(f"Kafka option 'kafka.{name}' is not supported: the source and sink set it")
    if not config.get("bootstrap.servers"):
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    return config


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    get = _lowered(options)
    client = client_config(options)
    # The issue's choice, not the JVM consumer's default: a pipeline never sees an aborted transaction's records.
    client.setdefault("isolation.level", "read_committed")
    if client["isolation.level"] not in ("read_committed", "read_uncommitted"):
        raise OptionError(f"Invalid kafka.isolation.level {client['isolation.level']!r}")
    starting = parse_offsets(get("startingoffsets") or ("latest" if streaming else "earliest"), "startingOffsets")
    ending = parse_offsets(get("endingoffsets") or "latest", "endingOffsets")
    if streaming and get("endingoffsets"):
        raise OptionError("Ending offset not valid in streaming queries")
    if not streaming and (starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values())):
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")
    return SourceOptions(
        client=client, subscription=subscription(get), starting=starting, ending=ending,
        starting_timestamp=_optional_int(get, "startingtimestamp", "startingTimestamp", minimum=0),
        max_offsets_per_trigger=_optional_int(get, "maxoffsetspertrigger", "maxOffsetsPerTrigger", minimum=1),
        min_partitions=_optional_int(get, "minpartitions", "minPartitions", minimum=1),
        fail_on_data_loss=_bool(get, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(get, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=_optional_int(get, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs",
                                      minimum=1) or DEFAULT_POLL_TIMEOUT_MS)


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    get = _lowered(options)
    client = client_config(options)
    exactly_once = _bool(get, "exactlyonce", "exactlyOnce", False)
    if exactly_once and "transactional.id" in client:
        raise OptionError("Kafka option 'kafka.transactional.id' is not supported: in exactlyOnce mode the sink"
                          " derives one per query, micro-batch and partition")
    return SinkOptions(client=client, topic=get("topic") or None, exactly_once=exactly_once,
                       ledger_topic=get("exactlyonce.ledgertopic") or SinkOptions.ledger_topic)


def subscription(get: _Getter) -> Subscription:
    """Exactly one of subscribe, subscribePattern and assign, as the connector insists."""
    given = {name: value for name in ("subscribe", "subscribePattern", "assign") if (value := get(name.lower()))}
    if len(given) != 1:
        raise OptionError("One of the following options must be specified for Kafka source: subscribe,"
                          f" subscribePattern, assign. Got {sorted(given) or 'none'}")
    if "subscribe" in given:
        topics = tuple(t.strip() for t in given["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is"
                              f" '{given['subscribe']}'")
        return Subscription(topics=topics)
    if "subscribePattern" in given:
        try:
            re.compile(given["subscribePattern"])
        except re.error as exc:
            raise OptionError(f"Invalid subscribePattern {given['subscribePattern']!r}: {exc}") from None
        return Subscription(pattern=given["subscribePattern"])
    try:
        assigned = json.loads(given["assign"])
        pairs = tuple(sorted((str(t), int(p)) for t, ps in assigned.items() for p in ps))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {given['assign']}") from None
    if not pairs:
        raise OptionError("No topicpartitions to assign as specified value for option 'assign'")
    return Subscription(assigned=pairs)


def parse_offsets(text: str, name: str) -> OffsetSpec:
    """`earliest`, `latest` or the connector's JSON, e.g. {"topicA":{"0":23,"1":-2}} (-2 earliest, -1 latest)."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return "earliest" if lowered == "earliest" else "latest"
    try:
        parsed = json.loads(text)
        offsets = {(str(topic), int(p)): int(o) for topic, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}"
                          f" for {name}, got {text}") from None
    if any(o < EARLIEST for o in offsets.values()):
        raise OptionError(f"{name}: an offset is at least -2 (earliest), -1 (latest) or an offset, got {text}")
    return offsets


def _lowered(options: Mapping[str, str]) -> _Getter:
    # Spark hands a CaseInsensitiveDict; a plain dict (tests, the pipeline) gets the same treatment.
    lowered = {key.lower(): value for key, value in options.items()}
    return lowered.get


def _optional_int(get: _Getter, key: str, name: str, *, minimum: int) -> int | None:
    value = get(key)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be an integer") from None
    if number < minimum:
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be at least {minimum}")
    return number


def _bool(get: _Getter, key: str, name: str, default: bool) -> bool:
    value = get(key)
    if value is None or value == "":
        return default
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be true or false")
    return value.strip().lower() == "true"
