"""KafkaConfig: the broker's configuration, with Kafka's names, types and defaults.

Every key a broker here reads, named and defaulted as in Kafka 2.8's
KafkaConfig.scala (the last 2.x; so zookeeper.session.timeout.ms=18000 and
replica.lag.time.max.ms=30000 from KIP-537 in 2.5, message.max.bytes=1048588
from 2.4), plus `producer.id.expiration.ms` and `producer.id.expiration.check.interval.ms`
(Kafka 3.4, KIP-854) and two keys of our own, `cluster.credential` and `metrics.port`. Validators are Kafka's, plus a
lower bound where Kafka has none but a value below it could only fail later
(e.g. num.replica.fetchers=0).

Each key is one dataclass field whose name is the key with '.' -> '_'
(`config.log_retention_hours` is `log.retention.hours`), so readers get typed
attributes and the dump gets the Kafka names back. An unknown key in a broker's
server.properties (or its --override) is a warning, as in Kafka, so Kafka's own
config/server.properties starts a broker: all of them in one line, Kafka's
"These configurations '[...]' were supplied but are not used yet.", with a
"did you mean" for a likely misspelling. Everywhere else (`cluster up
--override`, KAFKA_* variables, tests) an unknown key is an error.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from broker.config import message_format
from common.config import (
    DEFAULT_INTER_BROKER_LISTENER_NAME,
    DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP,
    GRPC_LISTENER_NAME,
    LONG_MAX,
    REQUIRED,
    ConfigError,
    ConfigKey,
    Password,
    Type,
    at_least,
    between,
    config_name,
    define,
    java_string,
    one_of,
    parse_csv,
    parse_endpoints,
    parse_security_protocol_map,
    read_properties,
    typed_values,
)
from common.recompression import COMPRESSION_TYPES
from common.record import HEADER_SIZE
from common.security.authorizer import invalid_authorizer_class_name, invalid_super_users
from proto.types import EndPoint
from zk.acl import ZkSecurity, zk_security_from_config

T = TypeVar("T")

LISTENER_PREFIX = "listener.name."
# The SASL mechanisms served on SASL_PLAINTEXT / SASL_SSL listeners (no GSSAPI, no OAUTHBEARER).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
JAAS_CONFIG = "sasl.jaas.config"

_MS_PER_MINUTE = 60 * 1000


_MS_PER_HOUR = 60 * _MS_PER_MINUTE

@dataclass(frozen=True, kw_only=True)
class KafkaConfig:
    # ZooKeeper
    zookeeper_connect: str = define(
        Type.STRING, REQUIRED, "ZooKeeper connection string host1:port1,host2:port2[/chroot]"
    )
    zookeeper_session_timeout_ms: int = define(Type.INT, 18000, "ZooKeeper session timeout", at_least(1))
    zookeeper_connection_timeout_ms: int | None = define(
        Type.INT, None, "Max wait to connect to ZooKeeper; zookeeper.session.timeout.ms if unset", at_least(1)
    )
    zookeeper_set_acl: bool = define(
        Type.BOOLEAN, False, "Create znodes with ACLs: only the cluster's ZooKeeper user may change them (zk/acl.py)"
    )
    zookeeper_max_in_flight_requests: int = define(
        Type.INT, 10, "The maximum number of unacknowledged requests the client will send to ZooKeeper before"
        " blocking: here the threads that run requests' ZooKeeper calls", at_least(1)
    )
    java_security_auth_login_config: str | None = define(
        Type.STRING, None, "JAAS login file whose Client section (DigestLoginModule username, password) is the"
        " ZooKeeper identity: Kafka's system property of this name"
    )

    # General
    broker_id: int = define(
        Type.INT,
        -1,
        "The broker id for this server, unique in the cluster",
        lambda v: None if v >= 0 else "broker.id must be set to a unique id >= 0 (ids are not generated here)",
    )
    broker_id_generation_enable: bool = define(
        Type.BOOLEAN,
        False,
        "Generate broker ids in ZooKeeper: not supported here, set broker.id",
        lambda v: "broker id generation is not supported; set broker.id" if v else None,
    )
    message_max_bytes: int = define(
        Type.INT, 1048588, "Largest record batch size allowed (topic config max.message.bytes)", at_least(0)
    )
    request_timeout_ms: int = define(Type.INT, 30000, "Timeout of requests this broker sends", at_least(0))
    background_threads: int = define(
        Type.INT, 10, "The number of threads to use for various background processing tasks", at_least(1)
    )
    num_io_threads: int = define(
        Type.INT, 8, "The number of threads that the server uses for processing requests, which may include disk"
        " I/O: here the threads that read log data for requests off the event loop", at_least(1)
    )

    # Listeners
    listeners: str = define(
        Type.STRING, f"PLAINTEXT://127.0.0.1:9092,{GRPC_LISTENER_NAME}://127.0.0.1:9192",
        "Comma-separated URIs to listen on; the ones named in grpc.listener.names serve gRPC, the others"
        " Apache Kafka's wire protocol",
    )
    grpc_listener_names: str = define(
        Type.STRING, GRPC_LISTENER_NAME,
        "Listener names served with minibroker's gRPC API (its own client, follower fetches, controller requests);"
        " inter.broker.listener.name must be one of them. Every other listener speaks Kafka's wire protocol",
    )
    advertised_listeners: str | None = define(
        Type.STRING, None, "Listeners published in ZooKeeper for clients; listeners if unset"
    )
    listener_security_protocol_map: str = define(
        Type.STRING, DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP, "Listener name -> security protocol, NAME:PROTOCOL,..."
    )
    inter_broker_listener_name: str | None = define(
        Type.STRING,
        None,
        f"Listener other brokers and controllers use (set the controllers' key alike: they pick it);"
        f" {DEFAULT_INTER_BROKER_LISTENER_NAME} if unset",
    )
    broker_rack: str | None = define(Type.STRING, None, "Rack of the broker")

    # Socket server (the Kafka-protocol listeners)
    socket_request_max_bytes: int = define(
        Type.INT, 104857600, "The maximum number of bytes in a socket request", at_least(1))
    connections_max_idle_ms: int = define(
        Type.LONG, 600000, "Idle connections timeout: connections idle longer than this are closed", at_least(1))
    max_connections: int = define(
        Type.INT, 2147483647, "The maximum number of connections the broker allows on its Kafka listeners",
        at_least(0))
    max_connections_per_ip: int = define(
        Type.INT, 2147483647, "The maximum number of connections the broker allows from each ip address",
        at_least(0))

    # TLS on the Kafka listeners (Kafka's ssl.* keys, PEM stores only: Kafka 2.7+'s ssl.keystore.type=PEM).
    # Each may be set for one listener as listener.name.<listener>.<key>, which wins over the plain key.
    ssl_keystore_type: str = define(Type.STRING, "JKS", "File format of the key store: only PEM is read here")
    ssl_keystore_location: str | None = define(
        Type.STRING, None, "The key store: a PEM file with the private key and its certificate chain")
    ssl_keystore_certificate_chain: Password | None = define(  # noqa: RUF009
        Type.PASSWORD, None, "The certificate chain in PEM, inline (instead of ssl.keystore.location)")
    ssl_keystore_key: Password | None = define(  # noqa: RUF009
        Type.PASSWORD, None, "The private key in PEM, inline (instead of ssl.keystore.location)")
    ssl_key_password: Password | None = define(  # noqa: RUF009
        Type.PASSWORD, None, "The password of the (encrypted) private key")
    ssl_truststore_type: str = define(Type.STRING, "JKS", "File format of the trust store: only PEM is read here")
    ssl_truststore_location: str | None = define(
        Type.STRING, None, "The trust store: a PEM file of the CA certificates client certificates are checked with")
    ssl_truststore_certificates: Password | None = define(  # noqa: RUF009
        Type.PASSWORD, None, "The trusted CA certificates in PEM, inline (instead of ssl.truststore.location)")
    ssl_client_auth: str = define(
        Type.STRING, "none", "Client certificates: none, requested (checked if sent) or required",
        one_of("none", "requested", "required"))
    ssl_enabled_protocols: str = define(
        Type.STRING, "TLSv1.2,TLSv1.3", "The TLS versions accepted",
        lambda v: None if parse_csv(v) and set(parse_csv(v)) <= {"TLSv1.2", "TLSv1.3"}
        else "expected a list of TLSv1.2 and TLSv1.3")
    ssl_cipher_suites: str = define(Type.STRING, "", "OpenSSL cipher list for TLSv1.2 (empty: the library's)")
    ssl_principal_mapping_rules: str = define(
        Type.STRING, "DEFAULT", "Rules mapping a client certificate's distinguished name to a principal name")
    # minibroker's own (Kafka has no handshake deadline but connections.max.idle.ms)
    ssl_handshake_timeout_ms: int = define(
        Type.INT, 10000, "A TLS handshake not finished within this is cut and logged", at_least(1))

    # SASL on the Kafka listeners
    sasl_enabled_mechanisms: str = define(
        Type.STRING, "GSSAPI", "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are served here")
    connection_failed_authentication_delay_ms: int = define(
        Type.INT, 100, "A failed authentication's response and close are delayed by this (slows guessing)",
        at_least(0))
    sasl_server_max_receive_size: int = define(
        Type.INT, 524288, "The largest request accepted before authentication", at_least(1))

    # Log
    num_partitions: int = define(Type.INT, 1, "Default number of partitions per topic", at_least(1))
    log_dir: str = define(Type.STRING, "/tmp/kafka-logs", "Log data directory (supplemental for log.dirs)")
    log_dirs: str | None = define(Type.STRING, None, "Comma-separated log data directories; log.dir if unset")
    # Kafka's floor is one v0 record (14 bytes); a segment here must hold a v2 batch header.
    log_segment_bytes: int = define(Type.INT, 1 << 30, "Maximum size of a single log segment", at_least(HEADER_SIZE))
    log_roll_ms: int | None = define(
        Type.LONG, None, "Maximum age of a segment before it rolls; log.roll.hours if unset"
    )
    log_roll_hours: int = define(
        Type.INT, 168, "Maximum age of a segment before it rolls, secondary to log.roll.ms", at_least(1)
    )
    log_retention_ms: int | None = define(
        Type.LONG, None, "Time to keep a log segment (-1: forever); log.retention.minutes if unset"
    )
    log_retention_minutes: int | None = define(
        Type.INT, None, "Time to keep a log segment, secondary to log.retention.ms; log.retention.hours if unset"
    )
    log_retention_hours: int = define(Type.INT, 168, "Time to keep a log segment, tertiary to log.retention.ms")
    log_retention_bytes: int = define(Type.LONG, -1, "Maximum size of a partition's log before deleting (-1: no limit)")
    log_retention_check_interval_ms: int = define(
        Type.LONG, 300000, "How often logs are checked for segments to delete", at_least(1)
    )
    log_index_size_max_bytes: int = define(Type.INT, 10 * 1024 * 1024, "Maximum size of an offset index", at_least(4))
    log_index_interval_bytes: int = define(Type.INT, 4096, "Bytes of log between two offset index entries", at_least(0))
    log_flush_interval_messages: int = define(
        Type.LONG, LONG_MAX, "Records appended to a partition before it is flushed", at_least(1)
    )
    log_flush_interval_ms: int | None = define(
        Type.LONG, None, "Maximum time a record stays unflushed; log.flush.scheduler.interval.ms if unset"
    )
    log_flush_scheduler_interval_ms: int = define(
        Type.LONG, LONG_MAX, "How often the log flusher checks whether a log needs flushing", at_least(1)
    )
    log_flush_offset_checkpoint_interval_ms: int = define(
        Type.INT, 60000, "How often the recovery point checkpoint is written", at_least(0)
    )
    log_flush_start_offset_checkpoint_interval_ms: int = define(
        Type.INT, 60000, "How often the log start offset checkpoint is written", at_least(0)
    )
    log_message_format_version: str = define(
        Type.STRING, message_format.DEFAULT_MESSAGE_FORMAT_VERSION,
        "Accepted and ignored, as from inter-broker protocol 3.0: every batch is written as v2",
        message_format.validate,
    )
    log_message_timestamp_type: str = define(
        Type.STRING,
        "CreateTime",
        "Record timestamps: the producer's or the broker's",
        one_of("CreateTime", "LogAppendTime"),
    )
    log_message_timestamp_difference_max_ms: int = define(
        Type.LONG, LONG_MAX, "Largest CreateTime distance from the broker's clock accepted", at_least(0)
    )
    num_recovery_threads_per_data_dir: int = define(
        Type.INT, 1, "Threads per data directory for log recovery at startup", at_least(1)
    )
    # Compaction (Kafka's log.cleaner.* keys; the topic-level defaults go to LogConfig through log_properties)
    compression_type: str = define(
        Type.STRING, "producer", "Default compression.type: the codec the leader writes batches with, or producer",
        one_of(*COMPRESSION_TYPES),
    )
    log_cleanup_policy: str = define(
        Type.STRING, "delete", "Default cleanup.policy: delete, compact or both (comma-separated)",
        lambda v: None if {p.strip() for p in v.split(",") if p.strip()} <= {"delete", "compact"} and v.strip()
        else "expected a list of delete and compact",
    )
    log_cleaner_enable: bool = define(Type.BOOLEAN, True, "Run the log cleaner (compacts cleanup.policy=compact logs)")
    log_cleaner_threads: int = define(Type.INT, 1, "Number of log cleaner threads", at_least(0))
    log_cleaner_dedupe_buffer_size: int = define(
        Type.LONG, 128 * 1024 * 1024, "Memory of the cleaners' key -> offset maps, over all threads", at_least(1024)
    )
    log_cleaner_io_max_bytes_per_second: float = define(
        Type.DOUBLE, 1.7976931348623157e308, "Read plus write I/O limit of the cleaner threads"
    )
    log_cleaner_backoff_ms: int = define(Type.LONG, 15000, "Sleep of a cleaner with nothing to clean", at_least(0))
    log_cleaner_min_cleanable_ratio: float = define(
        Type.DOUBLE, 0.5, "Default min.cleanable.dirty.ratio",
        lambda v: None if 0 <= v <= 1 else "Value must be in [0,1]",
    )
    log_cleaner_min_compaction_lag_ms: int = define(Type.LONG, 0, "Default min.compaction.lag.ms", at_least(0))
    log_cleaner_max_compaction_lag_ms: int = define(Type.LONG, LONG_MAX, "Default max.compaction.lag.ms", at_least(1))
    log_cleaner_delete_retention_ms: int = define(
        Type.LONG, 24 * _MS_PER_HOUR, "Default delete.retention.ms: how long tombstones are kept", at_least(0)
    )
    auto_create_topics_enable: bool = define(Type.BOOLEAN, True, "Create unknown topics on metadata requests")
    min_insync_replicas: int = define(Type.INT, 1, "Minimum ISR size for acks=all writes to succeed", at_least(1))
    delete_topic_enable: bool = define(Type.BOOLEAN, True, "Allow topics to be deleted")

    # Replication
    default_replication_factor: int = define(
        Type.INT, 1, "Replication factor of automatically created topics", at_least(1)
    )
    replica_lag_time_max_ms: int = define(
        Type.LONG, 30000, "A follower not caught up for this long is removed from the ISR", at_least(1)
    )
    replica_socket_timeout_ms: int = define(
        Type.INT, 30000, "Timeout of replica fetch requests; at least replica.fetch.wait.max.ms", at_least(1)
    )
    replica_fetch_max_bytes: int = define(Type.INT, 1024 * 1024, "Bytes per partition a follower fetches", at_least(0))
    replica_fetch_response_max_bytes: int = define(
        Type.INT, 10 * 1024 * 1024, "Bytes a follower's whole fetch response may carry", at_least(0)
    )
    replica_fetch_wait_max_ms: int = define(
        Type.INT, 500, "Longest a follower's fetch waits at the leader; <= replica.lag.time.max.ms", at_least(0)
    )
    replica_fetch_min_bytes: int = define(Type.INT, 1, "Bytes a follower's fetch waits for", at_least(0))
    replica_fetch_backoff_ms: int = define(Type.INT, 1000, "Sleep after a failed replica fetch", at_least(0))
    num_replica_fetchers: int = define(Type.INT, 1, "Fetcher threads per source broker", at_least(1))
    max_incremental_fetch_session_cache_slots: int = define(
        Type.INT, 1000, "Fetch sessions (KIP-227) this broker keeps for followers and consumers", at_least(0)
    )
    replica_high_watermark_checkpoint_interval_ms: int = define(
        Type.LONG, 5000, "How often high watermarks are checkpointed", at_least(1)
    )
    auto_leader_rebalance_enable: bool = define(
        Type.BOOLEAN, True, "Move leadership back to preferred replicas periodically"
    )
    leader_imbalance_check_interval_seconds: int = define(
        Type.LONG, 300, "How often the controller checks leader balance", at_least(1)
    )
    leader_imbalance_per_broker_percentage: int = define(
        Type.INT, 10, "Leader imbalance per broker (%) that triggers a rebalance", between(0, 100)
    )
    unclean_leader_election_enable: bool = define(
        Type.BOOLEAN, False, "Elect a leader outside the ISR as a last resort, losing data"
    )

    # Controlled shutdown
    controlled_shutdown_enable: bool = define(Type.BOOLEAN, True, "Move leadership away before shutting down")
    controlled_shutdown_max_retries: int = define(Type.INT, 3, "Controlled shutdown attempts", at_least(0))
    controlled_shutdown_retry_backoff_ms: int = define(
        Type.LONG, 5000, "Wait between controlled shutdown attempts", at_least(0)
    )

    # The group coordinator (broker/coordinator/group/) and __consumer_offsets
    group_min_session_timeout_ms: int = define(
        Type.INT, 6000, "The minimum allowed session timeout for registered consumers", at_least(0))
    group_max_session_timeout_ms: int = define(
        Type.INT, 1800000, "The maximum allowed session timeout for registered consumers", at_least(0))
    group_initial_rebalance_delay_ms: int = define(
        Type.INT, 3000, "How long the coordinator waits for more consumers to join a new group before the first"
        " rebalance", at_least(0))
    group_max_size: int = define(Type.INT, 2147483647, "The maximum number of consumers in a single group",
                                 at_least(1))
    offset_metadata_max_bytes: int = define(
        Type.INT, 4096, "The maximum size for a metadata entry associated with an offset commit", at_least(0))
    offsets_topic_num_partitions: int = define(
        Type.INT, 50, "The number of partitions for the offset commit topic (should not change after deployment)",
        at_least(1))
    offsets_topic_replication_factor: int = define(
        Type.INT, 3, "The replication factor for the offsets topic; its creation fails until the cluster has"
        " this many live brokers", at_least(1))
    offsets_topic_segment_bytes: int = define(
        Type.INT, 104857600, "The offsets topic segment bytes (kept small for faster compaction and loading)",
        at_least(HEADER_SIZE))
    offsets_load_buffer_size: int = define(
        Type.INT, 5242880, "Batch size for reading from the offsets segments when loading offsets into the cache",
        at_least(1))
    offsets_commit_required_acks: int = define(
        Type.INT, -1, "The required acks before the commit can be accepted (the default, -1, should not be"
        " overridden)", between(-1, 1))
    offsets_commit_timeout_ms: int = define(
        Type.INT, 5000, "An offset commit waits this long for the offsets topic's replicas, then fails",
        at_least(1))
    offsets_retention_check_interval_ms: int = define(
        Type.LONG, 600000, "Frequency at which to check for stale offsets", at_least(1))
    offsets_retention_minutes: int = define(Type.INT, 7 * 24 * 60, "How long committed offsets are kept", at_least(1))

    # Transaction coordinator (Kafka's TransactionLog and TransactionStateManager defaults)
    transaction_state_log_num_partitions: int = define(
        Type.INT, 50, "The number of partitions for the transaction topic (should not change after deployment)",
        at_least(1))
    transaction_state_log_replication_factor: int = define(
        Type.INT, 3, "The replication factor for the transaction topic; its creation fails until the cluster"
        " has this many live brokers", at_least(1))
    transaction_state_log_min_isr: int = define(
        Type.INT, 2, "Overridden min.insync.replicas config for the transaction topic", at_least(1))
    transaction_state_log_segment_bytes: int = define(
        Type.INT, 104857600, "The transaction topic segment bytes (kept small for faster compaction and loading)",
        at_least(1))
    transaction_state_log_load_buffer_size: int = define(
        Type.INT, 5242880, "Batch size for reading from the transaction log segments when loading producer ids and"
        " transactions into the cache", at_least(1))
    transaction_max_timeout_ms: int = define(
        Type.INT, 900000, "The maximum allowed timeout for transactions; a client asking for more gets"
        " INVALID_TRANSACTION_TIMEOUT from InitProducerId", at_least(1))
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = define(
        Type.INT, 10000, "The interval at which to rollback transactions that have timed out", at_least(1))
    transaction_remove_expired_transaction_cleanup_interval_ms: int = define(
        Type.INT, 3600000, "The interval at which to remove transactions that have expired due to"
        " transactional.id.expiration.ms passing", at_least(1))
    transactional_id_expiration_ms: int = define(
        Type.INT, 7 * 24 * _MS_PER_HOUR, "Idle time after which a transactional id expires", at_least(1)
    )

    # Producer ids
    producer_id_expiration_ms: int = define(
        Type.INT, 24 * _MS_PER_HOUR, "Idle time after which a producer id's state expires", at_least(1)
    )
    producer_id_expiration_check_interval_ms: int = define(
        Type.INT, 10 * 60 * 1000, "The interval at which to remove producer ids that have expired due to"
        " producer.id.expiration.ms passing", at_least(1)
    )

    # Authorization (Kafka's authorizer.class.name and AclAuthorizer's own keys, which Kafka passes through)
    authorizer_class_name: str = define(
        Type.STRING, "", "The authorizer: kafka.security.authorizer.AclAuthorizer, or empty for none",
        invalid_authorizer_class_name,
    )
    super_users: str | None = define(
        Type.STRING, None, "Principals allowed everything, separated by semicolons: User:admin;User:broker",
        invalid_super_users,
    )
    allow_everyone_if_no_acl_found: bool = define(
        Type.BOOLEAN, False, "Whether a resource without any ACL is open to everyone (else to super users only)"
    )

    # minibroker's own
    cluster_credential: Password | None = define(  # noqa: RUF009 (_key returns a dataclasses.field)
        Type.PASSWORD,
        None,
        "Shared secret cluster actions carry as gRPC metadata x-cluster-credential; unset: not checked",
    )
    metrics_port: int = define(Type.INT, 0, "Port of the Prometheus metrics endpoint (0: off)", between(0, 65535))

    # listener.name.<listener>.<key> -> typed value: per-listener ssl.* / sasl.* keys and each mechanism's
    # JAAS config (listener.name.<listener>.<mechanism>.sasl.jaas.config), as Kafka's ListenerName.configPrefix.
    listener_overrides: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for key, value in [*self.values().items(), *self.listener_overrides]:
            spec = _KEYS.get(key) or _listener_key_spec(key)
            assert spec is not None  # from_props admits no other key
            if value is None:
                if spec.required:
                    raise ConfigError(key, None, "Missing required configuration which has no default value")
                continue
            if spec.validator is not None and (reason := spec.validator(value)) is not None:
                raise ConfigError(key, value, reason)
        self._check_combinations()

    def _check_combinations(self) -> None:
        # Kafka's KafkaConfig.validateValues, for the keys this broker has.
        if self.log_roll_time_millis < 1:
            raise ConfigError("log.roll.ms", self.log_roll_time_millis, "log.roll.ms must be at least 1")
        retention = self.log_retention_time_millis
        if retention != -1 and retention < 1:
            raise ConfigError("log.retention.ms", retention, "must be unlimited (-1) or at least 1")
        if not self.log_dir_paths:
            raise ConfigError(
                "log.dirs",
                self.log_dirs or self.log_dir,
                "at least one log directory must be defined via log.dirs or log.dir",
            )
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.replica_fetch_wait_max_ms,
                "must not exceed replica.socket.timeout.ms, or replica fetches time out for no reason",
            )
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.replica_fetch_wait_max_ms,
                "must not exceed replica.lag.time.max.ms, or idle followers keep leaving the ISR",
            )
        self._check_listeners()
        self._check_security()
        self.zk_security  # noqa: B018 (raises ConfigError on a bad JAAS file)

    def _check_security(self) -> None:
        for endpoint in self.listener_endpoints:
            name, protocol = endpoint.listener_name, endpoint.security_protocol
            if self.speaks_grpc(name):
                self._check_grpc_listener(name, protocol)  # then an SSL one needs PEM stores, as below
            if protocol.startswith("SASL_"):
                key = self.listener_key(name, "sasl.enabled.mechanisms")
                mechanisms = parse_csv(self.for_listener(name, "sasl.enabled.mechanisms"))
                unserved = [m for m in mechanisms if m not in SASL_MECHANISMS]
                if not mechanisms or unserved:
                    raise ConfigError(key, ",".join(mechanisms),
                                      f"listener {name} ({protocol}) needs SASL mechanisms served here:"
                                      f" {', '.join(SASL_MECHANISMS)}")
            if protocol.endswith("SSL"):
                for store in ("ssl.keystore.type", "ssl.truststore.type"):
                    if self.for_listener(name, store) != "PEM":
                        raise ConfigError(self.listener_key(name, store), self.for_listener(name, store),
                                          f"listener {name} ({protocol}): only PEM stores are read here")
                if not (self.for_listener(name, "ssl.keystore.location")
                        or self.for_listener(name, "ssl.keystore.certificate.chain")):
                    raise ConfigError(self.listener_key(name, "ssl.keystore.location"), None,
                                      f"listener {name} ({protocol}) needs a key store: ssl.keystore.location or"
                                      " ssl.keystore.certificate.chain with ssl.keystore.key")

    def _check_grpc_listener(self, name: str, protocol: str) -> None:
        """A gRPC listener is PLAINTEXT or SSL (SASL users authenticate with each call over TLS: no SASL_*), and
        a TLS one takes client certificates or not: gRPC cannot ask for one without requiring it
        (broker/security/grpc_authentication.py)."""
        if protocol not in ("PLAINTEXT", "SSL"):
            raise ConfigError("listener.security.protocol.map", self.listener_security_protocol_map,
                              f"gRPC listener {name} must be PLAINTEXT or SSL (SASL users authenticate on an SSL"
                              " gRPC listener with each call)")
        if protocol == "SSL" and self.for_listener(name, "ssl.client.auth") == "requested":
            raise ConfigError(self.listener_key(name, "ssl.client.auth"), "requested",
                              f"gRPC listener {name} takes ssl.client.auth none or required (gRPC cannot ask for"
                              " a client certificate without requiring it)")

    def listener_key(self, listener_name: str, key: str) -> str:
        """Where one listener's `key` comes from: listener.name.<listener>.<key> (Kafka's ListenerName.configPrefix
        + key) if that is set, else `key` itself; for messages naming the key to fix."""
        prefixed = _prefixed(listener_name, key)
        return prefixed if prefixed in dict(self.listener_overrides) else key

    def for_listener(self, listener_name: str, key: str) -> Any:
        """`key`'s value on one listener: listener.name.<listener>.<key> if set, else the broker-wide key (none
        for a mechanism's sasl.jaas.config, which Kafka's brokers read only listener-prefixed)."""
        prefixed = dict(self.listener_overrides).get(_prefixed(listener_name, key))
        if prefixed is not None:
            return prefixed
        return getattr(self, key.replace(".", "_"), None) if key in _KEYS else None

    def _check_listeners(self) -> None:
        # KafkaConfig.validateValues' listener rules; each parse raises on a malformed value.
        protocols = self._parsed("listener.security.protocol.map", self.listener_security_protocol_map,
                                 parse_security_protocol_map)
        listener_names = [e.listener_name for e in self._parsed(
            "listeners", self.listeners, lambda text: parse_endpoints(text, protocols, require_distinct_ports=True))]
        advertised = self.advertised_endpoints if self.advertised_listeners is None else self._parsed(
            "advertised.listeners", self.advertised_listeners, lambda text: parse_endpoints(text, protocols))
        advertised_names = [e.listener_name for e in advertised]
        if not set(advertised_names) <= set(listener_names):
            raise ConfigError(
                "advertised.listeners",
                self.advertised_listeners,
                f"advertised.listeners listener names must be equal to or a subset of the ones defined in listeners."
                f" Found {','.join(advertised_names)}. The valid options based on the current configuration are"
                f" {','.join(listener_names)}",
            )
        if any(e.host == "0.0.0.0" for e in advertised):
            raise ConfigError(
                "advertised.listeners",
                self.advertised_listeners or self.listeners,
                "cannot advertise the nonroutable meta-address 0.0.0.0; use a routable IP address",
            )
        if self.inter_broker_listener not in advertised_names:
            raise ConfigError(
                "inter.broker.listener.name",
                self.inter_broker_listener_name,
                "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid"
                f" options based on currently configured listeners are {','.join(advertised_names)}"
                + self._no_grpc_listener_hint(advertised_names),
            )
        if self.inter_broker_listener not in self.grpc_listeners:
            raise ConfigError(
                "inter.broker.listener.name",
                self.inter_broker_listener_name,
                "inter.broker.listener.name must name a gRPC listener (grpc.listener.names:"
                f" {','.join(sorted(self.grpc_listeners))}): brokers and controllers talk gRPC to each other",
            )

    def _no_grpc_listener_hint(self, advertised_names: Sequence[str]) -> str:
        # Kafka's own server.properties with only `listeners=PLAINTEXT://...` uncommented lands here: say what to add.
        if self.inter_broker_listener_name is not None or self.grpc_listeners & set(advertised_names):
            return ""
        return (f" (no gRPC listener: replication and the controller talk gRPC, so a broker needs a listener named in"
                f" grpc.listener.names ({','.join(sorted(self.grpc_listeners))}) next to its Kafka listeners,"
                " e.g. listeners=PLAINTEXT://:9092,GRPC://:9192)")

    @staticmethod
    def _parsed(key: str, text: str, parse: Callable[[str], T]) -> T:
        try:
            return parse(text)
        except ValueError as e:
            raise ConfigError(key, text, str(e)) from None

    # Values resolved from several keys, as KafkaConfig.scala resolves them.

    @property
    def zookeeper_connection_timeout_millis(self) -> int:
        if self.zookeeper_connection_timeout_ms is not None:
            return self.zookeeper_connection_timeout_ms
        return self.zookeeper_session_timeout_ms

    @property
    def zk_security(self) -> ZkSecurity:
        """zookeeper.set.acl and the JAAS file's ZooKeeper identity (zk/acl.py)."""
        return zk_security_from_config(self.zookeeper_set_acl, self.java_security_auth_login_config)

    @property
    def log_dir_paths(self) -> tuple[Path, ...]:
        return tuple(Path(d) for d in parse_csv(self.log_dirs if self.log_dirs is not None else self.log_dir))

    @property
    def log_roll_time_millis(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * _MS_PER_HOUR

    @property
    def log_retention_time_millis(self) -> int:
        """log.retention.ms, else .minutes, else .hours; any negative value means unlimited (-1)."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * _MS_PER_HOUR
        return -1 if millis < 0 else millis

    @property
    def log_flush_interval_millis(self) -> int:
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def listener_endpoints(self) -> tuple[EndPoint, ...]:
        return parse_endpoints(self.listeners, self.listener_security_protocols)

    @property
    def advertised_endpoints(self) -> tuple[EndPoint, ...]:
        if self.advertised_listeners is None:
            return self.listener_endpoints
        return parse_endpoints(self.advertised_listeners, self.listener_security_protocols)

    @property
    def grpc_listeners(self) -> frozenset[str]:
        """grpc.listener.names, upper-cased as listener names are."""
        return frozenset(name.upper() for name in parse_csv(self.grpc_listener_names))

    def speaks_grpc(self, listener_name: str) -> bool:
        return listener_name.upper() in self.grpc_listeners

    @property
    def listener_security_protocols(self) -> dict[str, str]:
        return parse_security_protocol_map(self.listener_security_protocol_map)

    @property
    def inter_broker_listener(self) -> str:
        """inter.broker.listener.name resolved (Kafka's interBrokerListenerName)."""
        name = self.inter_broker_listener_name
        return DEFAULT_INTER_BROKER_LISTENER_NAME if name is None else name.upper()

    # Construction

    @classmethod
    def from_properties(cls, path: Path | None, overrides: Iterable[str] = (),
                        unused: list[str] | None = None) -> KafkaConfig:
        """The broker's config from a server.properties file and `key=value` overrides
        (kafka-server-start's --override), which win over the file. With `unused`, keys this
        broker does not know are skipped and listed there (for unused_configs_warning)."""
        props = read_properties(path, overrides, _loggable)
        if unused is not None:
            unused += [key for key in props if not _known(key)]
            props = {key: value for key, value in props.items() if _known(key)}
        return cls.from_props(props)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> KafkaConfig:
        """The config from Kafka-named string properties; every value is trimmed, as Kafka does."""
        prefixed = {key: text for key, text in props.items() if key.startswith(LISTENER_PREFIX)}
        plain = {key: text for key, text in props.items() if key not in prefixed}
        values = typed_values(plain, _KEYS, lambda key, text: ConfigError(key, _loggable(key, text),
                                                                           _unknown_key_reason(key)))
        specs = {key: spec for key in prefixed if (spec := _listener_key_spec(key)) is not None}
        overrides = typed_values(prefixed, specs, lambda key, text: ConfigError(
            key, _loggable(key, text), "not a key a listener can override (listener.name.<listener>.ssl.*,"
            " .sasl.*, .<mechanism>.sasl.jaas.config)"))
        return cls(**{key.replace(".", "_"): value for key, value in values.items()},
                   listener_overrides=tuple(sorted(overrides.items())))

    # Output

    def values(self) -> dict[str, Any]:
        """Kafka key -> typed value, for every key (the listener overrides apart: `listener_overrides`)."""
        return {config_name(f.name): getattr(self, f.name) for f in dataclasses.fields(self) if "key" in f.metadata}

    def dump(self) -> str:
        """The start-up dump, as Kafka's AbstractConfig.logAll prints it."""
        lines = [f"\t{key} = {java_string(value)}\n"
                 for key, value in sorted([*self.values().items(), *self.listener_overrides])]
        return "KafkaConfig values: \n" + "".join(lines)

    def log_properties(self) -> dict[str, str]:
        """The broker-wide defaults of topic (log) configs, under their broker names,
        for broker/config/log_config.py's LogConfig.from_properties: what Kafka's
        KafkaServer.copyKafkaConfigToLog hands LogConfig. Durations come resolved
        (log.retention.ms over .minutes over .hours, log.roll.ms over .hours)."""
        values: dict[str, object] = {
            "log.segment.bytes": self.log_segment_bytes,
            "log.roll.ms": self.log_roll_time_millis,
            "log.retention.ms": self.log_retention_time_millis,
            "log.retention.bytes": self.log_retention_bytes,
            "log.index.size.max.bytes": self.log_index_size_max_bytes,
            "log.index.interval.bytes": self.log_index_interval_bytes,
            "log.flush.interval.messages": self.log_flush_interval_messages,
            "log.flush.interval.ms": self.log_flush_interval_millis,
            "log.message.timestamp.type": self.log_message_timestamp_type,
            "log.message.timestamp.difference.max.ms": self.log_message_timestamp_difference_max_ms,
            "message.max.bytes": self.message_max_bytes,
            "log.cleanup.policy": self.log_cleanup_policy,
            "compression.type": self.compression_type,
            "log.cleaner.min.cleanable.ratio": self.log_cleaner_min_cleanable_ratio,
            "log.cleaner.min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "log.cleaner.max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "log.cleaner.delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
        }
        return {key: java_string(value) for key, value in values.items()}


_KEYS: dict[str, ConfigKey] = {config_name(f.name): f.metadata["key"] for f in dataclasses.fields(KafkaConfig)
                               if "key" in f.metadata}
# What one listener may set for itself: the security keys, and each mechanism's JAAS config.
_JAAS_CONFIG = ConfigKey(Type.PASSWORD, "JAAS login module and options of a SASL mechanism", None, False)


def _prefixed(listener_name: str, key: str) -> str:
    return f"{LISTENER_PREFIX}{listener_name.lower()}.{key}"


def _listener_key_spec(key: str) -> ConfigKey | None:
    """The spec of `listener.name.<listener>.<key>` when a listener may set <key>; None otherwise."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    _listener, sep, inner = key[len(LISTENER_PREFIX):].partition(".")
    if not sep or not _listener:
        return None
    mechanism, _, rest = inner.partition(".")
    if rest == JAAS_CONFIG and mechanism.upper() in SASL_MECHANISMS:
        return _JAAS_CONFIG
    if inner.startswith(("ssl.", "sasl.")) or inner == "connection.failed.authentication.delay.ms":
        return _KEYS.get(inner)
    return None


def _known(key: str) -> bool:
    return key in _KEYS or _listener_key_spec(key) is not None


def maybe_sensitive(key: str) -> bool:
    """Kafka's KafkaConfig.maybeSensitive(typeOf(key)): a PASSWORD, or a key whose type is unknown (a misspelt
    secret, perhaps). DescribeConfigs answers such a key's value as null with is_sensitive true."""
    spec = _KEYS.get(key) or _listener_key_spec(key)
    return spec is None or spec.type is Type.PASSWORD


def _loggable(key: str, text: str) -> object:
    """Kafka's KafkaConfig.loggableValue: secrets, and values of unknown keys (a
    misspelt secret, perhaps), print as [hidden]."""
    spec = _KEYS.get(key) or _listener_key_spec(key)
    return text if spec is not None and spec.type is not Type.PASSWORD else Password(text)


def unused_configs_warning(keys: Iterable[str]) -> str:
    """Kafka's AbstractConfig.logUnused line for keys a broker was given but does not know, with a hint for
    each one that looks like a misspelt known key."""
    keys = list(keys)
    hints = [f"{key}: did you mean {close[0]}?" for key in keys
             if (close := difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.9))]
    return (f"These configurations '[{', '.join(keys)}]' were supplied but are not used yet."
            + (f" ({'; '.join(hints)})" if hints else ""))


def _unknown_key_reason(key: str) -> str:
    close = difflib.get_close_matches(key, _KEYS, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"not a broker configuration minibroker knows{hint}"
