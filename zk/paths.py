"""Kafka's ZooKeeper layout (2.x, kafka/zk/ZkData.scala): every znode path and JSON format, nothing else.

Pure functions and values, no I/O, so the layout can be read in one place and
tested without a server. JSON is written the way Kafka's Jackson writes it
(compact, no spaces) so `zkCli.sh get /brokers/ids/1` looks as it would on a
Kafka 2.x cluster. Every decoder raises ValueError naming the znode on bad data:
a malformed znode is an operator's problem to find, not a KeyError to debug.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from proto.errors import ErrorCode, KafkaError
from proto.types import SECURITY_PROTOCOL_IDS, EndPoint, TopicPartition

# --- constants (kafka.api.LeaderAndIsr, KafkaController, ZkVersion, ProducerIdManager) ---

NO_LEADER = -1
LEADER_DURING_DELETE = -2  # a partition of a topic being deleted (UpdateMetadata): dropped from caches
INITIAL_LEADER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
MATCH_ANY_VERSION = -1  # ZooKeeper's "any version" in a conditional write
UNKNOWN_VERSION = -2  # Kafka's marker for "never read from ZooKeeper"
PRODUCER_ID_BLOCK_SIZE = 1000
# ZkNodeChangeNotificationListener's changeExpirationMs: change notifications older than this are deleted.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

# --- paths ---

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
# Kafka's LogDirEventNotificationHandler.LogDirFailureEvent: the only event kind there is.
LOG_DIR_FAILURE_EVENT = 1
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"

# Kafka's ZkData.PersistentZkPaths, minus the paths of features we do not have
# (old consumers, broker id generation, client configs).
PERSISTENT_ZK_PATHS = (
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_USERS,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    PRODUCER_ID_BLOCK,
)

# Kafka's Topic.validate: these rules are also what keeps a topic name from
# escaping its znode ("/" or "..").
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249


def validate_topic(topic: str) -> None:
    """Kafka's topic name rules; raises KafkaError(INVALID_TOPIC_EXCEPTION)."""
    if topic in ("", ".", ".."):
        raise KafkaError(f"topic name {topic!r} is illegal", ErrorCode.INVALID_TOPIC_EXCEPTION)
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters: {topic!r}",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise KafkaError(
            f"topic name {topic!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    validate_topic(topic)
    return f"{TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(tp: TopicPartition) -> str:
    return f"{topic_partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{topic_partition_path(tp)}/state"


def topic_config_path(topic: str) -> str:
    validate_topic(topic)
    return f"{CONFIG_TOPICS}/{topic}"


# Kafka's ConfigType names, as /config/<type>/<name> and a change notification's entity_path spell them.
TOPICS_ENTITY = "topics"
BROKERS_ENTITY = "brokers"
USERS_ENTITY = "users"
# Kafka's ConfigEntityName.Default: the cluster-wide default of dynamic broker configs.
DEFAULT_ENTITY_NAME = "<default>"


def sanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user (principal) name as a znode name, URL-encoded in UTF-8 (only letters,
    digits, '.', '-' and '_' stay as they are), so "/" or ".." cannot escape /config/users."""
    return urllib.parse.quote(name, safe="-_.").replace("~", "%7E")


def desanitize_entity_name(znode: str) -> str:
    return urllib.parse.unquote(znode)


def entity_config_path(entity_type: str, name: str) -> str:
    """/config/topics/<topic>, /config/brokers/<id|<default>> or /config/users/<sanitized user>."""
    if entity_type == TOPICS_ENTITY:
        return topic_config_path(name)
    if entity_type == USERS_ENTITY:
        if not name:
            raise ValueError("The entity name for users must not be empty")
        return f"{CONFIG_USERS}/{sanitize_entity_name(name)}"
    if entity_type == BROKERS_ENTITY:
        if name != DEFAULT_ENTITY_NAME and not (name.isascii() and name.isdigit()):
            raise ValueError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
        return f"{CONFIG_BROKERS}/{name}"
    raise ValueError(f"Invalid entity type {entity_type}, the entity type must be one of topics, brokers, users")


def delete_topic_path(topic: str) -> str:
    validate_topic(topic)
    return f"{DELETE_TOPICS}/{topic}"


def isr_change_path(sequence_number: str = "") -> str:
    """With no sequence number: the prefix to create a sequential node with."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}{sequence_number}"


