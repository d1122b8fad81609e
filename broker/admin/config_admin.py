"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs as plain values (Kafka 2.x's AdminManager
describeConfigs / alterConfigs / incrementalAlterConfigs), for every front door to call.

Resources are (type, name) with Kafka's ConfigResource.Type ids: TOPIC (2) named by the topic, BROKER (4)
named by a broker id or "" for the cluster-wide default. An alteration writes ZooKeeper the way
kafka-configs.sh does (broker/server/dynamic_config.py says what then happens on every broker).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.config.broker_overrides import validate_broker_overrides
from broker.config.kafka_config import KafkaConfig, maybe_sensitive
from broker.config.topic_config import TOPIC_LIST_CONFIG_KEYS, TopicConfigs
from common.config import java_string
from proto.errors import ErrorCode, KafkaError
from zk.client import KafkaZkClient
from zk.paths import BROKERS_ENTITY, DEFAULT_ENTITY_NAME, TOPICS_ENTITY, validate_topic

LOG_CLEANUP_POLICY = "log.cleanup.policy"  # the broker's one list-type key that can change live

# From the current overrides to the new ones; KafkaError if the request cannot apply.
_Change = Callable[[dict[str, str]], dict[str, str]]


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterConfigOp(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    entries: list[ConfigEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class ConfigAdmin:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient, topic_configs: TopicConfigs) -> None:
        self._config = config
        self._zk = zk
        self._topic_configs = topic_configs

    # ------------------------------------------------------------------ describe

    def describe_configs(self, resources: Sequence[tuple[int, str, Sequence[str] | None]]
                         ) -> list[DescribeConfigsResult]:
        """Each resource's entries (only the names asked, when a list is given)."""
        results = []
        for resource_type, name, keys in resources:
            try:
                entries = self._describe(resource_type, name)
            except KafkaError as e:
                results.append(DescribeConfigsResult(resource_type, name, e.code, e.message))
                continue
            if keys:
                entries = [e for e in entries if e.name in set(keys)]
            results.append(DescribeConfigsResult(resource_type, name, entries=entries))
        return results

    def _describe(self, resource_type: int, name: str) -> list[ConfigEntry]:
        if resource_type == ResourceType.TOPIC:
            validate_topic(name)
            if not self._zk.get_topic_assignment(name) is not None:
                raise KafkaError(f"Topic {name} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            overrides = self._zk.get_topic_config(name)
            effective = self._topic_configs.load(name, overrides, warn=False).values()
            return [ConfigEntry(key, value, ConfigSource.DYNAMIC_TOPIC_CONFIG if key in overrides
                                else ConfigSource.DEFAULT_CONFIG) for key, value in sorted(effective.items())]
        if resource_type == ResourceType.BROKER:
            entity = _broker_entity(name)
            default = self._zk.get_entity_config(BROKERS_ENTITY, DEFAULT_ENTITY_NAME)
            if entity == DEFAULT_ENTITY_NAME:
                return [_broker_entry(k, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                        for k, v in sorted(default.items())]
            own = self._zk.get_entity_config(BROKERS_ENTITY, entity)
            dynamic = {**{k: (v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) for k, v in default.items()},
                       **{k: (v, ConfigSource.DYNAMIC_BROKER_CONFIG) for k, v in own.items()}}
            static = {key: (java_string(value), ConfigSource.STATIC_BROKER_CONFIG)
                      for key, value in self._config.values().items()
                      if int(entity) == self._config.broker_id and value is not None}
            return [_broker_entry(k, v, source) for k, (v, source) in sorted({**static, **dynamic}.items())]
        raise KafkaError(f"Unsupported resource type {resource_type}", ErrorCode.INVALID_REQUEST)

    # ------------------------------------------------------------------ alter

    def alter_configs(self, resources: Sequence[tuple[int, str, Mapping[str, str | None]]],
                      validate_only: bool) -> list[AlterConfigsResult]:
        """AlterConfigs: each resource's overrides become exactly the ones given."""
        return [self._write(resource_type, name, _replace_with(configs), validate_only)
                for resource_type, name, configs in resources]

    def incremental_alter_configs(self, resources: Sequence[tuple[int, str, Sequence[tuple[str, int, str | None]]]],
                                  validate_only: bool) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: SET and DELETE single keys, APPEND and SUBTRACT items of a list-type key, over
        the current overrides."""
        return [self._write(resource_type, name, _incremental(ops, self._list_defaults(resource_type)), validate_only)
                for resource_type, name, ops in resources]

    def _list_defaults(self, resource_type: int) -> dict[str, str]:
        """The list-type (Kafka's ConfigDef.Type.LIST) keys of a resource type, each with the value an APPEND or
        SUBTRACT starts from when there is no override. Kafka starts from the key's ConfigDef default; here the
        default a topic actually gets (the broker's log.cleanup.policy), which is what DescribeConfigs shows."""
        if resource_type == ResourceType.TOPIC:
            defaults = self._topic_configs.default.values()
            return {key: defaults[key] for key in TOPIC_LIST_CONFIG_KEYS}
        if resource_type == ResourceType.BROKER:
            return {LOG_CLEANUP_POLICY: self._config.log_cleanup_policy}
        return {}

    def _write(self, resource_type: int, name: str, change: _Change, validate_only: bool) -> AlterConfigsResult:
        try:
            if resource_type == ResourceType.TOPIC:
                validate_topic(name)
                if not self._zk.get_topic_assignment(name) is not None:
                    raise KafkaError(f"Topic {name} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                new = change(self._zk.get_topic_config(name))
                self._topic_configs.validate(new)
                entity_type, entity = TOPICS_ENTITY, name
            elif resource_type == ResourceType.BROKER:
                entity_type, entity = BROKERS_ENTITY, _broker_entity(name)
                new = change(self._zk.get_entity_config(BROKERS_ENTITY, entity))
                validate_broker_overrides(new, self._topic_configs)
            else:
                raise KafkaError(f"Unsupported resource type {resource_type}", ErrorCode.INVALID_REQUEST)
            if not validate_only:
                self._zk.set_entity_config(entity_type, entity, new)
        except KafkaError as e:
            return AlterConfigsResult(resource_type, name, e.code, e.message)
        return AlterConfigsResult(resource_type, name)


def _broker_entry(key: str, value: str, source: ConfigSource) -> ConfigEntry:
    """Kafka's AdminManager.createBrokerConfigEntry: a sensitive key's value is never sent, only that it is one."""
    if maybe_sensitive(key):
        return ConfigEntry(key, None, source, is_sensitive=True)
    return ConfigEntry(key, value, source)


def _replace_with(configs: Mapping[str, str | None]) -> _Change:
    return lambda _current: {k: v for k, v in configs.items() if v is not None}


def _incremental(ops: Sequence[tuple[str, int, str | None]], list_defaults: Mapping[str, str]) -> _Change:
    return lambda current: _apply_ops(current, ops, list_defaults)


def _apply_ops(current: dict[str, str], ops: Sequence[tuple[str, int, str | None]],
               list_defaults: Mapping[str, str]) -> dict[str, str]:
    """Kafka 2.8's AdminManager.prepareIncrementalConfigs."""
    new = dict(current)
    for key, op, value in ops:
        if op == AlterConfigOp.SET:
            if value is None:
                raise KafkaError(f"Null value not supported for : {key}", ErrorCode.INVALID_REQUEST)
            new[key] = value
        elif op == AlterConfigOp.DELETE:
            new.pop(key, None)
        elif op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            verb = "append" if op == AlterConfigOp.APPEND else "subtract"
            if key not in list_defaults:
                raise KafkaError(f"Config value {verb} is not allowed for config key: {key}", ErrorCode.INVALID_REQUEST)
            old = new.get(key, list_defaults[key]).split(",")
            items = (value or "").split(",")
            # Scala's List ::: (append keeps repeats) and List.diff (subtract removes one occurrence per item).
            if op == AlterConfigOp.APPEND:
                old += items
            else:
                for item in items:
                    if item in old:
                        old.remove(item)
            new[key] = ",".join(old)
        else:
            raise KafkaError(f"Unknown alter config operation {op}", ErrorCode.INVALID_REQUEST)
    return new


def _broker_entity(name: str) -> str:
    """"" is the cluster-wide default (<default> in ZooKeeper), else a broker id."""
    if name == "":
        return DEFAULT_ENTITY_NAME
    if not (name.isascii() and name.isdigit()):
        raise KafkaError(f"Broker id must be an integer, but it is: {name}", ErrorCode.INVALID_REQUEST)
    return name
