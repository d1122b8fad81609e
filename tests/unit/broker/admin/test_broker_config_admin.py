"""ConfigAdmin (Describe/Alter/IncrementalAlterConfigs as plain values) over an in-memory ZooKeeper, and the
pieces live changes rest on: dynamic broker defaults over static ones, a log taking a new config, the CLI's
--add-config syntax."""

from __future__ import annotations

from pathlib import Path

from broker.admin.config_admin import AlterConfigOp, ConfigAdmin, ConfigSource, ResourceType
from broker.config.log_config import LogConfig
from broker.config.topic_config import TopicConfigs
from broker.log.log import Log
from common.record import ProducerRecord, build_batch
from minibroker.commands.configs import parse_add_config
from proto.errors import ErrorCode
from tests.fakes import FakeClock, FakeZk
from tests.unit.broker.broker_helpers import broker_config

SET, DELETE, APPEND, SUBTRACT = AlterConfigOp.SET, AlterConfigOp.DELETE, AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT
TOPIC, BROKER = ResourceType.TOPIC, ResourceType.BROKER


def config_admin(zk: FakeZk, **static: str) -> ConfigAdmin:
    broker = broker_config(**static)
    return ConfigAdmin(broker, zk, TopicConfigs(broker))  # type: ignore[arg-type]


def zk_with_topic() -> FakeZk:
    zk = FakeZk()
    zk.add_broker(1)
    zk.add_topic("orders", {0: [1]})
    return zk


def test_incremental_alter_sets_and_deletes_topic_keys_and_notifies() -> None:
    zk = zk_with_topic()
    admin = config_admin(zk)
    (result,) = admin.incremental_alter_configs(
        [(TOPIC, "orders", [("min.insync.replicas", SET, "2"), ("retention.ms", SET, "1000")])], False)
    assert result.error == ErrorCode.NONE
    assert zk.topic_configs["orders"] == {"min.insync.replicas": "2", "retention.ms": "1000"}
    admin.incremental_alter_configs([(TOPIC, "orders", [("retention.ms", DELETE, None)])], False)
    assert zk.topic_configs["orders"] == {"min.insync.replicas": "2"}
    assert zk.config_changes == ["topics/orders", "topics/orders"]


def test_validate_only_and_bad_values_write_nothing() -> None:
    zk = zk_with_topic()
    admin = config_admin(zk)
    ok, bad, unknown, append = (admin.incremental_alter_configs([(TOPIC, "orders", ops)], validate_only)[0] for ops,
                                validate_only in [([("retention.ms", SET, "5")], True),
                                                  ([("min.insync.replicas", SET, "0")], False),
                                                  ([("no.such.key", SET, "1")], False),
                                                  ([("retention.ms", APPEND, "1")], False)])
    assert ok.error == ErrorCode.NONE
    assert (bad.error, unknown.error) == (ErrorCode.INVALID_CONFIG,) * 2
    # Kafka 2.8's prepareIncrementalConfigs: InvalidRequestException for a key that is not of type LIST.
    assert (append.error, append.message) == (
        ErrorCode.INVALID_REQUEST, "Config value append is not allowed for config key: retention.ms")
    assert "min.insync.replicas" in (bad.message or "") and unknown.message == "Unknown topic config name: no.such.key"
    assert zk.config_changes == [] and zk.get_topic_config("orders") == {}
    (missing,) = admin.incremental_alter_configs([(TOPIC, "nope", [("retention.ms", SET, "5")])], False)
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_append_and_subtract_change_list_type_keys_from_their_default_or_override() -> None:
    """Kafka 2.8's prepareIncrementalConfigs: APPEND and SUBTRACT on a ConfigDef.Type.LIST key start from its
    override, else its default."""
    zk = zk_with_topic()
    admin = config_admin(zk)
    (appended,) = admin.incremental_alter_configs([(TOPIC, "orders", [("cleanup.policy", APPEND, "compact")])], False)
    assert appended.error == ErrorCode.NONE and zk.topic_configs["orders"] == {"cleanup.policy": "delete,compact"}
    (subtracted,) = admin.incremental_alter_configs([(TOPIC, "orders", [("cleanup.policy", SUBTRACT, "delete")])],
                                                    False)
    assert subtracted.error == ErrorCode.NONE and zk.topic_configs["orders"] == {"cleanup.policy": "compact"}
    (refused,) = admin.incremental_alter_configs([(TOPIC, "orders", [("retention.ms", SUBTRACT, "1")])], False)
    assert (refused.error, refused.message) == (
        ErrorCode.INVALID_REQUEST, "Config value subtract is not allowed for config key: retention.ms")
    (broker,) = admin.incremental_alter_configs([(BROKER, "", [("log.cleanup.policy", APPEND, "compact")])], False)
    assert broker.error == ErrorCode.NONE and zk.broker_configs["<default>"] == {"log.cleanup.policy": "delete,compact"}