def log_dir_event_path(sequence_number: str = "") -> str:
    """With no sequence number: the prefix to create a sequential node with."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence_number}"


def config_change_path(sequence_number: str = "") -> str:
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}{sequence_number}"


def sequence_number(node_name: str, prefix: str) -> str:
    """'isr_change_0000000007' -> '0000000007' (Kafka keeps the zero padding: it sorts)."""
    if not node_name.startswith(prefix):
        raise ValueError(f"znode {node_name!r} is not a {prefix}<sequence> node")
    return node_name[len(prefix) :]


# --- values ---


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration (Kafka's BrokerInfo / Broker): its advertised endpoints, one per listener.

    `epoch` is the registration znode's czxid (Kafka 2.2+'s broker epoch): it is
    not in the JSON, it is read from the znode's Stat, so -1 until registered.
    """

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = -1
    epoch: int = -1

    def endpoint(self, listener_name: str) -> EndPoint | None:
        """The endpoint of one listener (Kafka's Broker.endPoint), None if the broker has no such listener."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    @property
    def connection_strings(self) -> str:
        """`NAME://host:port,...`, for logs."""
        return ",".join(e.connection_string for e in self.endpoints)


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas (Kafka 2.4+'s ReplicaAssignment, KIP-455).

    While a reassignment runs, `replicas` is RS = the target replicas (TRS) followed by the original ones (ORS)
    not among them; `adding_replicas` is TRS - ORS and `removing_replicas` ORS - TRS. Kept in the topic's znode,
    this is what lets a new controller resume the reassignment: ORS is stored nowhere else.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving to `target` from the original replicas (a running reassignment's target
        is replaced, not stacked)."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target)
        )


@dataclass(frozen=True)
class TopicAssignment:
    """The content of /brokers/topics/<topic>: partition -> replicas."""

    topic: str
    partitions: Mapping[int, ReplicaAssignment]

    @classmethod
    def of(cls, topic: str, replicas: Mapping[int, Sequence[int]]) -> TopicAssignment:
        return cls(topic, {p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()})

    def replicas(self, partition: int) -> tuple[int, ...]:
        return self.partitions[partition].replicas

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in sorted(self.partitions)]


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """The content of .../partitions/<p>/state (Kafka's LeaderIsrAndControllerEpoch, flattened).

    `zk_version` is the state znode's version this value was read at (or, for a
    value about to be written, the version the write expects): every write of
    partition state is conditional on it. It is not part of the JSON.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = UNKNOWN_VERSION

    def same_content(self, other: LeaderIsrAndControllerEpoch) -> bool:
        """Equal ignoring zk_version: how a writer recognises its own earlier write."""
        return (self.leader, self.leader_epoch, self.isr, self.controller_epoch) == (
            other.leader,
            other.leader_epoch,
            other.isr,
            other.controller_epoch,
        )


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of producer ids a broker owns; both ends inclusive (Kafka's ProducerIdBlock)."""

    broker_id: int
    block_start: int
    block_end: int

    @classmethod
    def first(cls, broker_id: int) -> ProducerIdBlock:
        return cls(broker_id, 0, PRODUCER_ID_BLOCK_SIZE - 1)

    def next_block(self, broker_id: int) -> ProducerIdBlock:
        return ProducerIdBlock(broker_id, self.block_end + 1, self.block_end + PRODUCER_ID_BLOCK_SIZE)


# --- JSON helpers ---


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@contextmanager
def _decoding(path: str, data: bytes) -> Iterator[None]:
    try:
        yield
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"malformed znode {path}: {e}; data: {data[:200]!r}") from e


