"""Live configuration changes (Kafka 2.x's DynamicConfigManager, ConfigChangeListener and DynamicBrokerConfig).

`kafka-configs.sh` (here `minibroker configs`) and the AlterConfigs RPCs write an entity's overrides to
`/config/topics/<t>` or `/config/brokers/<id|<default>>` and, in the same multi-op, a sequential
`/config/changes/config_change_<seq>` notification naming it (`{"version":2,"entity_path":"topics/t"}`).
Every broker watches `/config/changes` and re-reads the entity a new notification names:

- topics/<t>: the topic's TopicConfig is rebuilt from its overrides over the broker defaults and handed to
  every partition of the topic hosted here (min.insync.replicas, retention.*, segment.*, max.message.bytes,
  unclean.leader.election.enable... apply from the next append, roll or retention pass).
- brokers/<default> or brokers/<this id>: the dynamic broker configs (per-broker over cluster default over
  server.properties) are re-applied: log.* defaults reach every topic without its own override,
  num.replica.fetchers resizes the fetcher pool.
- users/<user>: the user's SCRAM credentials (`SCRAM-SHA-256`, `SCRAM-SHA-512`) replace those in the
  CredentialCache the SASL listeners log in with (Kafka's UserConfigHandler): a new user or password works
  on the next login, a deleted one no longer does (connections already authenticated stay, as in Kafka).

Only the broker configs Kafka can change live are accepted (`DYNAMIC_BROKER_CONFIGS`); any other is refused
with Kafka's "Cannot update these configs dynamically" message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from broker.config.broker_overrides import (
    DYNAMIC_BROKER_CONFIGS,
    NUM_REPLICA_FETCHERS,
    positive_int,
    validate_broker_overrides,
)
from broker.config.topic_config import TopicConfigs
from broker.replication.replica_manager import ReplicaManager
from broker.security.scram import CredentialCache
from proto.errors import KafkaError
from zk.client import KafkaZkClient, Watch
from zk.paths import (
    BROKERS_ENTITY,
    CHANGE_EXPIRATION_MS,
    DEFAULT_ENTITY_NAME,
    TOPICS_ENTITY,
    USERS_ENTITY,
    desanitize_entity_name,
)

logger = logging.getLogger(__name__)


class DynamicConfigManager:
    """Applies /config/changes notifications on this broker, one at a time, in sequence order."""

    def __init__(self, broker_id: int, zk: KafkaZkClient, topic_configs: TopicConfigs,
                 replica_manager: ReplicaManager, resize_fetchers: Callable[[int], None],
                 static_num_replica_fetchers: int, credentials: CredentialCache | None = None) -> None:
        self._broker_id = broker_id
        self._credentials = credentials
        self._zk = zk
        self._topic_configs = topic_configs
        self._replica_manager = replica_manager
        self._resize_fetchers = resize_fetchers
        self._static_num_replica_fetchers = static_num_replica_fetchers
        # ZooKeeper reads off kazoo's event thread: a watch callback must not block it.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="config-change")
        self._lock = threading.Lock()
        self._last_seen = ""
        self._watch: Watch | None = None
        self.broker_overrides: dict[str, str] = {}

    def startup(self) -> None:
        """Apply the dynamic broker configs stored now, then every change notified from here on."""
        self._apply_broker_configs()
        if self._credentials is not None:
            for user in self._zk.get_user_names():
                self._apply_user(user)
        self._watch = self._zk.watch_config_changes(self._on_changes)

    def _on_changes(self, sequence_numbers: list[str]) -> None:
        self._executor.submit(self._process, sequence_numbers)

    def shutdown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._executor.shutdown(wait=True)

    def _process(self, sequence_numbers: Sequence[str]) -> None:
        with self._lock:
            for seq in sequence_numbers:
                if seq <= self._last_seen:  # zero-padded: string order is sequence order
                    continue
                self._last_seen = seq
                try:
                    entity_path = self._zk.get_config_change(seq)
                    if entity_path is not None:
                        self._apply(entity_path)
                except Exception:
                    logger.exception("Failed to process config change notification %s", seq)
            try:
                self._zk.purge_config_changes(list(sequence_numbers), int(time.time() * 1000) - CHANGE_EXPIRATION_MS)
            except Exception:
                logger.exception("Failed to purge obsolete config change notifications")

    def _apply(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == TOPICS_ENTITY:
            self._apply_topic(name)
        elif entity_type == BROKERS_ENTITY and name in (DEFAULT_ENTITY_NAME, str(self._broker_id)):
            self._apply_broker_configs()
        elif entity_type == USERS_ENTITY and self._credentials is not None:
            self._apply_user(desanitize_entity_name(name))

    def _apply_user(self, user: str) -> None:
        assert self._credentials is not None
        config = self._zk.get_entity_config(USERS_ENTITY, user)
        # Never log the config: it holds the salted keys.
        logger.info("Processing credentials for entityPath: users/%s (%s)", user,
                    ", ".join(sorted(config)) or "none")
        for mechanism in self._credentials.update_user(user, config):
            logger.error("Invalid %s credential of user %s in ZooKeeper: ignored", mechanism, user)

    def _apply_topic(self, topic: str) -> None:
        overrides = self._zk.get_topic_config(topic)
        logger.info("Processing override for entityPath: topics/%s with config: %s", topic, overrides)
        self._replica_manager.update_topic_config(topic, self._topic_configs.load(topic, overrides))

    def _apply_broker_configs(self) -> None:
        merged = {**self._zk.get_entity_config(BROKERS_ENTITY, DEFAULT_ENTITY_NAME),
                  **self._zk.get_entity_config(BROKERS_ENTITY, str(self._broker_id))}
        usable = {k: v for k, v in merged.items() if k in DYNAMIC_BROKER_CONFIGS}
        try:
            validate_broker_overrides(usable, self._topic_configs)
        except KafkaError as e:
            logger.error("Dynamic broker configs of %d could not be applied: %s", self._broker_id, e)
            return
        logger.info("Applying dynamic broker configs: %s", usable)
        self.broker_overrides = usable
        self._topic_configs.default = self._topic_configs.with_broker_overrides(usable)
        self._replica_manager.set_default_topic_config(self._topic_configs.default)
        for topic in sorted({p.topic_partition.topic for p in self._replica_manager.hosted_partitions()}):
            self._apply_topic(topic)
        fetchers = usable.get(NUM_REPLICA_FETCHERS)
        self._resize_fetchers(self._static_num_replica_fetchers if fetchers is None
                              else positive_int(NUM_REPLICA_FETCHERS, fetchers))
