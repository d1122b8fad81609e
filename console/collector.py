"""The console's one poller: asks the cluster what it looks like, on a thread, and keeps the latest picture.

Every `interval_ms` (400 by default: the page gets at least two pictures a second)
its fast loop sends one Metadata request to any broker and one DescribeReplicaState
to every broker at once (a broker that does not answer within the interval is shown
as not answering, and holds up nobody), and for a local cluster reads its processes
(cluster.json, /proc). A slow loop, on a thread of its own so that it never delays
a picture, asks every `slow_every` intervals what changes slowly or answers slowly:
the active controller's events (DescribeEvents, at the address the /controller
znode advertises, or through a broker for a --bootstrap-server cluster), the consumer
groups (ListGroups, DescribeGroups, OffsetFetch), ZooKeeper's modes, and every
`configs_every` of its rounds the topics' configs (DescribeConfigs). However many
pages are open, the brokers see this one poller: the pages read its picture. With no
page open (no event stream subscribed) both loops wait and the cluster is asked
nothing; the first page to connect wakes them.

Events are paged by sequence number per source; a source that stops answering
(a paused or restarted broker, whose ring starts again at 1) is asked from 0
when it comes back, and what was seen already is dropped by its key.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from client import Admin, KafkaError
from client.admin import ConfigResource, ConfigResourceType
from client.metadata import ClusterMetadata
from common.grpc_tls import GrpcSecurity
from console import view
from console.local import LocalProcesses
from console.log_dirs import LogDirs, ReplicaSizes
from console.remote import ControllerUnavailable, RemoteCluster
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.types import EndPoint

logger = logging.getLogger(__name__)

# The merged timeline the page gets: the most recent events of every source.
MAX_EVENTS = 1000
CONTROLLER_SOURCE = "controller"


@dataclass(frozen=True)
class Picture:
    """The latest picture and its number (the pages send it again only when the number moved)."""

    version: int
    taken_ms: int
    cluster: dict[str, Any]
    partitions: list[dict[str, Any]]
    topics: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    events: list[dict[str, Any]]
    processes: list[dict[str, Any]]
    zookeeper: dict[str, Any]
    errors: list[str]
    # Requests this console sent the cluster since it started, by Kafka API name (bench/console_cost.py).
    requests: dict[str, int] = dataclasses.field(default_factory=dict)


class Pages:
    """The pages subscribed to the pictures (server-sent event streams): the collector's loops poll only while
    there is one."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._open = 0
        self._closed = False
        # Loops waiting for a page right now: they ask the cluster nothing.
        self.idle = 0

    @property
    def open(self) -> int:
        return self._open

    def subscribe(self) -> None:
        with self._condition:
            self._open += 1
            self._condition.notify_all()

    def unsubscribe(self) -> None:
        with self._condition:
            self._open -= 1

    def close(self) -> None:
        """Wakes every waiting loop for good (the collector stops)."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def wait(self) -> bool:
        """Until a page is open (True) or the collector stops (False)."""
        with self._condition:
            self.idle += 1
            try:
                self._condition.wait_for(lambda: self._open > 0 or self._closed)
            finally:
                self.idle -= 1
            return not self._closed


class Collector:
    def __init__(self, bootstrap_servers: str, security: GrpcSecurity, *, interval_ms: int = 400,
                 local: LocalProcesses | None = None, log_dirs: LogDirs | None = None,
                 remote: RemoteCluster | None = None, kafka_properties: Mapping[str, str] | None = None,
                 slow_every: int = 4, configs_every: int = 5) -> None:
        """`remote` (a --bootstrap-server cluster) reaches the controller through the brokers and, with
        `kafka_properties` (the admin's kafka-python properties), finds the Kafka listener DescribeLogDirs is asked
        on."""
        self._interval_ms = interval_ms
        self._admin = Admin(bootstrap_servers, channel_factory=security.channel_factory,
                            request_timeout_ms=max(interval_ms * 4, 2000), default_api_timeout_ms=5000)
        self._security = security
        self._local = local
        self._log_dirs = log_dirs
        self._sizes: ReplicaSizes = {}
        self._remote = remote
        self._kafka_properties = kafka_properties
        self._slow_every = slow_every
        self._configs_every = configs_every
        self._events_after: dict[str, int] = {}
        self._seen: set[tuple[str, int, int]] = set()
        self._events: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_EVENTS)
        self._groups: list[dict[str, Any]] = []
        self._configs: dict[str, dict[str, str]] = {}
        self._controller: tuple[str, grpc.Channel] | None = None
        # The controller whose ring the cursor pages (a --bootstrap-server cluster's, known by its answers).
        self._controller_id: int | None = None
        self._slow_rounds = 0
        # The events and the slow loop's answers, shared by the two loops and the fault handlers.
        self._lock = threading.Lock()
        self._metadata: ClusterMetadata | None = None
        self._answers: dict[int, pb.DescribeReplicaStateResponse] = {}
        self._slow_errors: list[str] = []
        self._requests: collections.Counter[str] = collections.Counter()
        self._zookeeper: dict[str, Any] = {}
        self._listeners: dict[int, tuple[EndPoint, ...]] = {}
        self._console_sequence = 0
        self._picture = Picture(0, 0, {}, [], [], [], [], [], {}, [])
        self._stop = threading.Event()
        self.pages = Pages()
        self._threads = [threading.Thread(target=self._run, name="console-collector", daemon=True),
                         threading.Thread(target=self._run_slow, name="console-collector-slow", daemon=True)]

    @property
    def picture(self) -> Picture:
        return self._picture

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.pages.close()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(10)
        self._admin.close()
        if self._remote is not None:
            self._remote.close()
        if self._log_dirs is not None:
            self._log_dirs.close()
        if self._controller is not None:
            self._controller[1].close()

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        while self.pages.wait() and not self._stop.is_set():
            began = time.monotonic()
            try:
                picture = self._take()
            except Exception as e:  # the console stays up whatever one tick met; the page says what
                if not isinstance(e, KafkaError):  # a cluster away is the page's news; anything else a bug's
                    logger.exception("console: a poll failed")
                picture = dataclasses.replace(self._picture, version=self._picture.version + 1,
                                              taken_ms=_now_ms(), events=self._timeline(),
                                              errors=[f"poll failed: {e}"])
            self._picture = dataclasses.replace(picture, requests=dict(self._requests))
            self._stop.wait(max(self._interval_ms / 1000 - (time.monotonic() - began), 0.05))

    def _run_slow(self) -> None:
        while self.pages.wait() and not self._stop.wait(self._interval_ms * self._slow_every / 1000):
            with self._lock:
                metadata, answers = self._metadata, self._answers
            if metadata is None:
                continue
            errors: list[str] = []
            try:
                self._learn_remote(metadata, errors)
                self._poll_controller(metadata, errors)
                groups = self._poll_groups(metadata, answers, errors)
                configs = self._poll_configs(metadata, errors) if self._slow_rounds % self._configs_every == 0 \
                    else self._configs
                source = self._local or self._remote
                zookeeper = source.zookeeper() if source is not None else {}
                listeners = self._poll_listeners(metadata, errors)
                sizes = self._poll_log_dirs(answers, errors)
            except Exception:  # as the fast loop: the console stays up, the page keeps the last answers
                logger.exception("console: a slow poll failed")
                continue
            with self._lock:
                self._groups, self._configs, self._zookeeper, self._slow_errors = groups, configs, zookeeper, errors
                self._sizes, self._listeners = sizes, listeners
            self._slow_rounds += 1

    def _take(self) -> Picture:
        errors: list[str] = []
        self._requests["Metadata"] += 1
        metadata = self._admin.cluster_metadata()
        self._requests["DescribeReplicaState"] += len(metadata.brokers)
        raw = self._admin.describe_replica_state(
            sorted(metadata.brokers.values()), self._broker_cursors(), self._interval_ms * 0.9)
        answers: dict[int, pb.DescribeReplicaStateResponse] = {}
        for broker_id, answer in raw.items():
            source = f"broker-{broker_id}"
            if isinstance(answer, KafkaError):
                errors.append(f"broker {broker_id}: {answer}")
                with self._lock:  # asked from the start when it is back (a restart resets its ring)
                    self._events_after[source] = 0
                continue
            answers[broker_id] = answer
            self._add_events(source, answer.events)
        processes = self._local.processes() if self._local is not None else []
        with self._lock:
            self._metadata, self._answers = metadata, answers
            groups, configs, zookeeper, slow_errors = self._groups, self._configs, self._zookeeper, self._slow_errors
            sizes = self._sizes if self._log_dirs is not None else None
            listeners = self._listeners
        partitions = view.partition_views(metadata, answers, metadata.topics, sizes)
        return Picture(
            self._picture.version + 1, _now_ms(), view.cluster_summary(metadata, answers, partitions, listeners),
            partitions,
            view.topic_summaries(metadata, answers, configs, sizes), groups, self._timeline(), processes, zookeeper,
            errors + slow_errors)

    def _timeline(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self._events, key=lambda e: e["time_ms"])

    def record(self, kind: str, detail: str) -> None:
        """An event of the console's own (a fault it injected), on the timeline beside what followed."""
        with self._lock:
            self._console_sequence += 1
            self._events.append({"source": "console", "sequence": self._console_sequence, "time_ms": _now_ms(),
                                 "kind": kind, "topic": "", "partition": -1, "detail": detail})

    def _broker_cursors(self) -> dict[int, int]:
        with self._lock:
            return {int(source.removeprefix("broker-")): n for source, n in self._events_after.items()
                    if source.startswith("broker-")}

    def _add_events(self, source: str, events: Any) -> None:
        with self._lock:
            self._add_events_locked(source, events)

    def _add_events_locked(self, source: str, events: Any) -> None:
        for e in events:
            key = (source, e.sequence, e.time_ms)
            self._events_after[source] = max(self._events_after.get(source, 0), e.sequence)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._events.append({"source": source, "sequence": e.sequence, "time_ms": e.time_ms, "kind": e.kind,
                                 "topic": e.topic, "partition": e.partition, "detail": e.detail})
        if len(self._seen) > MAX_EVENTS * 4:
            self._seen = {(ev["source"], ev["sequence"], ev["time_ms"]) for ev in self._events}

    # ------------------------------------------------------------------ slower sources

    def _learn_remote(self, metadata: ClusterMetadata, errors: list[str]) -> None:
        """A --bootstrap-server cluster: its Kafka listener, until a broker tells it."""
        if self._remote is None or self._log_dirs is not None or self._kafka_properties is None:
            return
        try:
            servers = self._remote.kafka_servers(metadata)
        except ValueError as e:  # listeners a broker describes that cannot be read: the page says so
            errors.append(f"Kafka listeners: {e}")
            return
        if servers:
            self._log_dirs = LogDirs(servers, self._kafka_properties)

    def _poll_controller(self, metadata: ClusterMetadata, errors: list[str]) -> None:
        timeout_s = self._interval_ms * self._slow_every / 1000
        response = (self._forwarded_controller_events(metadata, timeout_s, errors) if self._remote is not None
                    else self._local_controller_events(timeout_s, errors))
        if response is None:
            return
        self._add_events(f"controller-{response.controller_id}", response.events)
        # One cursor for whichever controller is active: a new one starts its ring at 1.
        self._events_after[CONTROLLER_SOURCE] = max(
            (e.sequence for e in response.events), default=self._events_after.get(CONTROLLER_SOURCE, 0))

    def _local_controller_events(self, timeout_s: float, errors: list[str]) -> pb.DescribeEventsResponse | None:
        """A local cluster's active controller, asked at the address the /controller znode advertises."""
        if self._local is None:
            return None
        try:
            endpoint = self._local.controller_endpoint()
        except Exception as e:  # ZooKeeper away: the picture says so, the brokers' part goes on
            errors.append(f"controller endpoint: {e}")
            return None
        if endpoint is None:
            return None
        if self._controller is None or self._controller[0] != endpoint:
            if self._controller is not None:
                self._controller[1].close()
            self._controller = (endpoint, self._security.channel(endpoint))
            self._events_after[CONTROLLER_SOURCE] = 0
        self._requests["DescribeEvents"] += 1
        try:
            return pb_grpc.KafkaControllerStub(self._controller[1]).DescribeEvents(
                pb.DescribeEventsRequest(events_after=self._events_after.get(CONTROLLER_SOURCE, 0)), timeout=timeout_s)
        except grpc.RpcError as e:
            errors.append(f"controller at {endpoint}: {e.code().name}")
            return None

    def _forwarded_controller_events(self, metadata: ClusterMetadata, timeout_s: float,
                                     errors: list[str]) -> pb.DescribeEventsResponse | None:
        """A --bootstrap-server cluster's active controller, through a broker (console/remote.py). Another
        controller than the last (a failover) starts its ring at 1: it is asked again from the beginning."""
        assert self._remote is not None
        after = self._events_after.get(CONTROLLER_SOURCE, 0)
        try:
            self._requests["DescribeEvents"] += 1
            response = self._remote.describe_events(metadata, after, timeout_s)
            if response.controller_id != self._controller_id and after:
                self._events_after[CONTROLLER_SOURCE] = 0
                self._requests["DescribeEvents"] += 1
                response = self._remote.describe_events(metadata, 0, timeout_s)
        except ControllerUnavailable as e:
            errors.append(f"controller: {e}")
            return None
        self._controller_id = response.controller_id
        return response

    def _poll_groups(self, metadata: ClusterMetadata, answers: dict[int, pb.DescribeReplicaStateResponse],
                     errors: list[str]) -> list[dict[str, Any]]:
        states = view.index_replica_states(answers)
        out = []
        try:
            # ListGroups goes to every broker; DescribeGroups and OffsetFetch to each group's coordinator.
            self._requests["ListGroups"] += len(metadata.brokers)
            listings = self._admin.list_consumer_groups(timeout_ms=2000)
            self._requests["DescribeGroups"] += len(listings)
            descriptions = {d.group_id: d for d in self._admin.describe_consumer_groups(
                [g.group_id for g in listings], timeout_ms=2000)} if listings else {}
            for listing in sorted(listings):
                description = descriptions.get(listing.group_id)
                self._requests["OffsetFetch"] += 1
                offsets = self._admin.list_consumer_group_offsets(listing.group_id, timeout_ms=2000)
                committed = {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()}
                out.append({
                    "group_id": listing.group_id, "state": description.state if description else listing.state,
                    "coordinator": description.coordinator.node_id if description else None,
                    "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                                 "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment]}
                                for m in (description.members if description else ())],
                    "partitions": view.group_lag(committed, states, metadata),
                })
        except KafkaError as e:
            errors.append(f"groups: {e}")
            return self._groups
        return out

    def _poll_listeners(self, metadata: ClusterMetadata, errors: list[str]) -> dict[int, tuple[EndPoint, ...]]:
        """Each broker's advertised listeners: a local cluster's registrations, a --bootstrap-server cluster's
        brokers' own DescribeConfigs."""
        source = self._local or self._remote
        if source is None:
            return {}
        try:
            return source.broker_listeners(metadata)
        except Exception as e:  # ZooKeeper away, listeners that do not parse: the page keeps the last ones
            errors.append(f"listeners: {e}")
            return self._listeners

    def _poll_log_dirs(self, answers: dict[int, pb.DescribeReplicaStateResponse], errors: list[str]) -> ReplicaSizes:
        if self._log_dirs is None:
            return {}
        # The brokers that answered this tick: a paused one would hold the loop up for the request timeout.
        brokers = sorted(answers)
        self._requests["DescribeLogDirs"] += len(brokers)
        try:
            return self._log_dirs.describe(brokers)
        except Exception as e:  # kafka-python's errors: the sizes are the page's news, not a crash
            errors.append(f"log dirs: {e}")
            return self._sizes

    def _poll_configs(self, metadata: ClusterMetadata, errors: list[str]) -> dict[str, dict[str, str]]:
        topics = sorted(metadata.topics)
        if not topics:
            return {}
        self._requests["DescribeConfigs"] += 1
        try:
            described = self._admin.describe_configs(ConfigResource(ConfigResourceType.TOPIC, t) for t in topics)
        except KafkaError as e:
            errors.append(f"configs: {e}")
            return self._configs
        # The configs set on the topic (source 1, DYNAMIC_TOPIC_CONFIG): the defaults say nothing of it.
        return {r.name: {c.name: c.value or "" for c in entries if not c.is_default and c.source == 1}
                for r, entries in described.items()}


def _now_ms() -> int:
    return int(time.time() * 1000)