def _loads(data: bytes) -> dict[str, Any]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _int(value: object) -> int:
    # bool is an int in Python but never in Kafka's JSON.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _ints(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of integers, got {value!r}")
    return tuple(_int(v) for v in value)


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


def _partitions_from_json(value: object) -> set[TopicPartition]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of partitions, got {value!r}")
    return {TopicPartition(_str(p["topic"]), _int(p["partition"])) for p in value}


# --- /brokers/ids/<id> ---

BROKER_INFO_VERSION = 4  # Kafka 0.10.0 .. 2.6; 5 only adds "features"


def encode_broker_info(info: BrokerInfo) -> bytes:
    # The top-level host/port are for clients older than listeners: the first PLAINTEXT endpoint, else null/-1.
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": BROKER_INFO_VERSION,
        "host": None if plaintext is None else plaintext.host,
        "port": -1 if plaintext is None else plaintext.port,
        "endpoints": [e.connection_string for e in info.endpoints],
        "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in info.endpoints},
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms),
    }
    # Kafka writes "rack" only when one is configured.
    if info.rack is not None:
        value["rack"] = info.rack
    return _dumps(value)


def _parse_endpoint(endpoint: str, protocols: Mapping[str, str]) -> EndPoint:
    listener, sep, address = endpoint.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ValueError(f"endpoint {endpoint!r} is not LISTENER://host:port")
    # Without a map (versions before 4), each listener is named after its protocol.
    protocol = protocols.get(listener, listener)
    if protocol not in SECURITY_PROTOCOL_IDS:
        raise ValueError(f"endpoint {endpoint!r} has no known security protocol ({protocol!r})")
    return EndPoint(listener, host.removeprefix("[").removesuffix("]"), int(port), protocol)


