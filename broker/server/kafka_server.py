"""KafkaServer: one broker process's start-up and shutdown sequence (Kafka 2.x's server/KafkaServer.scala).

Start-up, in Kafka's order where it has one:
 1. malloc thresholds (broker/server/malloc.py);
 2. ZooKeeper: connect, create the persistent paths, get or create the cluster id;
 3. wait out the registration of a previous incarnation of this broker id (a
    kill -9 leaves it until its session expires), and refuse to start while
    another live broker holds the id, before touching any log;
 4. LogManager: meta.properties ownership, then load and recover every log;
 5. ReplicaManager, MetadataCache, purgatories, AdminManager, ...;
 6. one server per listener, as Kafka has one acceptor per listener: a request's
    listener is the server it came to, and Metadata answers with that listener's
    endpoints. Listeners named in grpc.listener.names serve gRPC (KafkaClient,
    KafkaCluster, grpc.health.v1: NOT_SERVING); the others Apache Kafka's wire
    protocol (broker/api/kafka/), onto the same ReplicaManager;
 7. register /brokers/ids/<id> with the advertised listeners (port 0: the bound
    port of that listener; no host: this host's name): the czxid is the broker
    epoch; health turns SERVING; re-register whenever a new ZooKeeper session
    replaces an expired one;
 8. periodic tasks: retention, flush, recovery-point and high watermark
    checkpoints, ISR expiration (every replica.lag.time.max.ms / 2) and
    ISR-change propagation;
 9. the Prometheus endpoint, if metrics.port is set.

Shutdown (SIGTERM / SIGINT): with controlled.shutdown.enable, ask the active
controller (its endpoint is in /controller) to move leadership away; NOT_SERVING, stop taking requests, answer those
waiting in purgatory, stop the fetcher threads, checkpoint high watermarks,
shut the logs down cleanly (which writes the clean-shutdown marker), close the
ZooKeeper session (the registration goes with it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.admin.admin_manager import AdminManager
from broker.admin.config_admin import ConfigAdmin
from broker.admin.controller_channel import ControllerChannel
from broker.admin.delayed_create_topics import DelayedCreateTopics
from broker.admin.producer_id_manager import ProducerIdManager
from broker.admin.scram_admin import UserScramAdmin
from broker.api.group_operations import GroupOperations
from broker.api.grpc_apis import KafkaApis
from broker.api.handler_pools import HandlerPools
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.listener import KafkaListener
from broker.api.kafka.listener_security import ListenerSecurity
from broker.api.operations import BrokerOperations, TxnMarker
from broker.api.transaction_operations import TransactionOperations
from broker.config import message_format
from broker.config.kafka_config import KafkaConfig
from broker.config.log_config import LogConfig
from broker.config.metadata_cache import MetadataCache
from broker.config.metrics import BrokerMetrics
from broker.config.topic_config import TopicConfigs
from broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.group.group_metadata_manager import (
    GROUP_METADATA_TOPIC_NAME,
    GroupMetadataManager,
    OffsetsConfig,
)
from broker.coordinator.group.offsets_topic import OffsetsTopic
from broker.coordinator.group.storage import ReplicaManagerStorage
from broker.coordinator.storage import CoordinatorStorage
from broker.coordinator.transaction.marker_sender import GrpcMarkerSender
from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_marker_channel import (
    TransactionMarkerChannelManager,
    WritableTxnMarker,
)
from broker.coordinator.transaction.transaction_state_manager import TransactionConfig, TransactionStateManager
from broker.coordinator.transaction.transaction_state_topic import TransactionStateTopic
from broker.fetcher.blocking_send import ReplicaFetcherBlockingSend
from broker.fetcher.manager import ReplicaFetcherManager
from broker.fetcher.protocol import BrokerEndPoint, ReplicaFetcherConfig
from broker.fetcher.thread import PartitionLookup
from broker.log.cleaner.threads import CleanerConfig, LogCleaner
from broker.log.log_dir_failure import LogDirFailureChannel
from broker.log.manager import LogManager
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.purgatory.timer import AsyncioTimer
from broker.replication.isr_change_propagation import (
    KAFKA_ISR_CHANGE_PROPAGATION,
    IsrChangePropagationConfig,
    IsrChangePropagator,
)
from broker.replication.local_log_read import ChunkedReader
from broker.replication.partition_state_store import ZkPartitionStateStore
from broker.replication.replica_manager import LeadershipListener, ReplicaManager, freeze_long_lived_objects
from broker.security.grpc_authentication import (
    GrpcAuthenticator,
    inter_broker_security,
    listener_security,
    requires_client_certificates,
    scram_password_check,
)
from broker.security.scram import CredentialCache
from broker.server.dynamic_config import DynamicConfigManager
from broker.server.log_dir_failure_handler import LogDirFailureHandler
from broker.server.malloc import tune_malloc
from broker.server.scheduler import KafkaScheduler
from common.config import ConfigError
from common.limits import MESSAGE_SIZE_OPTIONS
from common.security.authorizer import AclAuthorizer, parse_super_users
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import cluster_credential_metadata
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition
from zk.acl_store import ZkAclStore
from zk.client import DuplicateBrokerIdError, KafkaZkClient
from zk.paths import BrokerInfo

logger = logging.getLogger(__name__)

# Kafka's KafkaServer/LogManager InitialTaskDelayMs: let start-up settle before background work.
INITIAL_TASK_DELAY_MS = 30_000
SHUTDOWN_GRACE_S = 5.0
# How long the marker channel waits before sending a marker again (a leader moving, NOT_LEADER_OR_FOLLOWER, a
# broker down): the producer's default retry.backoff.ms, Kafka's inter-broker clients' retry backoff.
MARKER_RETRY_BACKOFF_MS = 100
# How often to look whether a previous incarnation's registration has expired.
_REGISTRATION_POLL_S = 0.2
# Threads checking gRPC passwords: two keep one slow check from holding up every other login.
_PASSWORD_CHECK_THREADS = 2

_GRPC_OPTIONS = [
    *MESSAGE_SIZE_OPTIONS,
    # gRPC binds with SO_REUSEPORT by default: a second broker on the same port would
    # silently share it instead of failing to start.
    ("grpc.so_reuseport", 0),
    # Clients and followers keep idle connections alive with pings; do not punish them for it.
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def replica_fetcher_config(config: KafkaConfig) -> ReplicaFetcherConfig:
    return ReplicaFetcherConfig(
        fetch_max_bytes=config.replica_fetch_max_bytes,
        fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
        fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        fetch_min_bytes=config.replica_fetch_min_bytes,
        fetch_backoff_ms=config.replica_fetch_backoff_ms,
        socket_timeout_ms=config.replica_socket_timeout_ms,
        num_replica_fetchers=config.num_replica_fetchers,
    )


def on_the_loop(loop: asyncio.AbstractEventLoop, listener: LeadershipListener) -> LeadershipListener:
    """A coordinator's onLeadershipChange, called on the event loop whichever thread applied the change (the
    controller-request-handler thread, or the loop itself)."""
    loop_thread = threading.get_ident()

    def on_leadership_change(became_leader: Sequence[tuple[TopicPartition, int]],
                             resigned: Sequence[tuple[TopicPartition, int | None]]) -> None:
        if threading.get_ident() == loop_thread:
            listener(became_leader, resigned)
        else:
            loop.call_soon_threadsafe(listener, list(became_leader), list(resigned))

    return on_leadership_change


class KafkaServer:
    def __init__(self, config: KafkaConfig, time_ms: Callable[[], int] = _now_ms,
                 isr_change_propagation: IsrChangePropagationConfig = KAFKA_ISR_CHANGE_PROPAGATION) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._time_ms = time_ms
        self._isr_change_propagation = isr_change_propagation
        self.metrics = BrokerMetrics()
        self._isr_change_propagator: IsrChangePropagator | None = None
        self.broker_epoch = -1
        self._shutdown_requested: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zk: KafkaZkClient | None = None
        self._log_manager: LogManager | None = None
        self._log_cleaner: LogCleaner | None = None
        self._replica_manager: ReplicaManager | None = None
        self._topic_purgatory: DelayedOperationPurgatory[DelayedCreateTopics] | None = None
        self._grpc_servers: list[grpc.aio.Server] = []
        # The gRPC listeners' password checks (a PBKDF2 each), off the event loop and apart from other blocking
        # work, so a flood of wrong passwords slows only other password checks.
        self._password_checks = ThreadPoolExecutor(_PASSWORD_CHECK_THREADS, thread_name_prefix="grpc-password-check")
        # One thread: LeaderAndIsr and StopReplica are applied in the order they arrived (grpc_apis.py).
        self._controller_requests = ThreadPoolExecutor(1, thread_name_prefix="controller-request-handler")
        # Requests' ZooKeeper calls and disk work, each on threads of their own (handler_pools.py).
        self._pools = HandlerPools(config.zookeeper_max_in_flight_requests, config.num_io_threads)
        self._kafka_listeners: list[KafkaListener] = []
        self._health: health.aio.HealthServicer | None = None
        self._scheduler: KafkaScheduler | None = None
        self._fetcher_manager: ReplicaFetcherManager | None = None
        self._dynamic_config: DynamicConfigManager | None = None
        self._acl_store: ZkAclStore | None = None
        self._registration: BrokerInfo | None = None
        self._log_dir_failure_handler: LogDirFailureHandler | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self._marker_sender: GrpcMarkerSender | None = None

    # ------------------------------------------------------------------ lifecycle

    async def run(self, handle_signals: bool = True) -> None:
        """Start, serve until SIGTERM / SIGINT (or request_shutdown), shut down. Start-up errors propagate
        after whatever had started is stopped again. Signals can only be handled on the main thread."""
        self._loop = asyncio.get_running_loop()
        self._shutdown_requested = asyncio.Event()
        if handle_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self.request_shutdown)
        try:
            await self.startup()
            await self._shutdown_requested.wait()
        finally:
            await self.shutdown()

    @property
    def zk_client(self) -> KafkaZkClient | None:
        return self._zk

    def request_shutdown(self) -> None:
        """Thread-safe: ask run() to shut the broker down."""
        if self._loop is not None and self._shutdown_requested is not None:
            self._loop.call_soon_threadsafe(self._shutdown_requested.set)

    async def startup(self) -> None:
        config = self.config
        logger.info("starting")
        logger.info("%s", config.dump())
        if message_format.precedes_v2(config.log_message_format_version):
            logger.warning(message_format.broker_warning(config.log_message_format_version))
        tune_malloc()
        zk, cluster_id = await self._connect_zookeeper()
        await asyncio.to_thread(self._await_stale_registration, zk)
        topic_configs = TopicConfigs(config)
        log_manager = LogManager(config.log_dir_paths, topic_configs.default.log, broker_id=self.broker_id,
                                 time_ms=self._time_ms, recovery_threads=config.num_recovery_threads_per_data_dir,
                                 log_dir_failure_channel=LogDirFailureChannel(),
                                 producer_id_expiration_ms=config.producer_id_expiration_ms)
        await asyncio.to_thread(log_manager.startup, _StartupTopicConfigs(zk, topic_configs))
        # The loaded logs live as long as their replicas: out of the full collections' walk, as created ones are.
        freeze_long_lived_objects()
        # Only now may shutdown close the logs: a clean-shutdown marker written after a failed
        # start-up would make the next one skip recovering logs that were never recovered.
        self._log_manager = log_manager

        loop = asyncio.get_running_loop()
        timer = AsyncioTimer(loop)
        metadata_cache = MetadataCache(self.broker_id)
        self._isr_change_propagator = IsrChangePropagator(zk.propagate_isr_changes, self._time_ms,
                                                          self._isr_change_propagation)
        self._replica_manager = replica_manager = ReplicaManager(
            self.broker_id, log_manager=log_manager, metadata_cache=metadata_cache,
            default_topic_config=topic_configs.default, timer=timer, time_ms=self._time_ms,
            fetcher_manager=self._replica_fetcher_manager,
            state_store=ZkPartitionStateStore(zk, self._isr_change_propagator, self.metrics),
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            isr_update_executor=ThreadPoolExecutor(1, thread_name_prefix="isr-update"), metrics=self.metrics,
            fetch_session_cache_slots=config.max_incremental_fetch_session_cache_slots)
        # A fetch naming thousands of partitions is read a chunk per loop callback, not in one (issue 27).
        replica_manager.chunked_reader = ChunkedReader(loop)
        self.metrics.bind_log_dir_failure(offline_log_dirs=lambda: log_manager.offline_log_dir_count,
                                          offline_replicas=lambda: replica_manager.offline_partition_count)
        # As Kafka's ReplicaManager.startup: from here on a failed log dir takes its partitions offline.
        self._log_dir_failure_handler = LogDirFailureHandler(
            log_manager.failure_channel, replica_manager.handle_log_dir_failure,
            functools.partial(zk.propagate_log_dir_event, self.broker_id))
        self._log_dir_failure_handler.start()
        self._topic_purgatory = DelayedOperationPurgatory("topic", timer)
        fetchers = self._fetcher_manager
        assert fetchers is not None  # made by the ReplicaManager just above
        credentials = CredentialCache()
        self._dynamic_config = DynamicConfigManager(self.broker_id, zk, topic_configs, replica_manager,
                                                    fetchers.resize_thread_pool, config.num_replica_fetchers,
                                                    credentials)
        await asyncio.to_thread(self._dynamic_config.startup)
        admin_manager = AdminManager(config, zk, topic_configs)
        self.group_coordinator = group_coordinator = self._group_coordinator(
            replica_manager, metadata_cache, admin_manager, timer, loop)
        if config.authorizer_class_name.strip():
            # Loaded before any listener opens, so no request is ever decided on an empty cache.
            self._acl_store = ZkAclStore(zk, AclAuthorizer(parse_super_users(config.super_users),
                                                           config.allow_everyone_if_no_acl_found))
            await asyncio.to_thread(self._acl_store.startup)
        # The collaborators are shared: one producer id manager, one purgatory, whatever the listener.
        security = inter_broker_security(config)
        controller_channel = ControllerChannel(zk, security, cluster_credential_metadata(
            None if config.cluster_credential is None else config.cluster_credential.value, security.tls))
        producer_ids = ProducerIdManager(self.broker_id, zk.allocate_producer_id_block)
        self.transaction_coordinator = transaction_coordinator = self._transaction_coordinator(
            replica_manager, metadata_cache, producer_ids, loop)
        operations = BrokerOperations(
            config, replica_manager=replica_manager, metadata_cache=metadata_cache, admin_manager=admin_manager,
            producer_ids=producer_ids,
            topic_purgatory=self._topic_purgatory, loop=loop,
            config_admin=ConfigAdmin(config, zk, topic_configs), acl_store=self._acl_store,
            scram_admin=UserScramAdmin(zk), controller_channel=controller_channel,
            pools=self._pools, on_offsets_txn_completion=group_coordinator.handle_txn_completion)
        self._bind_local_markers(operations)
        groups = GroupOperations(group_coordinator, operations)
        transactions = TransactionOperations(
            transaction_coordinator, operations, metadata_cache,
            TransactionStateTopic(metadata_cache, config.transaction_state_log_num_partitions,
                                  config.transaction_state_log_replication_factor,
                                  config.transaction_state_log_min_isr, config.transaction_state_log_segment_bytes,
                                  admin_manager.create_topics, self._pools.zookeeper_executor),
            lambda group_id: TopicPartition(GROUP_METADATA_TOPIC_NAME, group_coordinator.partition_for(group_id)))
        apis = functools.partial(
            KafkaApis,
            config, operations=operations, groups=groups, transactions=transactions,
            topic_configs=topic_configs, zk=zk, topic_purgatory=self._topic_purgatory,
            broker_epoch=lambda: self.broker_epoch, cluster_id=cluster_id, metrics=self.metrics,
            controller_requests=self._controller_requests,
        )
        kafka_context = functools.partial(
            KafkaContext, config, operations, cluster_id, self.metrics, groups=groups, transactions=transactions)
        health_servicer = health.aio.HealthServicer()
        self._health = health_servicer
        bound_ports = await self._start_grpc_servers(apis, health_servicer, credentials)
        bound_ports.update(await self._start_kafka_listeners(kafka_context, credentials))
        await self._register(zk, bound_ports)
        await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        self._log_cleaner = self._start_log_cleaner(log_manager, replica_manager)
        self._scheduler = KafkaScheduler(config.background_threads)
        self._schedule_periodic_tasks(self._scheduler, log_manager, replica_manager, self._isr_change_propagator)
        if config.metrics_port:
            self.metrics.serve(config.metrics_port)
        logger.info("[KafkaServer id=%d] started (broker epoch %d)", self.broker_id, self.broker_epoch)

    def _group_coordinator(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                           admin_manager: AdminManager, timer: AsyncioTimer,
                           loop: asyncio.AbstractEventLoop) -> GroupCoordinator:
        """The group coordinator on __consumer_offsets; the ReplicaManager tells it which of the topic's partitions
        this broker leads (Kafka's onLeadershipChange), on the event loop whichever thread applied the change."""
        config = self.config
        storage = ReplicaManagerStorage(replica_manager, config.offsets_commit_required_acks,
                                        config.offsets_commit_timeout_ms, loop)
        manager = GroupMetadataManager(
            self.broker_id,
            OffsetsConfig(num_partitions=config.offsets_topic_num_partitions,
                          retention_ms=config.offsets_retention_minutes * 60 * 1000,
                          metadata_max_bytes=config.offset_metadata_max_bytes,
                          load_buffer_size=config.offsets_load_buffer_size),
            storage.append, self._time_ms, storage.read_log, load_executor=self._pools.disk_executor)
        offsets_topic = OffsetsTopic(metadata_cache, config.offsets_topic_num_partitions,
                                     config.offsets_topic_replication_factor, config.offsets_topic_segment_bytes,
                                     admin_manager.create_topics, self._pools.zookeeper_executor)
        coordinator = GroupCoordinator(
            self.broker_id,
            GroupConfig(min_session_timeout_ms=config.group_min_session_timeout_ms,
                        max_session_timeout_ms=config.group_max_session_timeout_ms,
                        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                        max_size=config.group_max_size),
            manager, DelayedOperationPurgatory("Heartbeat", timer), DelayedOperationPurgatory("Rebalance", timer),
            metadata_cache, offsets_topic.ensure, self._time_ms)
        self.metrics.bind_group_metadata_manager(manager.metrics())
        replica_manager.add_leadership_listener(on_the_loop(loop, coordinator.on_leadership_change))
        coordinator.startup()
        return coordinator

    def _transaction_coordinator(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                                 producer_ids: ProducerIdManager,
                                 loop: asyncio.AbstractEventLoop) -> TransactionCoordinator:
        """The transaction coordinator on __transaction_state, its markers sent on the inter-broker listener; the
        ReplicaManager tells it which of the topic's partitions this broker leads (Kafka's onLeadershipChange),
        on the event loop whichever thread applied the change."""
        config = self.config
        storage = CoordinatorStorage(replica_manager, loop)
        manager = TransactionStateManager(
            self.broker_id,
            TransactionConfig(num_partitions=config.transaction_state_log_num_partitions,
                              transaction_max_timeout_ms=config.transaction_max_timeout_ms,
                              transactional_id_expiration_ms=config.transactional_id_expiration_ms,
                              load_buffer_size=config.transaction_state_log_load_buffer_size),
            # Kafka's TransactionLog.EnforcedRequiredAcks: every transition waits for the in-sync replicas.
            lambda tp, batch, timeout_ms: storage.append_records(tp, batch, -1, timeout_ms),
            self._time_ms, storage.log_reader, load_executor=self._pools.disk_executor)
        coordinator = TransactionCoordinator(self.broker_id, manager, producer_ids.generate_producer_id,
                                             self._time_ms, self._pools.zookeeper_executor)
        listener = config.inter_broker_listener

        def endpoint_for(broker_id: int) -> tuple[str, int] | None:
            node = next((n for n in metadata_cache.get_alive_brokers(listener) if n.id == broker_id), None)
            return None if node is None else (node.host, node.port)

        def leader_for(tp: TopicPartition) -> int | None:
            info = metadata_cache.get_partition_info(tp)
            return None if info is None else info.leader

        credential = None if config.cluster_credential is None else config.cluster_credential.value
        self._marker_sender = sender = GrpcMarkerSender(endpoint_for, inter_broker_security(config), credential,
                                                        config.request_timeout_ms, self.broker_id)
        coordinator.bind_marker_channel(TransactionMarkerChannelManager(
            leader_for, metadata_cache.contains_topic, sender.send, coordinator.is_current,
            coordinator.complete_transaction, MARKER_RETRY_BACKOFF_MS))
        replica_manager.add_leadership_listener(on_the_loop(loop, coordinator.on_leadership_change))
        return coordinator

    def _bind_local_markers(self, operations: BrokerOperations) -> None:
        """The marker channel appends the markers of this broker's own partitions as the gRPC door would."""
        assert self._marker_sender is not None

        async def local(markers: Sequence[WritableTxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
            return await operations.append_txn_markers([
                TxnMarker(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, list(m.partitions))
                for m in markers])

        self._marker_sender.bind_local(local)

    def _start_log_cleaner(self, log_manager: LogManager, replica_manager: ReplicaManager) -> LogCleaner:
        config = self.config

        def high_watermark(tp: TopicPartition) -> int:
            # A log no partition hosts yet has no known high watermark: nothing of it is cleanable.
            hw = replica_manager.high_watermark(tp)
            return 0 if hw is None else hw

        cleaner = LogCleaner(
            CleanerConfig(num_threads=config.log_cleaner_threads,
                          dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                          max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                          backoff_ms=config.log_cleaner_backoff_ms, enable_cleaner=config.log_cleaner_enable),
            log_manager.log_dirs, log_manager.all_logs, self._time_ms, high_watermark, log_manager.failure_channel)
        self.metrics.bind_log_cleaner(
            max_dirty_percent=cleaner.max_dirty_percent, cleaner_recopy_percent=cleaner.cleaner_recopy_percent,
            max_clean_time_secs=cleaner.max_clean_time_secs,
            uncleanable_partitions_count=cleaner.uncleanable_partitions_count)
        cleaner.startup()
        return cleaner

    def _replica_fetcher_manager(self, partitions: PartitionLookup) -> ReplicaFetcherManager:
        config = self.config
        fetcher_config = replica_fetcher_config(config)
        credential = None if config.cluster_credential is None else config.cluster_credential.value

        security = inter_broker_security(config)

        def connect(leader: BrokerEndPoint) -> ReplicaFetcherBlockingSend:
            return ReplicaFetcherBlockingSend(leader, self.broker_id, credential, fetcher_config, security)

        self._fetcher_manager = ReplicaFetcherManager(self.broker_id, fetcher_config, connect, partitions)
        return self._fetcher_manager

    async def _connect_zookeeper(self) -> tuple[KafkaZkClient, str]:
        config = self.config
        logger.info("Connecting to zookeeper on %s", config.zookeeper_connect)
        timeout_ms = config.zookeeper_connection_timeout_millis
        try:
            self._zk = zk = await asyncio.to_thread(KafkaZkClient.connect, config.zookeeper_connect,
                                                    config.zookeeper_session_timeout_ms, timeout_ms / 1000,
                                                    config.zk_security)
        except KazooTimeoutError:
            raise BrokerStartupError(f"cannot connect to ZooKeeper at {config.zookeeper_connect} within"
                                     f" {timeout_ms} ms (zookeeper.connection.timeout.ms)") from None
        await asyncio.to_thread(zk.ensure_persistent_paths)
        cluster_id = await asyncio.to_thread(zk.get_or_create_cluster_id)
        logger.info("Cluster ID = %s", cluster_id)
        return zk, cluster_id

    async def _start_grpc_servers(self, apis: Callable[..., KafkaApis], health_servicer: health.aio.HealthServicer,
                                  credentials: CredentialCache) -> dict[str, int]:
        """On every listener, serve the client and cluster APIs and health checking (NOT_SERVING until
        registered); the bound port by listener name."""
        await health_servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        bound_ports = {}
        for listener in self.config.listener_endpoints:
            if not self.config.speaks_grpc(listener.listener_name):
                continue
            name = listener.listener_name
            security = listener_security(self.config, name)
            # A TLS handshake that never finishes is cut after ssl.handshake.timeout.ms (gRPC's default: 120 s).
            options = [*_GRPC_OPTIONS, ("grpc.server_handshake_timeout_ms", self.config.ssl_handshake_timeout_ms)]
            authenticator = GrpcAuthenticator.for_listener(self.config, name, scram_password_check(credentials),
                                                           self._password_checks)
            server = grpc.aio.server(options=options, interceptors=[authenticator.interceptor()])
            listener_apis = apis(listener_name=name, authenticator=authenticator)
            pb_grpc.add_KafkaClientServicer_to_server(listener_apis, server)
            pb_grpc.add_KafkaClusterServicer_to_server(listener_apis, server)
            health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
            address = _grpc_address(listener.host or "0.0.0.0", listener.port)
            try:
                port = (server.add_secure_port(address, security.server_credentials(
                    requires_client_certificates(self.config, name))) if security.tls
                        else server.add_insecure_port(address))
            except RuntimeError as e:
                raise BrokerStartupError(f"cannot listen on {address}: {e}") from None
            if not port:
                raise BrokerStartupError(f"cannot listen on {address}: the port is taken or the address is not local")
            await server.start()
            self._grpc_servers.append(server)
            bound_ports[listener.listener_name] = port
            logger.info("Listening on %s for listener %s (port %d, gRPC%s)", address, listener.listener_name, port,
                        " over TLS" if security.tls else "")
        return bound_ports

    async def _start_kafka_listeners(self, context: Callable[[str], KafkaContext],
                                     credentials: CredentialCache) -> dict[str, int]:
        """Apache Kafka's wire protocol on every listener not named in grpc.listener.names, with its security
        protocol (TLS, SASL); the bound port by listener name."""
        bound_ports = {}
        for listener in self.config.listener_endpoints:
            if self.config.speaks_grpc(listener.listener_name):
                continue
            try:
                security = ListenerSecurity.of(self.config, listener.listener_name, listener.security_protocol,
                                               credentials)
            except ConfigError as e:
                raise BrokerStartupError(str(e)) from None
            server = KafkaListener(context(listener.listener_name), listener.host or "0.0.0.0", listener.port,
                                   security)
            address = _grpc_address(listener.host or "0.0.0.0", listener.port)
            try:
                port = await server.start()
            except OSError as e:
                raise BrokerStartupError(f"cannot listen on {address}: {e}") from None
            self._kafka_listeners.append(server)
            bound_ports[listener.listener_name] = port
            logger.info("Listening on %s for listener %s (port %d, Kafka protocol, %s)", address,
                        listener.listener_name, port, listener.security_protocol)
        return bound_ports

    async def _register(self, zk: KafkaZkClient, bound_ports: Mapping[str, int]) -> None:
        """/brokers/ids/<id> with the advertised endpoints; its czxid is the broker epoch."""
        self._registration = BrokerInfo(
            id=self.broker_id,
            endpoints=tuple(
                # Kafka advertises the canonical host name when the listener names no host.
                e._replace(host=e.host or socket.getfqdn(), port=e.port or bound_ports[e.listener_name])
                for e in self.config.advertised_endpoints
            ),
            rack=self.config.broker_rack,
        )
        self.broker_epoch = await asyncio.to_thread(zk.register_broker, self._registration)
        zk.on_new_session(self._reregister)

    def _schedule_periodic_tasks(self, scheduler: KafkaScheduler, log_manager: LogManager,
                                 replica_manager: ReplicaManager, propagator: IsrChangePropagator) -> None:
        config = self.config
        scheduler.schedule("kafka-log-retention",
                           lambda: log_manager.cleanup_logs(replica_manager.high_watermark,
                                                            replica_manager.log_start_offset_moved),
                           INITIAL_TASK_DELAY_MS, config.log_retention_check_interval_ms)
        scheduler.schedule("kafka-log-flusher", log_manager.flush_dirty_logs,
                           INITIAL_TASK_DELAY_MS, config.log_flush_scheduler_interval_ms)
        scheduler.schedule("kafka-recovery-point-checkpoint", log_manager.checkpoint_log_offsets,
                           INITIAL_TASK_DELAY_MS, config.log_flush_offset_checkpoint_interval_ms)
        hw_interval = config.replica_high_watermark_checkpoint_interval_ms
        scheduler.schedule("highwatermark-checkpoint", replica_manager.checkpoint_high_watermarks,
                           hw_interval, hw_interval)
        scheduler.schedule("PeriodicProducerExpirationCheck", log_manager.remove_expired_producers,
                           config.producer_id_expiration_check_interval_ms,
                           config.producer_id_expiration_check_interval_ms)
        isr_expiration_ms = config.replica_lag_time_max_ms // 2
        scheduler.schedule("isr-expiration", replica_manager.maybe_shrink_isr, isr_expiration_ms, isr_expiration_ms)
        if self.group_coordinator is not None and self._loop is not None:
            coordinator, loop = self.group_coordinator, self._loop
            scheduler.schedule(
                "delete-expired-group-metadata",
                lambda: asyncio.run_coroutine_threadsafe(coordinator.cleanup_group_metadata(), loop).result(),
                0, config.offsets_retention_check_interval_ms)
        if self.transaction_coordinator is not None and self._loop is not None:
            txn_coordinator, loop = self.transaction_coordinator, self._loop
            abort_ms = config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            scheduler.schedule(
                "transaction-abort",
                lambda: asyncio.run_coroutine_threadsafe(txn_coordinator.abort_timed_out_transactions(),
                                                         loop).result(),
                abort_ms, abort_ms)
            expire_ms = config.transaction_remove_expired_transaction_cleanup_interval_ms
            scheduler.schedule(
                "transactionalId-expiration",
                lambda: asyncio.run_coroutine_threadsafe(
                    txn_coordinator.txn_manager.remove_expired_transactional_ids(), loop).result(),
                expire_ms, expire_ms)
        propagation_ms = propagator.config.check_interval_ms
        scheduler.schedule("isr-change-propagation", propagator.maybe_propagate_isr_changes, propagation_ms,
                           propagation_ms)

    def _await_stale_registration(self, zk: KafkaZkClient) -> None:
        """Wait until no other session holds /brokers/ids/<id>, or give up at the session timeout.

        After a kill -9 the previous incarnation's ephemeral znode lives until its
        session times out; a broker that is really running keeps it alive, and
        starting a second one on the same id (and likely the same log dirs) must
        fail before any log is opened.
        """
        timeout_s = self.config.zookeeper_session_timeout_ms / 1000 + 2 * _REGISTRATION_POLL_S + 1
        deadline = time.monotonic() + timeout_s
        existing = zk.get_broker(self.broker_id)
        if existing is None:
            return
        logger.info("broker id %d is registered by another ZooKeeper session (%s): waiting up to %.1fs for it to"
                    " expire", self.broker_id, existing.connection_strings, timeout_s)
        while zk.get_broker(self.broker_id) is not None:
            if time.monotonic() >= deadline:
                raise DuplicateBrokerIdError(
                    f"broker id {self.broker_id} is registered in ZooKeeper by a live session (endpoint"
                    f" {existing.connection_strings}): is another broker running with broker.id={self.broker_id}?")
            time.sleep(_REGISTRATION_POLL_S)

    def _reregister(self) -> None:
        """On a new ZooKeeper session (kazoo's thread): the old one took the registration with it."""
        if self._zk is None or self._registration is None:
            return
        try:
            self.broker_epoch = self._zk.register_broker(self._registration)
            logger.info("Re-registered broker %d after a new ZooKeeper session, broker epoch %d", self.broker_id,
                        self.broker_epoch)
        except Exception:
            logger.exception("Failed to re-register broker %d; shutting down", self.broker_id)
            self.request_shutdown()

    async def shutdown(self) -> None:
        """Stop whatever was started, in reverse; safe after a failed start-up."""
        logger.info("[KafkaServer id=%d] shutting down", self.broker_id)
        # While still serving: the new leaders' followers (this broker among them) keep fetching meanwhile.
        if self._registration is not None and self.config.controlled_shutdown_enable:
            await asyncio.to_thread(self._controlled_shutdown)
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._scheduler is not None:
            await self._scheduler.shutdown()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self._marker_sender is not None:
            await self._marker_sender.close()
        if self._dynamic_config is not None:
            await asyncio.to_thread(self._dynamic_config.shutdown)
        if self._acl_store is not None:
            await asyncio.to_thread(self._acl_store.shutdown)
        stopping = asyncio.gather(*(server.stop(SHUTDOWN_GRACE_S) for server in self._grpc_servers),
                                  *(listener.stop() for listener in self._kafka_listeners))
        # Requests parked in purgatory are answered now rather than cut off by the grace period.
        if self._topic_purgatory is not None:
            self._topic_purgatory.complete_all()
        if self._replica_manager is not None:
            self._replica_manager.delayed_produce_purgatory.complete_all()
            self._replica_manager.delayed_fetch_purgatory.complete_all()
        await stopping
        self._password_checks.shutdown(wait=False, cancel_futures=True)
        if self._log_cleaner is not None:
            await asyncio.to_thread(self._log_cleaner.shutdown)
        if self._log_dir_failure_handler is not None:
            await asyncio.to_thread(self._log_dir_failure_handler.shutdown)
        # Every gRPC server has stopped: no controller request is coming; let the one being applied finish.
        await asyncio.to_thread(self._controller_requests.shutdown)
        await asyncio.to_thread(self._pools.shutdown)
        if self._replica_manager is not None:
            await asyncio.to_thread(self._replica_manager.shutdown)
        if self._log_manager is not None:
            await asyncio.to_thread(self._log_manager.shutdown)
        self.metrics.close()
        if self._zk is not None:
            await asyncio.to_thread(self._zk.close)
        logger.info("[KafkaServer id=%d] shut down completed", self.broker_id)


    def _controlled_shutdown(self) -> None:
        """Kafka's KafkaServer.controlledShutdown: ask the active controller to move this broker's leadership
        away, up to controlled.shutdown.max.retries times, until it leads nothing the others could lead. Clients
        then meet a leader change (retriable) instead of a dead leader (a session timeout's wait)."""
        assert self._zk is not None
        config = self.config
        credential = None if config.cluster_credential is None else config.cluster_credential.value
        security = inter_broker_security(config)
        metadata = cluster_credential_metadata(credential, security.tls)
        request = pb.ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch)
        logger.info("Starting controlled shutdown")
        for attempt in range(config.controlled_shutdown_max_retries):
            if attempt:
                logger.warning("Retrying controlled shutdown after the previous attempt failed...")
                time.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
            try:
                endpoint = self._zk.get_controller_endpoint()
            except KazooException as e:
                # A session that expired while this broker was cut off: kazoo opens a new one meanwhile.
                logger.warning("Error during controlled shutdown, cannot read the controller from ZooKeeper: %r", e)
                continue
            if endpoint is None:
                logger.warning("No controller registered while requesting controlled shutdown")
                continue
            try:
                with security.channel(endpoint) as channel:
                    response = pb_grpc.KafkaControllerStub(channel).ControlledShutdown(
                        request, metadata=metadata, timeout=config.request_timeout_ms / 1000
                    )
            except grpc.RpcError as e:
                logger.warning("Error during controlled shutdown, possibly because leader movement took longer than "
                               "the configured request.timeout.ms: %s", e.details() if isinstance(e, grpc.Call) else e)
                continue
            if response.error_code == ErrorCode.NONE and not response.remaining_partitions:
                logger.info("Controlled shutdown succeeded")
                return
            remaining = [f"{tp.topic_name}-{tp.partition_index}" for tp in response.remaining_partitions]
            logger.info("Remaining partitions to move: %s", ",".join(remaining))
            logger.info("Error from controller: %s", error_for(response.error_code))
        logger.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")


class BrokerStartupError(Exception):
    """The broker cannot start; the message says why."""


class _StartupTopicConfigs:
    """Each topic's LogConfig for LogManager.startup, read from ZooKeeper once per topic (recovery threads
    call it concurrently)."""

    def __init__(self, zk: KafkaZkClient, topic_configs: TopicConfigs) -> None:
        self._zk = zk
        self._topic_configs = topic_configs
        self._lock = threading.Lock()
        self._cache: dict[str, LogConfig] = {}

    def __call__(self, topic: str) -> LogConfig:
        with self._lock:
            config = self._cache.get(topic)
            if config is None:
                try:
                    overrides = self._zk.get_topic_config(topic)
                except KafkaError:  # a directory name no topic can have: its log gets the defaults
                    overrides = {}
                config = self._topic_configs.load(topic, overrides).log
                self._cache[topic] = config
            return config


def _grpc_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
