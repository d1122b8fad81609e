"""KafkaZkClient: Kafka 2.x's ZooKeeper operations (kafka/zk/KafkaZkClient.scala) over kazoo.

Every path and format comes from zk.paths; this module only adds the ZooKeeper
semantics that make them safe:

- Controller writes are fenced (Kafka 2.2+): each one is a multi-op whose first
  op checks /controller_epoch at the version the controller wrote when it was
  elected. A controller that lost its seat fails with ControllerMovedError
  instead of overwriting its successor's decisions.
- Partition state writes are conditional on the state znode's version. A leader
  whose ISR write loses (BadVersion) gets (False, -1) and must re-read: the
  controller, or the leader after it, changed the partition.
- Operations retry on connection loss (not on session expiry). A retried write
  can find its own first attempt already applied; where Kafka checks for that
  (broker registration, controller election, partition state) so do we.
- No request longer than ZooKeeper's jute.maxbuffer leaves this client. The server
  answers one by closing the connection, and a retry on connection loss would send
  it again after every reconnect, for ever, with every other operation of the
  session stuck behind it. Such a write fails at once with ZnodeTooLargeError
  (POLICY_VIOLATION) instead, whichever path it was for.

Watch and new-session callbacks run on kazoo's callback thread, one at a time
and in order. They may call this client, but should be quick: hand real work to
your own thread or event queue, as Kafka's controller does. Session-expiry
callbacks run on kazoo's connection thread, before the next session exists.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Create, Create2, SetData, Transaction
from kazoo.protocol.states import Callback, EventType, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk import paths
from zk.acl import OPEN, SECURE_ROOT_PATHS, ZkSecurity, default_acls
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, ProducerIdBlock, TopicAssignment

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka 2.5+'s zookeeper.session.timeout.ms
# ZooKeeper's default jute.maxbuffer (0xfffff bytes, "1 MB"): the longest request a server reads.
JUTE_MAX_BUFFER = 0xFFFFF
# Every request's body follows a header of xid and op type (two int32s), both counted against the limit.
_REQUEST_HEADER_BYTES = 8


class ZnodeTooLargeError(KafkaError):
    """A write ZooKeeper would refuse by dropping the connection: its request is longer than jute.maxbuffer."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(
            f"Cannot write {path}: the ZooKeeper request would be {size} bytes, more than the server's"
            f" jute.maxbuffer of {JUTE_MAX_BUFFER} bytes", ErrorCode.POLICY_VIOLATION)
        self.path = path
        self.size = size


def request_size(path: str, data: bytes) -> int:
    """The length ZooKeeper's server checks for a create or set of `data` at `path` (header, path, data, ACL)."""
    # create: path (int32 length + bytes), data (int32 length + bytes), one ACL (perms, scheme, id), flags.
    acl = 4 + 4 + len("world") + 4 + len("anyone")
    return _REQUEST_HEADER_BYTES + 4 + len(path.encode()) + 4 + len(data) + 4 + acl + 4


_WRITES = (Create, Create2, SetData, Transaction)


class _SizeCheckedKazooClient(KazooClient):
    """KazooClient that gives every znode it creates the ACL of `security` (zk/acl.py) and refuses, before
    queuing it, a request the server would answer by disconnecting.

    `_call` is where kazoo queues every request: the one place to see every create (plain, in a multi-op, or
    the parents `makepath` and `ensure_path` add) and to check every write (create, set, multi-op; the other
    requests carry no data and are not measured).
    """

    def __init__(self, security: ZkSecurity, **kwargs: Any) -> None:
        super().__init__(auth_data=security.auth_data or None, **kwargs)
        self._security = security

    def _with_acl(self, op: Any) -> Any:
        if isinstance(op, Create | Create2):
            return op._replace(acl=self._security.acls(self.unchroot(op.path)))
        return op

    def _call(self, request: Any, async_object: Any) -> Any:
        if isinstance(request, Transaction):
            request = Transaction([self._with_acl(op) for op in request.operations])
        else:
            request = self._with_acl(request)
        size = _REQUEST_HEADER_BYTES + len(request.serialize()) if isinstance(request, _WRITES) else 0
        if size > JUTE_MAX_BUFFER:
            ops = getattr(request, "operations", None) or [request]
            largest = max(ops, key=lambda op: len(getattr(op, "data", b"") or b""))
            async_object.set_exception(ZnodeTooLargeError(str(getattr(largest, "path", "?")), size))
            return False
        return super()._call(request, async_object)


class ControllerMovedError(Exception):
    """A fenced controller write failed: /controller_epoch moved past the version this controller wrote."""


class DuplicateBrokerIdError(Exception):
    """/brokers/ids/<id> is held by another live session: two brokers were given the same broker.id."""


@dataclass
class UpdateLeaderAndIsrResult:
    """Outcome of a batch of controller partition state writes (Kafka's UpdateLeaderAndIsrResult)."""

    # Written; each value carries the state znode's new version.
    finished: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    # BadVersion: someone (a leader changing its ISR) wrote since the state was read: re-read, decide again.
    to_retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, Exception] = field(default_factory=dict)


class Watch:
    """A registered watch. cancel() stops callbacks; kazoo drops the watch at its next event."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(frozen=True)
class _Op:
    """One operation of a fenced multi-op."""

    kind: Literal["create", "set", "delete"]
    path: str
    data: bytes = b""
    version: int = paths.MATCH_ANY_VERSION


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _new_cluster_id() -> str:
    # Kafka's CoreUtils.generateUuidAsBase64: a random UUID, URL-safe base64, no padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


# A topic's deletes in one multi-op at most (a 1,000-partition topic is 2,002 znodes, and ZooKeeper reads no request
# over jute.maxbuffer): each delete is its path and a version, so this many stay far below it.
_DELETES_PER_MULTI = 1000


def _chunks(ops: list[_Op], size: int) -> list[list[_Op]]:
    return [ops[i:i + size] for i in range(0, len(ops), size)]


def _op_error(results: Sequence[Any]) -> Exception | None:
    """The op that failed a multi-op (the others report RolledBack / RuntimeInconsistency)."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, RolledBackError | RuntimeInconsistency):
            return result
    return None


