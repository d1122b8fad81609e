"""DynamicConfigManager: /config/changes notifications applied in sequence order, once each; topic overrides
reach the partitions of that topic, dynamic broker configs (per broker over <default>) the topic defaults and
the fetcher pool; a notification for another broker changes nothing here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from broker.config.topic_config import TopicConfig, TopicConfigs
from broker.security.scram import CredentialCache, make_credential
from broker.server.dynamic_config import DynamicConfigManager
from proto.types import TopicPartition
from tests.fakes import FakeZk
from tests.unit.broker.broker_helpers import broker_config


class NotifyingZk(FakeZk):
    """FakeZk whose entity writes leave /config/changes notifications a watch hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.watcher: Callable[[list[str]], None] | None = None
        self.purged: list[tuple[list[str], int]] = []

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> object:
        self.watcher = callback
        callback(self.sequence_numbers())
        return None

    def sequence_numbers(self) -> list[str]:
        return [f"{i:010d}" for i in range(len(self.config_changes))]

    def get_config_change(self, sequence_number: str) -> str | None:
        return self.config_changes[int(sequence_number)]

    def purge_config_changes(self, sequence_numbers: list[str], created_before_ms: int) -> None:
        self.purged.append((sequence_numbers, created_before_ms))


@dataclass
class HostedPartition:
    topic_partition: TopicPartition


@dataclass
class RecordingReplicaManager:
    topics: tuple[str, ...] = ("orders", "audit")
    applied: list[tuple[str, TopicConfig]] = field(default_factory=list)
    defaults: list[TopicConfig] = field(default_factory=list)

    def hosted_partitions(self) -> list[HostedPartition]:
        return [HostedPartition(TopicPartition(t, 0)) for t in self.topics]

    def update_topic_config(self, topic: str, config: TopicConfig) -> None:
        self.applied.append((topic, config))

    def set_default_topic_config(self, config: TopicConfig) -> None:
        self.defaults.append(config)


def manager(zk: NotifyingZk) -> tuple[DynamicConfigManager, RecordingReplicaManager, list[int]]:
    replica_manager = RecordingReplicaManager()
    resizes: list[int] = []
    m = DynamicConfigManager(1, zk, TopicConfigs(broker_config()), replica_manager,  # type: ignore[arg-type]
                             resizes.append, static_num_replica_fetchers=1)
    return m, replica_manager, resizes


def notify(zk: NotifyingZk, m: DynamicConfigManager) -> None:
    m._process(zk.sequence_numbers())  # what the watch's executor runs


def test_topic_changes_reach_that_topics_partitions_once_each() -> None:
    zk = NotifyingZk()
    m, replica_manager, _ = manager(zk)
    m.startup()
    replica_manager.applied.clear()
    zk.set_entity_config("topics", "orders", {"min.insync.replicas": "3", "retention.ms": "1000"})
    notify(zk, m)
    notify(zk, m)  # the same notifications again: nothing new
    ((topic, config),) = replica_manager.applied
    assert (topic, config.min_insync_replicas, config.log.retention_ms) == ("orders", 3, 1000)
    assert zk.purged[-1][0] == zk.sequence_numbers()
    m.shutdown()


def test_dynamic_broker_configs_per_broker_over_default_reach_defaults_and_fetchers() -> None:
    zk = NotifyingZk()
    m, replica_manager, resizes = manager(zk)
    m.startup()
    zk.set_entity_config("brokers", "<default>", {"log.retention.ms": "5000", "num.replica.fetchers": "2"})
    zk.set_entity_config("brokers", "1", {"num.replica.fetchers": "4"})
    zk.set_entity_config("brokers", "2", {"num.replica.fetchers": "8"})  # another broker's
    notify(zk, m)
    assert replica_manager.defaults[-1].log.retention_ms == 5000
    # Startup, then <default> and brokers/1 (each re-reads both levels: per-broker wins); brokers/2 is not ours.
    assert resizes == [1, 4, 4]
    assert {t for t, _ in replica_manager.applied} == {"orders", "audit"}
    assert m.broker_overrides == {"log.retention.ms": "5000", "num.replica.fetchers": "4"}
    m.shutdown()


def test_users_scram_credentials_reach_the_credential_cache() -> None:
    zk = NotifyingZk()
    zk.user_configs["alice"] = {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "a").to_text()}
    credentials = CredentialCache()
    m = DynamicConfigManager(1, zk, TopicConfigs(broker_config()), RecordingReplicaManager(),  # type: ignore[arg-type]
                             lambda _: None, static_num_replica_fetchers=1, credentials=credentials)
    m.startup()  # the users stored before the broker started
    assert credentials.get("SCRAM-SHA-256", "alice") is not None
    odd = "CN=bob,OU=x y"  # sanitized in the znode's name and the notification, as Kafka does
    zk.set_entity_config("users", odd, {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "b").to_text()})
    zk.set_entity_config("users", "alice", {})
    notify(zk, m)
    assert zk.config_changes[-2] == "users/CN%3Dbob%2COU%3Dx%20y"
    assert credentials.get("SCRAM-SHA-512", odd) is not None
    assert credentials.get("SCRAM-SHA-256", "alice") is None
    m.shutdown()