def decode_broker_info(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
    path = broker_id_path(broker_id)
    with _decoding(path, data):
        js = _loads(data)
        version = _int(js["version"])
        if version == 1:
            endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", _str(js["host"]), _int(js["port"])),)
        else:
            protocols = js.get("listener_security_protocol_map") or {}
            endpoints = tuple(_parse_endpoint(_str(e), protocols) for e in js["endpoints"])
        rack = js.get("rack")
        return BrokerInfo(
            id=broker_id,
            endpoints=endpoints,
            rack=None if rack is None else _str(rack),
            jmx_port=_int(js.get("jmx_port", -1)),
            timestamp_ms=int(_str(js["timestamp"])) if "timestamp" in js else -1,
            epoch=czxid,
        )


# --- /brokers/topics/<topic> ---

TOPIC_ASSIGNMENT_VERSION = 2  # Kafka 2.4 .. 2.8 (KIP-455 adding/removing replicas)


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    partitions = sorted(assignment.partitions.items())
    return _dumps(
        {
            "version": TOPIC_ASSIGNMENT_VERSION,
            "partitions": {str(p): list(a.replicas) for p, a in partitions},
            "adding_replicas": {str(p): list(a.adding_replicas) for p, a in partitions if a.adding_replicas},
            "removing_replicas": {str(p): list(a.removing_replicas) for p, a in partitions if a.removing_replicas},
        }
    )


def decode_topic_assignment(topic: str, data: bytes) -> TopicAssignment:
    path = topic_path(topic)
    with _decoding(path, data):
        js = _loads(data)
        adding = js.get("adding_replicas") or {}
        removing = js.get("removing_replicas") or {}
        partitions = {
            int(p): ReplicaAssignment(_ints(replicas), _ints(adding.get(p, [])), _ints(removing.get(p, [])))
            for p, replicas in (js.get("partitions") or {}).items()
        }
        return TopicAssignment(topic, partitions)


# --- /brokers/topics/<topic>/partitions/<p>/state ---


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    return _dumps(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(tp: TopicPartition, data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    path = partition_state_path(tp)
    with _decoding(path, data):
        js = _loads(data)
        return LeaderIsrAndControllerEpoch(
            leader=_int(js["leader"]),
            leader_epoch=_int(js["leader_epoch"]),
            isr=_ints(js["isr"]),
            controller_epoch=_int(js["controller_epoch"]),
            zk_version=zk_version,
        )


# --- /controller, /controller_epoch ---


def encode_controller(controller_id: int, timestamp_ms: int, endpoint: str | None = None) -> bytes:
    """Kafka's JSON, plus ours: "endpoint" (host:port) where the controller serves ControlledShutdown. In Kafka
    the controller is a broker, found through /brokers/ids; here it is a process of its own, and advertising its
    endpoint in the znode it wins makes "who is the controller" and "where is it" one atomic answer."""
    js: dict[str, object] = {"version": 1, "brokerid": controller_id, "timestamp": str(timestamp_ms)}
    if endpoint is not None:
        js["endpoint"] = endpoint
    return _dumps(js)


def decode_controller(data: bytes) -> int:
    """The active controller's id ("brokerid": in Kafka the controller is a broker)."""
    with _decoding(CONTROLLER, data):
        return _int(_loads(data)["brokerid"])


def decode_controller_endpoint(data: bytes) -> str | None:
    """Where the active controller serves ControlledShutdown; None if it does not say."""
    with _decoding(CONTROLLER, data):
        endpoint = _loads(data).get("endpoint")
        return None if endpoint is None else _str(endpoint)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    with _decoding(CONTROLLER_EPOCH, data):
        return int(data.decode())


# --- /isr_change_notification/isr_change_<seq> ---


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": _partitions_json(partitions)})


def decode_isr_change_notification(sequence_number: str, data: bytes) -> set[TopicPartition]:
    with _decoding(isr_change_path(sequence_number), data):
        return _partitions_from_json(_loads(data)["partitions"])


# --- /log_dir_event_notification/log_dir_event_<seq> ---


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's LogDirEventNotificationSequenceZNode.encode: {"version":1,"broker":<id>,"event":1}."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(sequence_number: str, data: bytes) -> int:
    """The broker id a log dir event names."""
    with _decoding(log_dir_event_path(sequence_number), data):
        return int(_loads(data)["broker"])


# --- /admin/preferred_replica_election, /admin/reassign_partitions ---


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": _partitions_json(partitions)})


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    with _decoding(PREFERRED_REPLICA_ELECTION, data):
        return _partitions_from_json(_loads(data)["partitions"])


def encode_partition_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _dumps({"version": 1, "partitions": partitions})


def decode_partition_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    with _decoding(REASSIGN_PARTITIONS, data):
        return {
            TopicPartition(_str(p["topic"]), _int(p["partition"])): _ints(p["replicas"])
            for p in _loads(data)["partitions"]
        }


# --- /config/topics/<topic>, /config/changes/config_change_<seq> ---


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in sorted(config.items())}})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    return decode_entity_config(topic_config_path(topic), data)