# ZooKeeper's clientPort default: where a connect string's host without a port, and every tool, looks.
ZOOKEEPER_PORT = 2181


def unreachable_reason(hosts: str, timeout: float = 2.0) -> str | None:
    """Why no server of the connect string `hosts` accepts a TCP connection ("127.0.0.1:2181: Connection
    refused"), or None once one does. Cheap and at once where kazoo retries until its connect timeout: a tool can
    say that nothing listens there before it starts anything, or waits."""
    servers, _ = _split_chroot(hosts)
    reasons = []
    for server in (s.strip() for s in servers.split(",") if s.strip()):
        host, sep, port = server.rpartition(":")
        if not sep or not port.isdigit():
            host, port = server, str(ZOOKEEPER_PORT)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except OSError as e:
            reasons.append(f"{server}: {e.strerror or e}")
    return "; ".join(reasons) or "no server in the connect string"


class ZooKeeperUnreachableError(Exception):
    """No ZooKeeper session could be had; the message says why (nothing listening, or no answer in time)."""


def connect_checked(hosts: str, timeout: float, security: ZkSecurity = OPEN) -> KafkaZkClient:
    """A session for a short-lived tool: at once ZooKeeperUnreachableError when nothing listens at `hosts`, and
    after `timeout` when what listens does not answer as ZooKeeper. The session timeout is as short, since
    kazoo's reads from a server that never answers wait that long."""
    reason = unreachable_reason(hosts)
    if reason is not None:
        raise ZooKeeperUnreachableError(reason)
    try:
        return KafkaZkClient.connect(hosts, session_timeout_ms=max(int(timeout * 1000), 1), timeout=timeout,
                                     security=security)
    except KazooTimeoutError:
        raise ZooKeeperUnreachableError(
            f"something listens there, but no ZooKeeper session within {timeout:g} s") from None


def _split_chroot(hosts: str) -> tuple[str, str]:
    servers, slash, chroot = hosts.partition("/")
    return servers, (slash + chroot).rstrip("/")