def test_broker_keys_kafka_cannot_change_live_are_refused_with_kafkas_message() -> None:
    zk = zk_with_topic()
    admin = config_admin(zk)
    (refused,) = admin.incremental_alter_configs(
        [(BROKER, "", [("log.dirs", SET, "/x"), ("broker.id", SET, "3"), ("log.retention.ms", SET, "5")])], False)
    assert (refused.error, refused.message) == (
        ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: Set(broker.id, log.dirs)")
    (done,) = admin.incremental_alter_configs([(BROKER, "2", [("num.replica.fetchers", SET, "4")])], False)
    assert done.error == ErrorCode.NONE and zk.broker_configs == {"2": {"num.replica.fetchers": "4"}}
    (default,) = admin.alter_configs([(BROKER, "", {"log.retention.hours": "1"})], False)
    assert default.error == ErrorCode.NONE and zk.broker_configs["<default>"] == {"log.retention.hours": "1"}
    assert zk.config_changes == ["brokers/2", "brokers/<default>"]


def test_describe_topic_marks_overrides_dynamic_and_the_rest_default() -> None:
    zk = zk_with_topic()
    zk.topic_configs["orders"] = {"retention.ms": "1000"}
    (result,) = config_admin(zk, **{"min.insync.replicas": "2"}).describe_configs([(TOPIC, "orders", None)])
    entries = {e.name: e for e in result.entries}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("1000",
                                                                              ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].is_default) == ("2", True)
    assert entries["cleanup.policy"].value == "delete"


def test_a_dynamic_synonym_replaces_every_static_synonym() -> None:
    topic_configs = TopicConfigs(broker_config(**{"log.retention.ms": "5000"}))
    assert topic_configs.default.log.retention_ms == 5000
    assert topic_configs.with_broker_overrides({"log.retention.hours": "2"}).log.retention_ms == 2 * 3600 * 1000
    assert topic_configs.with_broker_overrides({"min.insync.replicas": "3"}).min_insync_replicas == 3


def test_a_log_rolls_at_a_segment_size_changed_live(tmp_path: Path) -> None:
    batch = build_batch([ProducerRecord(b"x" * 100, timestamp=1)])
    log = Log.open(tmp_path / "t-0", LogConfig(), time=FakeClock())
    for _ in range(3):
        log.append_as_leader(batch, 0)
    assert log.num_segments == 1
    log.update_config(LogConfig(segment_bytes=len(batch) + 1))
    for _ in range(3):
        log.append_as_leader(batch, 0)
    assert log.num_segments == 4


def test_add_config_syntax() -> None:
    assert parse_add_config("a=1, b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}


def test_describe_broker_answers_password_configs_as_null_and_sensitive() -> None:
    """Kafka's AdminManager.createBrokerConfigEntry: a PASSWORD key (or one of unknown type) is sent as null with
    is_sensitive true, never as its value or a [hidden] mask."""
    zk = zk_with_topic()
    zk.broker_configs["1"] = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": "secret", "no.such.key": "x"}
    admin = config_admin(zk, **{"cluster.credential": "s3cret"})
    (result,) = admin.describe_configs([(BROKER, "1", None)])
    entries = {e.name: e for e in result.entries}
    for key in ("cluster.credential", "listener.name.sasl_plaintext.plain.sasl.jaas.config", "no.such.key"):
        assert (entries[key].value, entries[key].is_sensitive) == (None, True), key
    assert (entries["broker.id"].value, entries["broker.id"].is_sensitive) == ("1", False)