def decode_entity_config(path: str, data: bytes) -> dict[str, str]:
    """A /config/<type>/<name> znode: {"version":1,"config":{...}}."""
    with _decoding(path, data):
        config = _loads(data).get("config") or {}
        return {_str(k): _str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """entity_path is '<entity type>/<name>', e.g. 'topics/orders'."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(sequence_number: str, data: bytes) -> str:
    with _decoding(config_change_path(sequence_number), data):
        return _str(_loads(data)["entity_path"])


# --- /latest_producer_id_block ---


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    # Kafka writes the block ends as JSON strings (they are Longs).
    return _dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    with _decoding(PRODUCER_ID_BLOCK, data):
        js = _loads(data)
        return ProducerIdBlock(_int(js["broker"]), int(_str(js["block_start"])), int(_str(js["block_end"])))


# --- /cluster/id ---


def encode_cluster_id(cluster_id: str) -> bytes:
    # "version" really is the string "1" in Kafka's ClusterIdZNode.
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    with _decoding(CLUSTER_ID, data):
        return _str(_loads(data)["id"])


# --- ACLs (Kafka's ZkAclStore / ZkAclChangeStore): /kafka-acl/<Type>/<name> (LITERAL),
# /kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED), change notifications in /kafka-acl-changes and
# /kafka-acl-extended-changes. Resource and pattern types arrive here as Kafka's words ("Topic", "PREFIXED"):
# the vocabulary is common/security/acl.py's.

ACL_LITERAL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_VERSION = 1
LITERAL_PATTERN = "LITERAL"


def acl_store_path(pattern_type: str) -> str:
    """Where a pattern type's ACLs live: /kafka-acl for LITERAL, /kafka-acl-extended/<type lower case> else."""
    return ACL_LITERAL if pattern_type == LITERAL_PATTERN else f"{ACL_EXTENDED}/{pattern_type.lower()}"


def acl_resource_type_path(pattern_type: str, resource_type: str) -> str:
    return f"{acl_store_path(pattern_type)}/{resource_type}"


def acl_resource_path(pattern_type: str, resource_type: str, name: str) -> str:
    """/kafka-acl/Topic/orders, /kafka-acl-extended/prefixed/Group/billing-."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"resource name {name!r} cannot name a znode")
    return f"{acl_resource_type_path(pattern_type, resource_type)}/{name}"


def acl_change_store_path(pattern_type: str) -> str:
    return ACL_CHANGES if pattern_type == LITERAL_PATTERN else ACL_EXTENDED_CHANGES


def acl_change_path(pattern_type: str, sequence_number: str = "") -> str:
    return f"{acl_change_store_path(pattern_type)}/{ACL_CHANGE_PREFIX}{sequence_number}"


class AclJsonEntry(NamedTuple):
    """One ACL as Kafka's AclEntry JSON writes it: "User:alice", "Allow", "Read", "*"."""

    principal: str
    permission_type: str
    operation: str
    host: str


def encode_acls(entries: Iterable[AclJsonEntry]) -> bytes:
    """{"version":1,"acls":[{"principal":...,"permissionType":...,"operation":...,"host":...}]}."""
    return _dumps({"version": ACL_VERSION, "acls": [
        {"principal": e.principal, "permissionType": e.permission_type, "operation": e.operation, "host": e.host}
        for e in sorted(entries)]})


def decode_acls(path: str, data: bytes) -> list[AclJsonEntry]:
    with _decoding(path, data):
        return [AclJsonEntry(_str(a["principal"]), _str(a["permissionType"]), _str(a["operation"]), _str(a["host"]))
                for a in _loads(data)["acls"]]


def encode_acl_change(pattern_type: str, resource_type: str, name: str) -> bytes:
    """A literal change is the string "<TYPE>:<name>"; any other pattern type's is JSON (ExtendedAclChangeEvent).
    `resource_type` is the upper-case name ("TOPIC"), as Kafka's ResourceType.toString writes it."""
    if pattern_type == LITERAL_PATTERN:
        return f"{resource_type}:{name}".encode()
    return _dumps({"version": ACL_VERSION, "resourceType": resource_type, "name": name, "patternType": pattern_type})


def decode_acl_change(pattern_type_store: str, path: str, data: bytes) -> tuple[str, str, str]:
    """(pattern type, resource type as written, name) of a change notification from the store of
    `pattern_type_store` (LITERAL: /kafka-acl-changes, else /kafka-acl-extended-changes)."""
    with _decoding(path, data):
        if pattern_type_store == LITERAL_PATTERN:
            resource_type, sep, name = data.decode().partition(":")
            if not sep:
                raise ValueError("expected a string in format ResourceType:ResourceName")
            return LITERAL_PATTERN, resource_type, name
        event = _loads(data)
        if _int(event["version"]) > ACL_VERSION:
            raise ValueError(f"Acl change event received for unsupported version: {event['version']}")
        return _str(event["patternType"]), _str(event["resourceType"]), _str(event["name"])
