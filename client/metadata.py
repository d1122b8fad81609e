"""Cluster metadata: which brokers exist and which one leads each partition.

ClusterMetadata is one immutable snapshot of a Metadata response (Kafka's
Cluster); Metadata keeps the current snapshot and refreshes it from whichever
broker answers (Kafka's Metadata plus NetworkClient's DefaultMetadataUpdater):
on demand after an error that invalidates it, at least every
metadata_max_age_ms, and never more often than every retry_backoff_ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from client.connection import ConnectionPool, Req, Resp, Rpc
from client.errors import KafkaTimeoutError
from client.structs import BrokerMetadata, PartitionMetadata
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for, is_retriable
from proto.types import TopicPartition

_TRANSPORT_ERRORS = (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)


class ClusterMetadata:
    """What one Metadata response said, indexed for the questions clients ask on every record."""

    def __init__(
        self,
        brokers: Iterable[BrokerMetadata] = (),
        partitions: Iterable[PartitionMetadata] = (),
        *,
        topic_errors: Mapping[str, int] | None = None,
        internal_topics: Iterable[str] = (),
        controller_id: int = -1,
        cluster_id: str | None = None,
    ) -> None:
        self.brokers: dict[int, BrokerMetadata] = {b.node_id: b for b in brokers}
        self.controller_id = controller_id
        self.cluster_id = cluster_id
        self.internal_topics = frozenset(internal_topics)
        self.topic_errors: dict[str, int] = dict(topic_errors or {})
        self._partitions: dict[TopicPartition, PartitionMetadata] = {}
        counts: dict[str, int] = {}
        for p in partitions:
            self._partitions[TopicPartition(p.topic, p.partition)] = p
            counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
        # One TopicPartition object per partition, built once here rather than per record sent.
        self._topic_partitions = {t: tuple(TopicPartition(t, i) for i in range(n)) for t, n in counts.items()}
        self._available = {
            t: tuple(tp.partition for tp in tps if self.leader_for(tp) is not None)
            for t, tps in self._topic_partitions.items()
        }

    @classmethod
    def from_response(cls, response: pb.MetadataResponse) -> ClusterMetadata:
        brokers = [
            BrokerMetadata(b.node_id, b.host, b.port, b.rack if b.HasField("rack") else None)
            for b in response.brokers
        ]
        partitions = [
            PartitionMetadata(t.name, p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                              tuple(p.isr_nodes), tuple(p.offline_replicas), p.error_code)
            for t in response.topics
            for p in t.partitions
        ]
        return cls(
            brokers,
            partitions,
            topic_errors={t.name: t.error_code for t in response.topics if t.error_code},
            internal_topics=[t.name for t in response.topics if t.is_internal],
            controller_id=response.controller_id,
            cluster_id=response.cluster_id if response.HasField("cluster_id") else None,
        )

    @property
    def topics(self) -> set[str]:
        return set(self._topic_partitions)

    def topic_partitions(self, topic: str) -> tuple[TopicPartition, ...] | None:
        """The topic's partitions, indexed by partition number; None if the topic is not known."""
        return self._topic_partitions.get(topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        tps = self._topic_partitions.get(topic)
        return None if tps is None else {tp.partition for tp in tps}

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        """Partitions of `topic` whose leader is a live broker."""
        return self._available.get(topic, ())

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self._partitions.get(tp)

    def leader_for(self, tp: TopicPartition) -> BrokerMetadata | None:
        p = self._partitions.get(tp)
        return None if p is None or p.leader < 0 else self.brokers.get(p.leader)

    def leader_epoch(self, tp: TopicPartition) -> int:
        p = self._partitions.get(tp)
        return -1 if p is None else p.leader_epoch


class Metadata:
    """The current ClusterMetadata of one client, refreshed with backoff and a maximum age."""

    def __init__(
        self,
        bootstrap_servers: list[str],
        pool: ConnectionPool,
        *,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300_000,
        allow_auto_topic_creation: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap_servers = list(bootstrap_servers)
        self.pool = pool
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._clock = clock
        # The latest snapshot: an attribute, not a property, as send() reads it for every record.
        self.cluster = ClusterMetadata()
        self._topics: frozenset[str] = frozenset()
        self._need_update = True
        self._last_refresh_ms = float("-inf")
        self._last_attempt_ms = float("-inf")
        self._lock = threading.Lock()

    def now_ms(self) -> float:
        return self._clock() * 1000

    def add_topics(self, *topics: str) -> None:
        """Track more topics; metadata is then fetched for them at the next refresh."""
        if not self._topics.issuperset(topics):
            self._topics = self._topics.union(topics)
            self._need_update = True

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = frozenset(topics)
        if topics != self._topics:
            self._topics = topics
            self._need_update = True

    def request_update(self) -> None:
        self._need_update = True

    def time_to_next_update(self, now_ms: float) -> float:
        """0 when a refresh is due: requested (and not backing off) or older than metadata_max_age_ms."""
        backoff = self._last_attempt_ms + self.retry_backoff_ms - now_ms
        expiry = 0.0 if self._need_update else self._last_refresh_ms + self.metadata_max_age_ms - now_ms
        return max(backoff, expiry, 0.0)

    def maybe_refresh(self, timeout_ms: float | None = None) -> bool:
        """Refresh if due; True if it did. Errors are swallowed (the next attempt is after the backoff)."""
        if self.time_to_next_update(self.now_ms()) > 0:
            return False
        try:
            self.refresh(timeout_ms)
        except KafkaError:
            return False
        return True

    def candidate_addresses(self) -> list[str]:
        """Brokers to ask, healthy ones first: the known brokers, then the bootstrap servers."""
        addresses = [b.address for b in self.cluster.brokers.values()]
        addresses += [a for a in self.bootstrap_servers if a not in addresses]
        return sorted(addresses, key=self.pool.in_backoff)  # stable: keeps the order among equals

    def call_any(self, rpc: Rpc[Req, Resp], request: Req, timeout_ms: float | None = None) -> Resp:
        """Send `request` to the first broker that answers; a broker that does not is skipped.

        An error *answer* is returned to the caller to judge; only transport
        failures move on to the next broker. Raises the last transport error
        when no broker answered within `timeout_ms`.
        """
        deadline = self.now_ms() + (self.pool.request_timeout_ms if timeout_ms is None else timeout_ms)
        last_error: KafkaError = KafkaError("no broker to send to", ErrorCode.NETWORK_EXCEPTION)
        for address in self.candidate_addresses():
            remaining = deadline - self.now_ms()
            if remaining <= 0:
                break
            try:
                return self.pool.get(address).call(rpc, request, remaining)
            except KafkaError as exc:
                if exc.code not in _TRANSPORT_ERRORS:
                    raise
                last_error = exc
        raise last_error

    def fetch(self, topics: Iterable[str], timeout_ms: float | None = None,
              allow_auto_topic_creation: bool = False) -> ClusterMetadata:
        """One Metadata request for `topics` (all topics if empty), not kept as the current metadata."""
        request = pb.MetadataRequest(topics=sorted(topics), allow_auto_topic_creation=allow_auto_topic_creation)
        return ClusterMetadata.from_response(self.call_any(lambda stub: stub.Metadata, request, timeout_ms))

    def refresh(self, timeout_ms: float | None = None) -> ClusterMetadata:
        """One Metadata request for the tracked topics (all topics if none are tracked).

        Threads that ask together share one request: whoever waited for the
        lock while another refreshed gets that result.
        """
        asked_at = self.now_ms()
        with self._lock:
            if self._last_refresh_ms >= asked_at and not self._need_update:
                return self.cluster
            self._last_attempt_ms = self.now_ms()
            self.cluster = self.fetch(self._topics, timeout_ms, self.allow_auto_topic_creation)
            self._last_refresh_ms = self.now_ms()
            self._need_update = False
            return self.cluster

    def wait_for(self, ready: Callable[[ClusterMetadata], bool], timeout_ms: float, what: str) -> ClusterMetadata:
        """Refresh (with backoff) until `ready(cluster)` or raise KafkaTimeoutError after `timeout_ms`."""
        deadline = self.now_ms() + timeout_ms
        last_error: KafkaError | None = None
        while True:
            cluster = self.cluster
            if ready(cluster):
                return cluster
            now = self.now_ms()
            if now >= deadline:
                reason = f" (last error: {last_error})" if last_error else ""
                raise KafkaTimeoutError(f"{what} not present in metadata after {timeout_ms:.0f} ms{reason}")
            wait = self._last_attempt_ms + self.retry_backoff_ms - now
            if wait > 0:
                time.sleep(min(wait, deadline - now) / 1000)
                continue
            try:
                self.refresh(deadline - now)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last_error = exc

    def wait_for_topic(self, topic: str, timeout_ms: float) -> ClusterMetadata:
        """Metadata that knows `topic`'s partitions (Kafka's KafkaProducer.waitOnMetadata).

        A topic error that retrying cannot fix (an invalid name, ...) is raised at once.
        """
        self.add_topics(topic)

        def ready(cluster: ClusterMetadata) -> bool:
            code = cluster.topic_errors.get(topic, ErrorCode.NONE)
            if code != ErrorCode.NONE and not _retriable_code(code):
                raise error_for(code, f"topic {topic!r}")
            return cluster.topic_partitions(topic) is not None

        return self.wait_for(ready, timeout_ms, f"topic {topic!r}")


def _retriable_code(code: int) -> bool:
    try:
        return is_retriable(ErrorCode(code))
    except ValueError:
        return False