class KafkaZkClient:
    """One ZooKeeper session, with Kafka's operations on the Kafka 2.x layout.

    `hosts` is a ZooKeeper connect string and may end in a chroot
    ("127.0.0.1:2181/minibroker"), which is created if missing, as Kafka does. `security` says as whom it
    logs in and which ACL the znodes it creates get (zk/acl.py: Kafka's zookeeper.set.acl).
    """

    def __init__(self, hosts: str, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 security: ZkSecurity = OPEN) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.security = security
        # kazoo's default reconnect backoff grows to an hour; a broker wants its session back now.
        self._zk = _SizeCheckedKazooClient(
            security,
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0),
        )
        # Copied per call: a KazooRetry counts attempts and is not thread-safe.
        self._retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0, ignore_expire=False)
        self._zk.add_listener(self._on_state_change)
        self._session_expired_callbacks: list[Callable[[], None]] = []
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._session_lost = False
        self._closing = False
        # The session of this client's last checked ephemeral create (Kafka's currentZooKeeperSessionId).
        self._ephemeral_session_id: int | None = None

    @classmethod
    def connect(
        cls, hosts: str, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS, timeout: float = 15.0,
        security: ZkSecurity = OPEN,
    ) -> KafkaZkClient:
        client = cls(hosts, session_timeout_ms, security)
        client.start(timeout)
        return client

    def start(self, timeout: float = 15.0) -> None:
        servers, chroot = _split_chroot(self.hosts)
        if chroot:
            # kazoo cannot create its own chroot; Kafka creates it with a chroot-less client too.
            root = KazooClient(hosts=servers, timeout=self.session_timeout_ms / 1000,
                               auth_data=self.security.auth_data or None)
            root.start(timeout)
            try:
                root.ensure_path(chroot, acl=self.security.acls("/"))
            finally:
                root.stop()
                root.close()
        self._zk.start(timeout)

    def close(self) -> None:
        """Close the session: its ephemeral znodes (broker registration, /controller) go at once."""
        self._closing = True
        self._zk.stop()
        self._zk.close()

    def __enter__(self) -> KafkaZkClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) while connected: what another client needs to take over (or kill) the session."""
        client_id = self._zk.client_id
        return None if client_id is None else (int(client_id[0]), bytes(client_id[1]))

    @property
    def session_id(self) -> int | None:
        client_id = self.client_id
        return None if client_id is None else client_id[0]

    # --- session state ---

    def on_session_expired(self, callback: Callable[[], None]) -> None:
        """Called when the session is lost: every ephemeral znode of this client is gone
        (Kafka's beforeInitializingSession). kazoo keeps reconnecting with a new session.

        It runs on kazoo's connection thread before the new session is opened, so it happens before anything
        the new session brings (watch events, results): it must be quick and must not call ZooKeeper. A
        controller queues its Expire there, as Kafka blocks the new session until Expire is queued, so that
        a controller paused past its session never acts in the next one before resigning."""
        self._session_expired_callbacks.append(callback)

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Called once a new session replaces an expired one (Kafka's afterInitializingSession):
        re-register the broker, re-enter the controller election. Watches survive by themselves."""
        self._new_session_callbacks.append(callback)

    def _on_state_change(self, state: str) -> None:
        # Runs on kazoo's connection thread, which must never block: the new-session
        # callbacks go to the callback thread, in order with watch events.
        if state == KazooState.LOST and not self._closing:
            self._session_lost = True
            log.warning("ZooKeeper session expired (%s)", self.hosts)
            for callback in list(self._session_expired_callbacks):
                self._run_callback(callback)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            log.info("ZooKeeper session re-established (%s), session id 0x%x", self.hosts, self.session_id or 0)
            self._dispatch(self._new_session_callbacks)

    def _dispatch(self, callbacks: Iterable[Callable[[], None]]) -> None:
        for callback in list(callbacks):
            self._zk.handler.dispatch_callback(Callback("session", self._run_callback, (callback,)))

    @staticmethod
    def _run_callback(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            log.exception("ZooKeeper session callback %r failed", callback)

    # --- plumbing ---

    def _call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """func(*args, **kwargs), retried across connection losses (not session expiry)."""
        return self._retry.copy()(func, *args, **kwargs)

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            data, stat = self._call(self._zk.get, path)
        except NoNodeError:
            return None
        return data, stat

    def _get_many(self, znodes: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Pipelined reads (one round trip for all, as Kafka's retryRequestsUntilConnected); None where missing."""

        def read_all() -> list[tuple[bytes, ZnodeStat] | None]:
            pending = [self._zk.get_async(path) for path in znodes]
            results: list[tuple[bytes, ZnodeStat] | None] = []
            for result in pending:
                try:
                    data, stat = result.get()
                    results.append((data, stat))
                except NoNodeError:
                    results.append(None)
            return results

        return self._call(read_all) if znodes else []

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._call(self._zk.get_children, path))
        except NoNodeError:
            return []

    def _fenced(self, expected_controller_epoch_zk_version: int, op_groups: Sequence[Sequence[_Op]]) -> list[list[Any]]:
        """Commit each group as its own multi-op behind a check of /controller_epoch; pipelined.

        Returns each group's op results (check excluded); a failed group holds
        the failing op's exception. Raises ControllerMovedError if the check
        failed anywhere.
        """

        def commit_all() -> list[list[Any]]:
            pending = []
            for ops in op_groups:
                tx = self._zk.transaction()
                tx.check(paths.CONTROLLER_EPOCH, expected_controller_epoch_zk_version)
                for op in ops:
                    if op.kind == "create":
                        tx.create(op.path, op.data)
                    elif op.kind == "set":
                        tx.set_data(op.path, op.data, op.version)
                    else:
                        tx.delete(op.path, op.version)
                pending.append(tx.commit_async())
            return [list(result.get()) for result in pending]

        results = self._call(commit_all) if op_groups else []
        for group in results:
            check = group[0]
            if isinstance(check, BadVersionError | NoNodeError):
                raise ControllerMovedError(
                    f"controller epoch zkVersion check failed: expected {paths.CONTROLLER_EPOCH} "
                    f"at version {expected_controller_epoch_zk_version}"
                )
        return [group[1:] for group in results]

    def _fenced_create_all_if_missing(self, znodes: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        """Fenced creates (empty znodes whose parents exist), one multi-op each; znodes already there are fine."""
        groups = [[_Op("create", path)] for path in znodes]
        for group in self._fenced(expected_controller_epoch_zk_version, groups):
            error = _op_error(group)
            if error is not None and not isinstance(error, NodeExistsError):
                raise error

    def _fenced_delete_all(self, znodes: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        """Fenced deletes, one multi-op each; znodes already gone are fine."""
        groups = [[_Op("delete", path)] for path in znodes]
        for group in self._fenced(expected_controller_epoch_zk_version, groups):
            error = _op_error(group)
            if error is not None and not isinstance(error, NoNodeError):
                raise error

    def ensure_persistent_paths(self) -> None:
        """Kafka's createTopLevelPaths: the persistent znodes every broker and controller expects."""
        for path in paths.PERSISTENT_ZK_PATHS:
            self._call(self._zk.ensure_path, path)

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id; the first broker to ask creates it (random, as Kafka's, unless proposed)."""
        while True:
            existing = self._get(paths.CLUSTER_ID)
            if existing is not None:
                return paths.decode_cluster_id(existing[0])
            cluster_id = proposed or _new_cluster_id()
            try:
                self._call(self._zk.create, paths.CLUSTER_ID, paths.encode_cluster_id(cluster_id), makepath=True)
                return cluster_id
            except NodeExistsError:
                continue  # another broker was first (or our own create, retried): read theirs

    # --- brokers ---

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns its czxid, the broker epoch (Kafka 2.2+).

        Raises DuplicateBrokerIdError if another session holds the id.
        """
        info = replace(info, timestamp_ms=_now_ms())
        path = paths.broker_id_path(info.id)
        stat = self._checked_ephemeral_create(path, paths.encode_broker_info(info))
        if stat is None:
            raise DuplicateBrokerIdError(
                f"broker id {info.id} is already registered at {path} by another ZooKeeper session "
                f"(is another broker running with broker.id={info.id}?)"
            )
        log.info("registered broker %d at %s (%s), broker epoch %d", info.id, path, info.connection_strings, stat.czxid)
        return int(stat.czxid)

    def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnodeStat | None:
        """Kafka's checkedEphemeralCreate: create, or accept the node if this session already owns it
        (a create retried after a connection loss); None if another session owns it.

        A node still owned by this client's previous, expired session is deleted and created again (Kafka's
        KAFKA-7165 workaround): a client can hear that its session expired while the ensemble has not yet
        removed the session's ephemerals (ZOOKEEPER-2985; seen here when the ZooKeeper leader was paused), and
        a broker refusing its own stale registration would shut down."""
        while True:
            try:
                _, stat = self._call(self._zk.create, path, data, ephemeral=True, makepath=True, include_data=True)
                self._ephemeral_session_id = stat.ephemeralOwner
                return stat
            except NodeExistsError:
                existing = self._get(path)
                if existing is None:
                    continue  # its owner's session just ended: try again
                stat = existing[1]
                if stat.ephemeralOwner == self.session_id:
                    self._ephemeral_session_id = stat.ephemeralOwner  # our own create, retried
                    return stat
                if stat.ephemeralOwner != self._ephemeral_session_id:
                    return None
                log.info("Was not possible to create the ephemeral at %s, node already exists and owner '0x%x' does"
                         " not match current session '0x%x', trying to delete and re-create it with the newest"
                         " Zookeeper session", path, stat.ephemeralOwner, self.session_id or 0)
                with contextlib.suppress(NoNodeError, BadVersionError):
                    self._call(self._zk.delete, path, version=stat.version)

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        node = self._get(paths.broker_id_path(broker_id))
        return None if node is None else paths.decode_broker_info(broker_id, node[0], node[1].czxid)

    def get_all_brokers(self) -> list[BrokerInfo]:
        """Live brokers by id, each with its broker epoch (the registration's czxid)."""
        ids = sorted(int(child) for child in self._children(paths.BROKER_IDS))
        nodes = self._get_many([paths.broker_id_path(i) for i in ids])
        return [
            paths.decode_broker_info(broker_id, node[0], node[1].czxid)
            for broker_id, node in zip(ids, nodes)
            if node is not None
        ]

    # --- topics ---

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        """Write /config/topics/<t> and /brokers/topics/<t> atomically; the controller takes it from there.

        Raises KafkaError(TOPIC_ALREADY_EXISTS) if the topic exists.
        """
        topic = assignment.topic
        config_path = paths.topic_config_path(topic)

        def create() -> list[Any]:
            # Config first, as Kafka's AdminZkClient writes it: whoever sees the topic finds its config.
            tx = self._zk.transaction()
            config_data = paths.encode_topic_config(config or {})
            if self._zk.exists(config_path) is None:
                tx.create(config_path, config_data)
            else:  # left over from a deleted topic
                tx.set_data(config_path, config_data)
            tx.create(paths.topic_path(topic), paths.encode_topic_assignment(assignment))
            return list(tx.commit())

        results = self._call(create)
        if isinstance(results[1], NodeExistsError):
            raise KafkaError(f"Topic '{topic}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
        error = _op_error(results)
        if error is not None:
            raise error

    def get_all_topics(self) -> set[str]:
        return set(self._children(paths.TOPICS))

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        return self.get_topic_assignments([topic]).get(topic)

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Assignments of the topics that exist."""
        topics = list(topics)
        nodes = self._get_many([paths.topic_path(t) for t in topics])
        return {t: paths.decode_topic_assignment(t, node[0]) for t, node in zip(topics, nodes) if node is not None}

    def set_topic_assignment(self, assignment: TopicAssignment, expected_controller_epoch_zk_version: int) -> None:
        """The controller rewrites an assignment (reassignment, added partitions)."""
        op = _Op("set", paths.topic_path(assignment.topic), paths.encode_topic_assignment(assignment))
        error = _op_error(self._fenced(expected_controller_epoch_zk_version, [[op]])[0])
        if error is not None:
            raise error

    def set_topic_partitions(self, assignment: TopicAssignment) -> None:
        """An admin's write of a topic's grown assignment (AdminZkClient.writeTopicPartitionAssignment with
        isUpdate): the controller's watch on the znode creates the new partitions."""
        self._call(self._zk.set, paths.topic_path(assignment.topic), paths.encode_topic_assignment(assignment))

    def get_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's config overrides; empty if none."""
        return self.get_entity_config(paths.TOPICS_ENTITY, topic)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace the topic's overrides and notify brokers (/config/changes), in one multi-op."""
        self.set_entity_config(paths.TOPICS_ENTITY, topic, config)

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides under /config/<entity_type>/<name>; empty if none."""
        path = paths.entity_config_path(entity_type, name)
        node = self._get(path)
        return {} if node is None else paths.decode_entity_config(path, node[0])

    def get_user_names(self) -> list[str]:
        """The users with a /config/users/<user> znode (SCRAM credentials, quotas), their names desanitized."""
        return sorted(paths.desanitize_entity_name(z) for z in self._children(paths.CONFIG_USERS))

    def set_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace the overrides and add a /config/changes/config_change_<seq> notification
        ({"version":2,"entity_path":"<type>/<name>"}), in one multi-op (Kafka's AdminZkClient.changeConfigs)."""
        config_path = paths.entity_config_path(entity_type, name)

        def write() -> list[Any]:
            tx = self._zk.transaction()
            if self._zk.exists(config_path) is None:
                tx.create(config_path, paths.encode_topic_config(config))
            else:
                tx.set_data(config_path, paths.encode_topic_config(config))
            # "<type>/<name>" as in the znode's path (a user's name sanitized, as Kafka's notification has it).
            entity_path = config_path.removeprefix("/config/")
            tx.create(paths.config_change_path(), paths.encode_config_change(entity_path), sequence=True)
            return list(tx.commit())

        error = _op_error(self._call(write))
        if error is not None:
            raise error

    def purge_config_changes(self, sequence_numbers: Sequence[str], created_before_ms: int) -> None:
        """Delete the notifications created before `created_before_ms` (Kafka's purgeObsoleteNotifications:
        every broker read them long ago)."""
        self._purge_notifications([paths.config_change_path(seq) for seq in sequence_numbers], created_before_ms)

    def _purge_notifications(self, znodes: Sequence[str], created_before_ms: int) -> None:
        for path, node in zip(znodes, self._get_many(znodes)):
            if node is not None and node[1].ctime < created_before_ms:
                try:
                    self._call(self._zk.delete, path)
                except NoNodeError:
                    pass  # another broker purged it first

    def get_config_change(self, sequence_number: str) -> str | None:
        """The entity_path of a config change notification; None if it is gone (purged)."""
        node = self._get(paths.config_change_path(sequence_number))
        return None if node is None else paths.decode_config_change(sequence_number, node[0])

    def delete_topics(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        """The controller's last step of deleting these topics: each one's znodes, its config and its deletion
        request (Kafka's deleteTopicZNode, deleteTopicConfigs, deleteTopicDeletions), in a few pipelined rounds
        for all of them: one listing per level of their subtrees, then the deletes, a topic's in one fenced
        multi-op (deepest first, up to _DELETES_PER_MULTI), not one each: a one-partition topic was six multi-ops,
        each built by kazoo on this thread and committed by ZooKeeper on its own (a third of the controller's
        event thread deleting 3,000 topics, py-spy). A multi-op fails whole: one whose topic lacks a znode (no
        config, no deletion request) is done again one znode at a time, in the same order."""
        groups = [
            chunk
            for topic, tree in zip(topics, self._subtrees_of([paths.topic_path(topic) for topic in topics]))
            for chunk in _chunks(
                [_Op("delete", path)
                 for path in (*tree, paths.topic_config_path(topic), paths.delete_topic_path(topic))],
                _DELETES_PER_MULTI)
        ]
        results = self._fenced(expected_controller_epoch_zk_version, groups)
        failed = [op.path for ops, result in zip(groups, results) if _op_error(result) is not None for op in ops]
        self._fenced_delete_all(failed, expected_controller_epoch_zk_version)

    def _subtrees(self, roots: Sequence[str]) -> list[str]:
        """The roots and their descendants, deepest first: each level listed in one pipelined round."""
        return [path for tree in self._subtrees_of(roots) for path in tree]

    def _subtrees_of(self, roots: Sequence[str]) -> list[list[str]]:
        """Each root's subtree, deepest first (a znode before its parent): each level of all of them listed in
        one pipelined round."""
        trees: list[list[str]] = [[root] for root in roots]
        level = list(enumerate(roots))
        while level:
            children = self._children_of_many([path for _, path in level])
            level = [(i, f"{path}/{child}") for (i, path), kids in zip(level, children) for child in kids]
            for i, path in level:
                trees[i].append(path)
        return [tree[::-1] for tree in trees]

    def _children_of_many(self, znodes: Sequence[str]) -> list[list[str]]:
        """Each znode's children, pipelined (one round trip for all); none where the znode is gone."""

        def list_all() -> list[list[str]]:
            pending = [self._zk.get_children_async(path) for path in znodes]
            results: list[list[str]] = []
            for result in pending:
                try:
                    results.append(list(result.get()))
                except NoNodeError:
                    results.append([])
            return results

        return self._call(list_all)

    # --- ACLs (zookeeper.set.acl, zookeeper-security-migration) ---

    def get_acls(self, path: str) -> list[ACL] | None:
        """The znode's ACL, or None if it does not exist."""
        try:
            acls, _ = self._call(self._zk.get_acls, path)
        except NoNodeError:
            return None
        return list(acls)

    def migrate_acls(self, secure: bool, report: Callable[[str], None] = lambda _: None) -> int:
        """Kafka's ZkSecurityMigrator: give the root ("/", the chroot if there is one) and every znode under
        Kafka's secure root paths the ACL that `zookeeper.set.acl=secure` would have created them with
        (zk/acl.py's default_acls), or open them all again; returns how many znodes were set. The secure
        root paths are created first if missing (not /controller and /controller_epoch: the first controller writes
        them with their data).
        Znodes deleted meanwhile are skipped; a missing permission raises NoAuthError."""
        self._call(self._zk.set_acls, "/", default_acls(secure, "/"))
        count = 1
        for root in SECURE_ROOT_PATHS:  # the sensitive ones lie below them
            if root in (paths.CONTROLLER, paths.CONTROLLER_EPOCH) and self._get(root) is None:
                continue  # the first controller creates them with their data; "/" already keeps others out
            self._call(self._zk.ensure_path, root)
            for path in reversed(self._subtrees([root])):  # parents first, as Kafka walks them
                try:
                    self._call(self._zk.set_acls, path, default_acls(secure, path))
                    count += 1
                except NoNodeError:
                    continue
            report(f"Set {'secure' if secure else 'open'} ACLs on {root} and below")
        return count

    # --- partition state ---

    def get_partition_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.get_partition_states([tp]).get(tp)

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """States of the partitions that have one, each with its znode version."""
        partitions = list(partitions)
        nodes = self._get_many([paths.partition_state_path(tp) for tp in partitions])
        return {
            tp: paths.decode_partition_state(tp, node[0], node[1].version)
            for tp, node in zip(partitions, nodes)
            if node is not None
        }

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> set[TopicPartition]:
        """The controller initialises new partitions' state; returns those created (the rest already had one)."""
        topics = sorted({tp.topic for tp in states})
        # Their parents are controller writes too (Kafka's createTopicPartitions): fenced.
        version = expected_controller_epoch_zk_version
        self._fenced_create_all_if_missing([paths.topic_partitions_path(t) for t in topics], version)
        self._fenced_create_all_if_missing([paths.topic_partition_path(tp) for tp in states], version)
        tps = list(states)
        groups = [
            [_Op("create", paths.partition_state_path(tp), paths.encode_partition_state(states[tp]))] for tp in tps
        ]
        created = set()
        for tp, group in zip(tps, self._fenced(expected_controller_epoch_zk_version, groups)):
            error = _op_error(group)
            if error is None:
                created.add(tp)
            elif not isinstance(error, NodeExistsError):
                raise error
        return created

    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """Controller writes (Kafka's updateLeaderAndIsr): each state is written only if its znode is still
        at the state's zk_version."""
        tps = list(states)
        groups = [
            [
                _Op(
                    "set",
                    paths.partition_state_path(tp),
                    paths.encode_partition_state(states[tp]),
                    states[tp].zk_version,
                )
            ]
            for tp in tps
        ]
        outcome = UpdateLeaderAndIsrResult()
        for tp, group in zip(tps, self._fenced(expected_controller_epoch_zk_version, groups)):
            error = _op_error(group)
            if error is None:
                outcome.finished[tp] = replace(states[tp], zk_version=group[0].version)
            elif isinstance(error, BadVersionError):
                outcome.to_retry.append(tp)
            else:
                outcome.failed[tp] = error
        return outcome

    def conditional_update_partition_state(
        self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch, expected_version: int
    ) -> tuple[bool, int]:
        """A leader's ISR change: (True, new version), or (False, -1) if the znode moved on (re-read it)."""
        path = paths.partition_state_path(tp)
        try:
            stat = self._call(self._zk.set, path, paths.encode_partition_state(state), expected_version)
            return True, int(stat.version)
        except BadVersionError:
            # Kafka's checkLeaderAndIsrZkData: a write retried after a connection
            # loss finds its first attempt applied, and that is a success.
            current = self.get_partition_state(tp)
            if current is not None and current.same_content(state):
                return True, current.zk_version
            return False, -1
        except NoNodeError:
            return False, -1

    def ephemeral_owner(self, path: str) -> int | None:
        """The session id that owns the ephemeral znode `path`; None if there is none (or it is persistent)."""
        node = self._get(path)
        return None if node is None or not node[1].ephemeralOwner else int(node[1].ephemeralOwner)

    def delete_ephemeral_of(self, path: str, owner: int) -> bool:
        """Delete the ephemeral `path` if session `owner` still owns it (conditional on the version read): for a
        launcher that knows the owner's process is gone and will not wait for the session to expire. False if the
        znode went, or changed hands, meanwhile."""
        node = self._get(path)
        if node is None or node[1].ephemeralOwner != owner:
            return False
        try:
            self._call(self._zk.delete, path, version=node[1].version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    # --- controller ---

    def get_controller_id(self) -> int | None:
        node = self._get(paths.CONTROLLER)
        return None if node is None else paths.decode_controller(node[0])

    def get_controller_endpoint(self) -> str | None:
        """host:port of the active controller's KafkaController service; None if none is active or it has none."""
        node = self._get(paths.CONTROLLER)
        return None if node is None else paths.decode_controller_endpoint(node[0])

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of /controller_epoch, if any controller was ever elected."""
        node = self._get(paths.CONTROLLER_EPOCH)
        return None if node is None else (paths.decode_controller_epoch(node[0]), int(node[1].version))

    def try_create_controller(self, controller_id: int, endpoint: str | None = None) -> tuple[int, int] | None:
        """Run for controller (Kafka 2.2+'s registerControllerAndIncrementControllerEpoch).

        One multi-op creates the ephemeral /controller and bumps /controller_epoch
        from the version just read, so two candidates can never both win an
        epoch. Returns (new epoch, its znode version) - fence every later write
        with that version - or None if another controller holds /controller (or
        won the epoch first). Losers watch /controller (watch_controller) and run
        again when it goes away.
        """
        epoch, epoch_zk_version = self.get_controller_epoch() or self._maybe_create_controller_epoch()
        new_epoch = epoch + 1

        def elect() -> list[Any]:
            tx = self._zk.transaction()
            tx.create(paths.CONTROLLER, paths.encode_controller(controller_id, _now_ms(), endpoint), ephemeral=True)
            tx.set_data(paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(new_epoch), epoch_zk_version)
            return list(tx.commit())

        results = self._call(elect)
        error = _op_error(results)
        if error is None:
            log.info("controller %d elected, controller epoch %d", controller_id, new_epoch)
            return new_epoch, int(results[1].version)
        if not isinstance(error, NodeExistsError | BadVersionError):
            raise error
        # Lost - unless this was a retried multi-op whose first attempt won.
        controller = self._get(paths.CONTROLLER)
        current = self.get_controller_epoch()
        ours = controller is not None and controller[1].ephemeralOwner == self.session_id
        return current if ours and current is not None and current[0] == new_epoch else None

    def _maybe_create_controller_epoch(self) -> tuple[int, int]:
        data = paths.encode_controller_epoch(paths.INITIAL_CONTROLLER_EPOCH)
        try:
            self._call(self._zk.create, paths.CONTROLLER_EPOCH, data)
            return paths.INITIAL_CONTROLLER_EPOCH, paths.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            current = self.get_controller_epoch()
            if current is None:
                raise RuntimeError(f"{paths.CONTROLLER_EPOCH} existed, then vanished: something deletes it") from None
            return current

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Resign (controlled shutdown of the active controller): a standby takes over without waiting
        for this session to time out."""
        self._fenced_delete_all([paths.CONTROLLER], expected_controller_epoch_zk_version)

    # --- ISR change notifications ---

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """A leader changed these partitions' ISR: tell the controller. Returns the notification's sequence number."""
        created = self._call(
            self._zk.create, paths.isr_change_path(), paths.encode_isr_change_notification(partitions), sequence=True
        )
        return paths.sequence_number(str(created).rsplit("/", 1)[-1], paths.ISR_CHANGE_PREFIX)

    def get_isr_change_notifications(self) -> list[str]:
        """Sequence numbers of pending notifications, oldest first."""
        return sorted(
            paths.sequence_number(child, paths.ISR_CHANGE_PREFIX)
            for child in self._children(paths.ISR_CHANGE_NOTIFICATION)
        )

    def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        sequence_numbers = list(sequence_numbers)
        nodes = self._get_many([paths.isr_change_path(seq) for seq in sequence_numbers])
        partitions: set[TopicPartition] = set()
        for seq, node in zip(sequence_numbers, nodes):
            if node is not None:
                partitions |= paths.decode_isr_change_notification(seq, node[0])
        return partitions

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._fenced_delete_all(
            [paths.isr_change_path(seq) for seq in sequence_numbers], expected_controller_epoch_zk_version
        )

    # --- log dir event notifications ---

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A log dir of this broker went offline: tell the controller (Kafka's propagateLogDirEvent). Returns the
        notification's sequence number."""
        created = self._call(
            self._zk.create, paths.log_dir_event_path(), paths.encode_log_dir_event(broker_id), sequence=True,
            makepath=True,
        )
        return paths.sequence_number(str(created).rsplit("/", 1)[-1], paths.LOG_DIR_EVENT_PREFIX)

    def get_all_log_dir_event_notifications(self) -> list[str]:
        """Sequence numbers of pending log dir events, oldest first."""
        return sorted(
            paths.sequence_number(child, paths.LOG_DIR_EVENT_PREFIX)
            for child in self._children(paths.LOG_DIR_EVENT_NOTIFICATION)
        )

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        """The brokers the events name, in event order (one broker may appear more than once)."""
        sequence_numbers = list(sequence_numbers)
        nodes = self._get_many([paths.log_dir_event_path(seq) for seq in sequence_numbers])
        return [paths.decode_log_dir_event(seq, node[0]) for seq, node in zip(sequence_numbers, nodes)
                if node is not None]

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._fenced_delete_all(
            [paths.log_dir_event_path(seq) for seq in sequence_numbers], expected_controller_epoch_zk_version
        )

    # --- admin requests ---

    def create_delete_topic_path(self, topic: str) -> bool:
        """Request deletion of a topic; False if it was already requested."""
        try:
            self._call(self._zk.create, paths.delete_topic_path(topic))
            return True
        except NodeExistsError:
            return False

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self._get(paths.delete_topic_path(topic)) is not None

    def get_topic_deletions(self) -> set[str]:
        return set(self._children(paths.DELETE_TOPICS))

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._fenced_delete_all([paths.delete_topic_path(t) for t in topics], expected_controller_epoch_zk_version)

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> bool:
        """Request a preferred leader election; False if one is already in progress."""
        data = paths.encode_preferred_replica_election(partitions)
        try:
            self._call(self._zk.create, paths.PREFERRED_REPLICA_ELECTION, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        node = self._get(paths.PREFERRED_REPLICA_ELECTION)
        return set() if node is None else paths.decode_preferred_replica_election(node[0])

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        self._fenced_delete_all([paths.PREFERRED_REPLICA_ELECTION], expected_controller_epoch_zk_version)

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> bool:
        """Request a reassignment; False if one is already in progress."""
        data = paths.encode_partition_reassignment(reassignment)
        try:
            self._call(self._zk.create, paths.REASSIGN_PARTITIONS, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def change_partition_reassignment(self, changes: Mapping[TopicPartition, Sequence[int]],
                                      removals: Iterable[TopicPartition] = ()) -> None:
        """An operator's change to a pending request (`reassign-partitions --cancel`): `changes` replace those
        partitions' targets, `removals` leave it, the rest stays (nothing left deletes the znode). Conditional on
        the znode's version, so an entry the controller removes meanwhile is not written back; created if the
        controller already deleted it."""
        removed = set(removals)
        while True:
            node = self._get(paths.REASSIGN_PARTITIONS)
            if node is None:
                if not changes or self.create_partition_reassignment(changes):
                    return
                continue
            requested = paths.decode_partition_reassignment(node[0])
            merged = {tp: r for tp, r in requested.items() if tp not in removed}
            merged.update({tp: tuple(r) for tp, r in changes.items()})
            try:
                if merged:
                    self._call(self._zk.set, paths.REASSIGN_PARTITIONS, paths.encode_partition_reassignment(merged),
                               node[1].version)
                else:
                    self._call(self._zk.delete, paths.REASSIGN_PARTITIONS, node[1].version)
                return
            except (BadVersionError, NoNodeError):
                continue  # the controller changed or finished the request meanwhile: read it again

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        node = self._get(paths.REASSIGN_PARTITIONS)
        return {} if node is None else paths.decode_partition_reassignment(node[0])

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        """The controller records what is left to reassign; nothing left deletes the request."""
        if not reassignment:
            self._fenced_delete_all([paths.REASSIGN_PARTITIONS], expected_controller_epoch_zk_version)
            return
        data = paths.encode_partition_reassignment(reassignment)
        error = _op_error(
            self._fenced(expected_controller_epoch_zk_version, [[_Op("set", paths.REASSIGN_PARTITIONS, data)]])[0]
        )
        if isinstance(error, NoNodeError):  # Kafka's setOrCreatePartitionReassignment
            create = _Op("create", paths.REASSIGN_PARTITIONS, data)
            error = _op_error(self._fenced(expected_controller_epoch_zk_version, [[create]])[0])
        if error is not None:
            raise error

    # --- producer ids ---

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the next block of PRODUCER_ID_BLOCK_SIZE producer ids (Kafka's ProducerIdManager).

        A conditional update of /latest_producer_id_block: two brokers can never get the same block.
        """
        path = paths.PRODUCER_ID_BLOCK
        while True:
            node = self._get(path)
            previous = node[0] if node is not None else b""
            # ensure_persistent_paths creates the znode empty: no block handed out yet.
            block = (
                paths.decode_producer_id_block(previous).next_block(broker_id)
                if previous
                else ProducerIdBlock.first(broker_id)
            )
            data = paths.encode_producer_id_block(block)
            try:
                # Not retried blindly: after a lost connection, only the znode can tell whether the write landed.
                if node is None:
                    self._zk.create(path, data)
                else:
                    self._zk.set(path, data, node[1].version)
                return block
            except (NodeExistsError, BadVersionError):
                continue
            except ConnectionLoss:
                landed = self._get(path)
                if landed is not None and landed[0] == data:
                    return block

    # --- ACLs (Kafka's KafkaZkClient ACL methods; the AclAuthorizer's conditional update loop is the caller's) ---

    def create_acl_paths(self, resource_types: Iterable[str]) -> None:
        """Kafka's createAclPaths: each store's root and one znode per resource type, and the change roots."""
        for pattern_type in (paths.LITERAL_PATTERN, "PREFIXED"):
            for resource_type in resource_types:
                self._call(self._zk.ensure_path, paths.acl_resource_type_path(pattern_type, resource_type))
            self._call(self._zk.ensure_path, paths.acl_change_store_path(pattern_type))

    def get_acl_resource_types(self, pattern_type: str) -> list[str]:
        return self._children(paths.acl_store_path(pattern_type))

    def get_acl_resource_names(self, pattern_type: str, resource_type: str) -> list[str]:
        return self._children(paths.acl_resource_type_path(pattern_type, resource_type))

    def get_versioned_acls(self, pattern_type: str, resource_type: str, name: str
                           ) -> tuple[list[paths.AclJsonEntry], int]:
        """The resource's ACLs and its znode version; ([], UNKNOWN_VERSION) when there is no znode."""
        path = paths.acl_resource_path(pattern_type, resource_type, name)
        node = self._get(path)
        if node is None:
            return [], paths.UNKNOWN_VERSION
        return paths.decode_acls(path, node[0]), node[1].version

    def conditional_set_acls(self, pattern_type: str, resource_type: str, name: str,
                             entries: Iterable[paths.AclJsonEntry], expected_version: int) -> tuple[bool, int]:
        """Write the ACLs if the znode is still at `expected_version` (UNKNOWN_VERSION: if it does not exist);
        (written, new version). Losing the race is (False, -1): re-read and try again."""
        path = paths.acl_resource_path(pattern_type, resource_type, name)
        data = paths.encode_acls(entries)
        try:
            if expected_version == paths.UNKNOWN_VERSION:
                self._call(self._zk.create, path, data, makepath=True)
                return True, 0
            stat = self._call(self._zk.set, path, data, version=expected_version)
            return True, int(stat.version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            return False, -1

    def conditional_delete_acls(self, pattern_type: str, resource_type: str, name: str, expected_version: int) -> bool:
        """Delete the resource's ACL znode if still at `expected_version`; True when it is gone."""
        path = paths.acl_resource_path(pattern_type, resource_type, name)
        try:
            self._call(self._zk.delete, path, version=expected_version)
        except NoNodeError:
            return True
        except BadVersionError:
            return False
        return True

    def create_acl_change_notification(self, pattern_type: str, data: bytes) -> None:
        """acl_changes_<seq> under /kafka-acl-changes (LITERAL) or /kafka-acl-extended-changes."""
        self._call(self._zk.create, paths.acl_change_path(pattern_type), data, sequence=True, makepath=True)

    def get_acl_change(self, pattern_type: str, sequence_number: str) -> bytes | None:
        node = self._get(paths.acl_change_path(pattern_type, sequence_number))
        return None if node is None else node[0]

    def purge_acl_changes(self, pattern_type: str, sequence_numbers: Sequence[str], created_before_ms: int) -> None:
        """Kafka's purgeObsoleteNotifications for one ACL change store."""
        self._purge_notifications([paths.acl_change_path(pattern_type, seq) for seq in sequence_numbers],
                                  created_before_ms)

    def watch_acl_changes(self, pattern_type: str, callback: Callable[[list[str]], None]) -> Watch:
        """callback(sequence numbers of the store's acl_changes_<seq> notifications, oldest first)."""
        return self.watch_children(
            paths.acl_change_store_path(pattern_type),
            lambda children: callback(sorted(paths.sequence_number(c, paths.ACL_CHANGE_PREFIX) for c in children)),
        )

    # --- watches ---

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """callback(children) now (in this thread) and after every change. The znode must exist."""
        watch = Watch()

        def on_children(children: list[str]) -> bool | None:
            if watch.cancelled:
                return False
            callback(children)
            return None

        ChildrenWatch(self._zk, path, on_children)
        return watch

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> Watch:
        """callback(data, stat) now (in this thread) and after every change; (None, None) while it does not exist."""
        watch = Watch()

        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if watch.cancelled:
                return False
            callback(data, stat)
            return None

        DataWatch(self._zk, path, on_data)
        return watch

    def watch_broker_ids(self, callback: Callable[[set[int]], None]) -> Watch:
        return self.watch_children(paths.BROKER_IDS, lambda children: callback({int(c) for c in children}))

    def watch_topics(self, callback: Callable[[set[str]], None]) -> Watch:
        return self.watch_children(paths.TOPICS, lambda children: callback(set(children)))

    def watch_topic_assignments(self, topics: Iterable[str], callback: Callable[[str], None]) -> dict[str, Watch]:
        """Kafka's PartitionModificationsHandlers: callback(topic) after each change of a topic's znode (partitions
        added, replicas reassigned, the topic deleted), not now: the controller reads the assignments itself, after
        arming these. One pipelined round of `exists` arms them all, as Kafka's reads set its watches (a kazoo
        DataWatch per topic read its znode in a round trip of its own on the caller's thread and fired at once:
        10,000 round trips and 10,000 events that changed nothing for 10,000 topics); each fire re-arms its
        watch before calling back, so no change between the two goes unseen."""
        watches: dict[str, Watch] = {}
        handlers = []
        for topic in topics:
            watch = watches[topic] = Watch()
            handlers.append(self._rearming_watch(paths.topic_path(topic), watch, functools.partial(callback, topic)))

        def arm_all() -> None:
            for result in [self._zk.exists_async(path, watch=handler) for path, handler in handlers]:
                result.get()

        if handlers:
            self._call(arm_all)
        return watches

    def _rearming_watch(self, path: str, watch: Watch,
                        callback: Callable[[], None]) -> tuple[str, Callable[[WatchedEvent], None]]:
        def on_event(event: WatchedEvent) -> None:
            if watch.cancelled or event.type == EventType.NONE:  # NONE: the session is gone, and its watches
                return
            self._zk.exists_async(path, watch=on_event)
            callback()

        return path, on_event

    def watch_partition_state(self, tp: TopicPartition, callback: Callable[[], None]) -> Watch:
        """callback() now and whenever the partition's state znode changes (Kafka's
        PartitionReassignmentIsrChangeHandler: the controller follows a reassigning partition's ISR)."""
        return self.watch_data(paths.partition_state_path(tp), lambda _data, _stat: callback())

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], None]) -> Watch:
        """callback(sequence numbers, oldest first)."""
        return self.watch_children(
            paths.ISR_CHANGE_NOTIFICATION,
            lambda children: callback(sorted(paths.sequence_number(c, paths.ISR_CHANGE_PREFIX) for c in children)),
        )

    def watch_log_dir_event_notifications(self, callback: Callable[[list[str]], None]) -> Watch:
        """callback(sequence numbers, oldest first)."""
        return self.watch_children(
            paths.LOG_DIR_EVENT_NOTIFICATION,
            lambda children: callback(sorted(paths.sequence_number(c, paths.LOG_DIR_EVENT_PREFIX) for c in children)),
        )

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """callback(sequence numbers of /config/changes notifications, oldest first)."""
        return self.watch_children(
            paths.CONFIG_CHANGES,
            lambda children: callback(sorted(paths.sequence_number(c, paths.CONFIG_CHANGE_PREFIX) for c in children)),
        )

    def watch_topic_deletions(self, callback: Callable[[set[str]], None]) -> Watch:
        return self.watch_children(paths.DELETE_TOPICS, lambda children: callback(set(children)))

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """callback(active controller id, or None while there is none: time to run for it)."""
        return self.watch_data(
            paths.CONTROLLER, lambda data, _: callback(None if data is None else paths.decode_controller(data))
        )

    def watch_preferred_replica_election(self, callback: Callable[[set[TopicPartition]], None]) -> Watch:
        return self.watch_data(
            paths.PREFERRED_REPLICA_ELECTION,
            lambda data, _: callback(set() if data is None else paths.decode_preferred_replica_election(data)),
        )

    def watch_partition_reassignment(self, callback: Callable[[dict[TopicPartition, tuple[int, ...]]], None]) -> Watch:
        return self.watch_data(
            paths.REASSIGN_PARTITIONS,
            lambda data, _: callback({} if data is None else paths.decode_partition_reassignment(data)),
        )
