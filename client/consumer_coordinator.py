"""A consumer's link to its group coordinator: Kafka's ConsumerCoordinator, AbstractCoordinator and
HeartbeatThread, the I/O around client/group_membership.py's rules and client/heartbeat.py's timers.

The consumer's own thread does everything inside poll(), commit(), committed()
and close(): find the coordinator (FindCoordinator to any broker), join the
group (JoinGroup, then SyncGroup; the leader computes the assignment with the
assignor the group chose), run the rebalance listener, commit and fetch
offsets. A JoinGroup may be held by the coordinator until the whole group
rejoined, so it stays in flight across poll() calls that run out of time, as
Kafka's join future does. A daemon heartbeat thread keeps the membership
alive while the application works between polls: a Heartbeat every
heartbeat_interval_ms while the member is STABLE; no answer for
session_timeout_ms makes it look for the coordinator again; no poll() for
max_poll_interval_ms makes it leave the group.

Locking: `_lock` guards the membership, the heartbeat timers and the
coordinator's address; no network call is made while holding it, so neither
thread waits on the other's I/O.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from client.assignors import PartitionAssignor
from client.connection import ResponseFuture, Rpc
from client.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from client.errors import CommitFailedError, KafkaTimeoutError
from client.group_membership import (
    NO_GENERATION,
    GroupMembership,
    JoinedMember,
    MemberState,
    Next,
    error_code,
)
from client.heartbeat import Heartbeat
from client.metadata import Metadata
from client.offset_requests import commit_errors, committed_offsets, offset_commit_request, offset_fetch_request
from client.structs import BrokerMetadata, OffsetAndMetadata
from client.subscription import SubscriptionState
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

log = logging.getLogger(__name__)

Resp = TypeVar("Resp")

# Kafka's AbstractCoordinator gives a JoinGroup its rebalance timeout plus this much (JOIN_GROUP_TIMEOUT_LAPSE).
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000
_COORDINATOR_GONE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.NETWORK_EXCEPTION,
                     ErrorCode.REQUEST_TIMED_OUT)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], None]


@dataclass
class _AsyncCommit:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    future: concurrent.futures.Future[None]
    callback: CommitCallback | None


class ConsumerCoordinator:
    def __init__(
        self,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        *,
        group_id: str,
        client_id: str,
        assignors: list[PartitionAssignor],
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group_id = group_id
        self._client_id = client_id
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._assignors = {a.name: a for a in assignors}
        self._assignor_order = [a.name for a in assignors]
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = max_poll_interval_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._request_timeout_ms = request_timeout_ms
        self._enable_auto_commit = enable_auto_commit
        self._auto_commit_interval_ms = auto_commit_interval_ms
        self._clock = clock
        self._lock = threading.Condition(threading.RLock())
        self.membership = GroupMembership(group_id)
        self.heartbeat = Heartbeat(session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                                   max_poll_interval_ms=max_poll_interval_ms, retry_backoff_ms=retry_backoff_ms,
                                   now_ms=self._now_ms())
        self._coordinator: BrokerMetadata | None = None
        self._join_future: ResponseFuture[pb.JoinGroupResponse] | None = None
        self._needs_join_prepare = True
        self._joined_subscription: frozenset[str] = frozenset()
        # Partition counts (0: not in metadata) of the topics this member watched when it joined: a change,
        # a topic appearing included, means a rebalance (Kafka's assignmentSnapshot / metadataSnapshot).
        self._metadata_snapshot: dict[str, int] = {}
        self._next_auto_commit_ms = self._now_ms() + auto_commit_interval_ms
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._completed_commits: list[tuple[_AsyncCommit, Exception | None]] = []
        self._heartbeat_thread: HeartbeatThread | None = None
        self._closed = False

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # ------------------------------------------------------------------ the coordinator's address

    def coordinator(self) -> BrokerMetadata | None:
        with self._lock:
            return self._coordinator

    def mark_coordinator_unknown(self, reason: str) -> None:
        with self._lock:
            if self._coordinator is not None:
                log.info("Group coordinator %s is unavailable or invalid (%s), will attempt rediscovery",
                         self._coordinator.address, reason)
                self._coordinator = None
                self._join_future = None

    def ensure_coordinator_ready(self, deadline_ms: float) -> bool:
        """FindCoordinator until one answers or the deadline passes (at least one attempt)."""
        while True:
            if self.coordinator() is not None:
                return True
            try:
                response = self._metadata.call_any(
                    lambda stub: stub.FindCoordinator, pb.FindCoordinatorRequest(key=self.group_id, key_type=0),
                    max(deadline_ms - self._now_ms(), self._retry_backoff_ms))
                if response.error_code:
                    raise error_for(response.error_code, response.error_message or f"FindCoordinator of group"
                                                                                    f" {self.group_id!r}")
                with self._lock:
                    self._coordinator = BrokerMetadata(response.node_id, response.host, response.port)
                log.info("Discovered group coordinator %s for group %s", self._coordinator.address, self.group_id)
                return True
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("FindCoordinator of group %s: %s", self.group_id, exc)
                if exc.invalid_metadata:
                    self._metadata.request_update()
            if self._now_ms() + self._retry_backoff_ms >= deadline_ms:
                return False
            time.sleep(self._retry_backoff_ms / 1000)

    def _call(self, rpc: Rpc[Any, Resp], request: Any, timeout_ms: float) -> Resp:
        """One call to the coordinator; a transport failure forgets it (the next call looks for it again)."""
        coordinator = self.coordinator()
        if coordinator is None:
            raise KafkaError("the group coordinator is not known", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return self._metadata.pool.get(coordinator.address).call(rpc, request, timeout_ms)
        except KafkaError as exc:
            if exc.code in _COORDINATOR_GONE:
                self.mark_coordinator_unknown(str(exc))
            raise

    # ------------------------------------------------------------------ poll

    def poll(self, deadline_ms: float) -> bool:
        """Kafka's ConsumerCoordinator.poll, at the start of every consumer poll(): note the poll for the
        max_poll_interval_ms check, join or rejoin the group when needed, auto-commit when due. False while
        the member is not (yet) in the group: the caller has no assignment to fetch for then."""
        now = self._now_ms()
        with self._lock:
            self.heartbeat.poll(now)
        self._invoke_completed_commits()
        joined = True
        if self._subscriptions.partitions_auto_assigned:
            if self._subscriptions.pattern is not None:
                self._match_pattern()
            joined = self.ensure_coordinator_ready(deadline_ms) and self._ensure_active_group(deadline_ms)
        elif self._enable_auto_commit and self.coordinator() is None:
            self.ensure_coordinator_ready(now)  # one attempt, for the next auto-commit of assigned partitions
        self._maybe_auto_commit(now)
        return joined

    def _match_pattern(self) -> None:
        cluster = self._metadata.cluster
        if self._subscriptions.match_pattern(cluster.topics, cluster.internal_topics):
            log.info("Subscribed to topic(s) %s by pattern", ", ".join(sorted(self._subscriptions.subscription)))

    def rejoin_needed_or_pending(self) -> bool:
        with self._lock:
            if self.membership.rejoin_needed or self.membership.state is not MemberState.STABLE:
                return True
        if self._joined_subscription != self._subscriptions.subscription:
            self.membership.request_rejoin("the subscription changed")
            return True
        if self._metadata_snapshot and self._metadata_snapshot != self._partition_counts(self._metadata_snapshot):
            self.membership.request_rejoin("the partitions of the subscribed topics changed")
            return True
        return False

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        cluster = self._metadata.cluster
        return {t: len(cluster.topic_partitions(t) or ()) for t in topics}

    def _ensure_active_group(self, deadline_ms: float) -> bool:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = HeartbeatThread(self)
            self._heartbeat_thread.start()
        while self.rejoin_needed_or_pending():
            if self._closed:
                return False
            if not self.ensure_coordinator_ready(deadline_ms):
                return False
            if self._needs_join_prepare:
                self._needs_join_prepare = False
                self._on_join_prepare()
            try:
                next_step = self._join_and_sync(deadline_ms)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("Joining group %s failed: %s; retrying", self.group_id, exc)
                next_step = Next.JOIN_AFTER_BACKOFF
            if next_step is None:
                return False  # the JoinGroup is still in flight at the deadline: the next poll() goes on
            if next_step is Next.FIND_COORDINATOR:
                self.mark_coordinator_unknown("the coordinator moved")
            elif next_step is Next.JOIN_AFTER_BACKOFF:
                if self._now_ms() + self._retry_backoff_ms >= deadline_ms:
                    return False
                time.sleep(self._retry_backoff_ms / 1000)
        return True

    def _join_and_sync(self, deadline_ms: float) -> Next | None:
        """One JoinGroup and, when it says so, one SyncGroup: what to do next (STABLE: done); None when the
        JoinGroup is not answered by the deadline (it stays in flight)."""
        future = self._join_future
        if future is None:
            future = self._join_future = self._send_join_group()
        # poll(timeout_ms=inf) waits as long as the JoinGroup's own deadline.
        wait_ms = min(max(deadline_ms - self._now_ms(), 0), self._rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS)
        if not future.wait(wait_ms / 1000):
            return None
        self._join_future = None
        try:
            response = future.result(0)
        except KafkaError as exc:
            if exc.code in _COORDINATOR_GONE:
                self.mark_coordinator_unknown(str(exc))
                return Next.FIND_COORDINATOR
            raise
        with self._lock:
            next_step = self.membership.on_join_response(
                response.error_code, generation_id=response.generation_id,
                protocol_name=response.protocol_name if response.HasField("protocol_name") else None,
                leader=response.leader, member_id=response.member_id,
                members=[JoinedMember(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                                      m.metadata) for m in response.members])
            generation = self.membership.generation
            leader = self.membership.is_leader()
            members = list(self.membership.members)
        if next_step is not Next.SYNC:
            if response.error_code:
                log.info("JoinGroup of group %s answered %s", self.group_id, ErrorCode(response.error_code).name)
            return next_step
        log.info("Successfully joined group %s with generation %d as %s%s", self.group_id, generation.generation_id,
                 generation.member_id, " (the leader)" if leader else "")
        request = pb.SyncGroupRequest(group_id=self.group_id, generation_id=generation.generation_id,
                                      member_id=generation.member_id, protocol_type=PROTOCOL_TYPE,
                                      protocol_name=generation.protocol_name or "")
        if leader:
            for member_id, assignment in self._perform_assignment(generation.protocol_name or "", members).items():
                request.assignments.add(member_id=member_id, assignment=assignment)
        # A follower's SyncGroup waits for the leader's: as long as a JoinGroup may.
        sync = self._call(lambda stub: stub.SyncGroup, request, self._request_timeout_ms)
        with self._lock:
            next_step = self.membership.on_sync_response(sync.error_code)
            if next_step is Next.STABLE:
                self.heartbeat.reset_timeouts(self._now_ms())
                self._lock.notify_all()  # the heartbeat thread starts beating
        if next_step is Next.STABLE:
            self._on_join_complete(generation.generation_id, decode_assignment(sync.assignment), leader)
        else:
            log.info("SyncGroup of group %s answered %s", self.group_id, ErrorCode(sync.error_code).name)
        return next_step

    def _send_join_group(self) -> ResponseFuture[pb.JoinGroupResponse]:
        coordinator = self.coordinator()
        if coordinator is None:
            raise KafkaError("the group coordinator is not known", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        topics = sorted(self._subscriptions.subscription)
        with self._lock:
            reason = self.membership.rejoin_reason
            member_id = self.membership.start_join()
        self._joined_subscription = self._subscriptions.subscription
        request = pb.JoinGroupRequest(group_id=self.group_id, session_timeout_ms=self._session_timeout_ms,
                                      rebalance_timeout_ms=self._rebalance_timeout_ms, member_id=member_id,
                                      protocol_type=PROTOCOL_TYPE, client_id=self._client_id)
        for name in self._assignor_order:
            metadata = encode_subscription(Subscription(tuple(topics),
                                                        self._assignors[name].subscription_user_data(topics)))
            request.protocols.add(name=name, metadata=metadata)
        log.info("(Re-)joining group %s (%s)", self.group_id, reason)
        return self._metadata.pool.get(coordinator.address).call_async(
            lambda stub: stub.JoinGroup, request, self._rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS,
            long_poll=True)

    def _perform_assignment(self, protocol: str, members: list[JoinedMember]) -> dict[str, bytes]:
        """The leader's job: every member's partitions, by the assignor the group chose."""
        assignor = self._assignors.get(protocol)
        if assignor is None:
            raise KafkaError(f"Coordinator selected invalid assignment protocol: {protocol}",
                             ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        group_topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        self._subscriptions.group_subscription = group_topics
        self._metadata.add_topics(*group_topics)
        cluster = self._metadata.wait_for(lambda c: all(c.topic_partitions(t) is not None or t in c.topic_errors
                                                        for t in group_topics),
                                          self._request_timeout_ms, f"topics {sorted(group_topics)}")
        partitions = {t: len(tps) for t in group_topics if (tps := cluster.topic_partitions(t)) is not None}
        assignment = assignor.assign(partitions, subscriptions)
        log.info("Performing assignment for group %s using strategy %s with subscriptions %s", self.group_id,
                 protocol, {m: sorted(s.topics) for m, s in subscriptions.items()})
        return {member: encode_assignment(Assignment(tuple(parts))) for member, parts in assignment.items()}

    def _on_join_prepare(self) -> None:
        """Before (re)joining, in the eager protocol: commit what was consumed, then give up every partition."""
        with self._lock:
            lost = self.membership.generation_lost
        if self._enable_auto_commit and not lost:
            self._commit_consumed_sync("before rebalancing")
        owned = set(self._subscriptions.assigned_partitions())
        listener = self._subscriptions.listener
        if lost:
            log.info("Giving away all assigned partitions as lost since the generation was reset: %s", sorted(owned))
            listener.on_partitions_lost(owned)
        else:
            log.info("Revoking previously assigned partitions %s", sorted(owned))
            listener.on_partitions_revoked(owned)
        self._subscriptions.assign_from_subscribed(())
        self._metadata_snapshot = {}

    def _on_join_complete(self, generation_id: int, assignment: Assignment, leader: bool) -> None:
        self._needs_join_prepare = True
        ours = [tp for tp in assignment.partitions if tp.topic in self._subscriptions.subscription]
        if len(ours) != len(assignment.partitions):
            # The leader assigned from a subscription this member has changed since: rejoin with the new one.
            self.membership.request_rejoin("the assignment names topics the member does not subscribe to")
        self._subscriptions.assign_from_subscribed(ours)
        watched = self._subscriptions.group_subscription if leader else self._subscriptions.subscription
        if not leader:
            self._subscriptions.group_subscription = frozenset()
        self._metadata.set_topics(self._subscriptions.metadata_topics())
        self._metadata_snapshot = self._partition_counts(watched)
        log.info("Setting newly assigned partitions %s for group %s (generation %d)", sorted(ours), self.group_id,
                 generation_id)
        self._subscriptions.listener.on_partitions_assigned(set(ours))

    # ------------------------------------------------------------------ leaving

    def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup, best effort, so the group rebalances now rather than after session_timeout_ms."""
        with self._lock:
            member_id = self.membership.leave()
            coordinator = self._coordinator
        if member_id is None or coordinator is None:
            return
        log.info("Member %s sending LeaveGroup request to coordinator %s due to %s", member_id, coordinator.address,
                 reason)
        request = pb.LeaveGroupRequest(group_id=self.group_id)
        request.members.add(member_id=member_id)
        try:
            response = self._call(lambda stub: stub.LeaveGroup, request, self._request_timeout_ms)
        except KafkaError as exc:
            log.info("LeaveGroup of group %s failed: %s", self.group_id, exc)
            return
        codes = [response.error_code, *(m.error_code for m in response.members)]
        if any(codes):
            log.info("LeaveGroup of group %s answered %s", self.group_id, [ErrorCode(c).name for c in codes if c])

    def on_leave_prepare(self) -> None:
        """Leaving on purpose (close, unsubscribe): the listener hears the partitions revoked."""
        owned = set(self._subscriptions.assigned_partitions())
        if owned and self._subscriptions.partitions_auto_assigned:
            self._subscriptions.listener.on_partitions_revoked(owned)

    def close(self, autocommit: bool, timeout_ms: float) -> None:
        deadline = self._now_ms() + timeout_ms
        try:
            if autocommit and self._enable_auto_commit:
                self._commit_consumed_sync("before closing", deadline - self._now_ms())
            self._invoke_completed_commits()
            if self._subscriptions.partitions_auto_assigned:
                self.on_leave_prepare()
            self.maybe_leave_group("the consumer is being closed")
        finally:
            self._closed = True
            if self._heartbeat_thread is not None:
                self._heartbeat_thread.close()

    def unsubscribe(self) -> None:
        self.on_leave_prepare()
        self.maybe_leave_group("the consumer unsubscribed from all topics")
        self._joined_subscription = frozenset()
        self._metadata_snapshot = {}
        self._needs_join_prepare = True

    # ------------------------------------------------------------------ offsets

    def _commit_generation(self) -> tuple[int, str]:
        """(generation, member id) for an OffsetCommit: the member's while it is in the group; -1 and "" for
        a consumer with assigned partitions (a standalone commit, as Kafka's)."""
        if not self._subscriptions.partitions_auto_assigned:
            return NO_GENERATION.generation_id, NO_GENERATION.member_id
        with self._lock:
            state = self.membership.state
            generation = self.membership.generation
        if state is MemberState.STABLE:
            return generation.generation_id, generation.member_id
        if state is MemberState.UNJOINED:
            raise CommitFailedError("Commit cannot be completed since the consumer is not part of an active group"
                                    " for auto partition assignment; it is likely that the consumer was kicked out"
                                    " of the group.")
        raise error_for(ErrorCode.REBALANCE_IN_PROGRESS,
                        "Offset commit cannot be completed since the consumer is undergoing a rebalance for auto"
                        " partition assignment. You can try completing the rebalance by calling poll() and then"
                        " retry the operation.")

    def _commit_request(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> pb.OffsetCommitRequest:
        return offset_commit_request(self.group_id, *self._commit_generation(), offsets)

    def _commit_error(self, response: pb.OffsetCommitResponse) -> KafkaError | None:
        """The first partition error of an answer, as the exception the caller sees (None: all committed)."""
        for tp, error in commit_errors(response):
            code = error_code(error)
            if code in _COORDINATOR_GONE:
                self.mark_coordinator_unknown(code.name)
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
                with self._lock:
                    return self.membership.on_commit_error(code)
            return error_for(code, f"committing offsets of {tp.topic}-{tp.partition} for group {self.group_id!r}")
        return None

    def commit_offsets_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        """OffsetCommit to the coordinator until it is accepted, refused for good, or the time is up."""
        if not offsets:
            return
        deadline = self._now_ms() + timeout_ms
        last_error: KafkaError | None = None
        while True:
            if self.ensure_coordinator_ready(deadline):
                try:
                    response = self._call(lambda stub: stub.OffsetCommit, self._commit_request(offsets),
                                          max(deadline - self._now_ms(), 1))
                    last_error = self._commit_error(response)
                except KafkaError as exc:
                    last_error = exc
                if last_error is None:
                    self._last_committed.update(offsets)
                    return
                if not last_error.retriable:
                    raise last_error
            if self._now_ms() + self._retry_backoff_ms >= deadline:
                raise KafkaTimeoutError(f"Timeout of {timeout_ms:.0f}ms expired before successfully committing"
                                        f" offsets of group {self.group_id!r}"
                                        + (f" (last error: {last_error})" if last_error else ""))
            time.sleep(self._retry_backoff_ms / 1000)

    def commit_offsets_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                             callback: CommitCallback | None) -> concurrent.futures.Future[None]:
        """One OffsetCommit, not waited for: the future completes when it is answered, and the callback runs
        inside a later poll() (or commit(), close()) on the consumer's thread, as Kafka runs it."""
        commit = _AsyncCommit(dict(offsets), concurrent.futures.Future(), callback)
        coordinator = self.coordinator()
        try:
            if coordinator is None:
                raise KafkaError("the group coordinator is not known", ErrorCode.COORDINATOR_NOT_AVAILABLE)
            request = self._commit_request(commit.offsets)
        except KafkaError as exc:
            self._complete_async(commit, exc)
            return commit.future
        call = self._metadata.pool.get(coordinator.address).call_async(lambda stub: stub.OffsetCommit, request,
                                                                        self._request_timeout_ms)

        def done(answered: ResponseFuture[pb.OffsetCommitResponse]) -> None:
            try:
                error = self._commit_error(answered.result(0))
            except KafkaError as exc:
                if exc.code in _COORDINATOR_GONE:
                    self.mark_coordinator_unknown(str(exc))
                error = exc
            if error is None:
                self._last_committed.update(commit.offsets)
            self._complete_async(commit, error)

        call.add_done_callback(done)
        return commit.future

    def _complete_async(self, commit: _AsyncCommit, error: Exception | None) -> None:
        if error is None:
            commit.future.set_result(None)
        else:
            commit.future.set_exception(error)
        with self._lock:
            self._completed_commits.append((commit, error))

    def _invoke_completed_commits(self) -> None:
        with self._lock:
            completed, self._completed_commits = self._completed_commits, []
        for commit, error in completed:
            if commit.callback is not None:
                commit.callback(commit.offsets, error)
            elif error is not None:
                log.warning("Asynchronous auto-commit of offsets %s failed: %s", commit.offsets, error)

    def _consumed_to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        consumed = self._subscriptions.all_consumed()
        return {tp: o for tp, o in consumed.items() if self._last_committed.get(tp) != o}

    def _maybe_auto_commit(self, now: float) -> None:
        if not self._enable_auto_commit or now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        changed = self._consumed_to_commit()
        if changed:
            self.commit_offsets_async(changed, None)

    def _commit_consumed_sync(self, when: str, timeout_ms: float | None = None) -> None:
        changed = self._consumed_to_commit()
        try:
            self.commit_offsets_sync(changed, self._request_timeout_ms if timeout_ms is None else timeout_ms)
        except KafkaError as exc:
            log.warning("Synchronous auto-commit of offsets %s %s failed: %s", changed, when, exc)

    def fetch_committed_offsets(self, partitions: list[TopicPartition],
                                timeout_ms: float) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetFetch from the coordinator: the committed offsets (partitions without one are left out)."""
        request = offset_fetch_request(self.group_id, partitions, require_stable=True)
        deadline = self._now_ms() + timeout_ms
        last_error: KafkaError | None = None
        while True:
            if self.ensure_coordinator_ready(deadline):
                try:
                    return committed_offsets(self._call(lambda stub: stub.OffsetFetch, request,
                                                        max(deadline - self._now_ms(), 1)), self.group_id)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    if exc.code in _COORDINATOR_GONE:
                        self.mark_coordinator_unknown(str(exc))
                    last_error = exc
            if self._now_ms() + self._retry_backoff_ms >= deadline:
                raise KafkaTimeoutError(f"Timeout of {timeout_ms:.0f}ms expired before the last committed offsets"
                                        f" of group {self.group_id!r} could be fetched"
                                        + (f" (last error: {last_error})" if last_error else ""))
            time.sleep(self._retry_backoff_ms / 1000)


class HeartbeatThread(threading.Thread):
    """Kafka's HeartbeatThread: beats while the member is STABLE; gives up on a silent coordinator after
    session_timeout_ms and on a silent application after max_poll_interval_ms."""

    def __init__(self, coordinator: ConsumerCoordinator) -> None:
        super().__init__(name=f"minibroker-coordinator-heartbeat-thread | {coordinator.group_id}", daemon=True)
        self._coordinator = coordinator
        self._closed = False

    def close(self) -> None:
        c = self._coordinator
        with c._lock:
            self._closed = True
            c._lock.notify_all()
        if self is not threading.current_thread():
            self.join(timeout=c._request_timeout_ms / 1000)

    def run(self) -> None:
        try:
            while self._step():
                pass
        except Exception:
            log.exception("Heartbeat thread for group %s failed", self._coordinator.group_id)

    def _step(self) -> bool:
        """One turn of the loop: False when closed."""
        c = self._coordinator
        with c._lock:
            if self._closed:
                return False
            if c.membership.state is not MemberState.STABLE:
                c._lock.wait()  # woken when a join completes, or at close
                return True
            now = c._now_ms()
            heartbeat = c.heartbeat
            if c._coordinator is None:
                action = "find"
            elif heartbeat.session_timeout_expired(now):
                c._coordinator = None
                log.info("Group coordinator of %s is unavailable: session timed out without receiving a"
                         " heartbeat response", c.group_id)
                action = "find"
            elif heartbeat.poll_timeout_expired(now):
                action = "leave"
            elif not heartbeat.should_heartbeat(now):
                c._lock.wait(min(heartbeat.time_to_next_heartbeat(now), c._retry_backoff_ms) / 1000)
                return True
            else:
                heartbeat.sent_heartbeat(now)
                generation = c.membership.generation
                action = "beat"
        if action == "find":
            if not c.ensure_coordinator_ready(c._now_ms() + c._retry_backoff_ms):
                time.sleep(c._retry_backoff_ms / 1000)
        elif action == "leave":
            log.warning("consumer poll timeout has expired. This means the time between subsequent calls to poll()"
                        " was longer than the configured max_poll_interval_ms, which typically implies that the"
                        " poll loop is spending too much time processing messages. You can address this either by"
                        " increasing max_poll_interval_ms or by reducing the maximum size of batches returned in"
                        " poll() with max_poll_records.")
            c.maybe_leave_group("consumer poll timeout has expired.")
        else:
            self._beat(generation.generation_id, generation.member_id)
        return True

    def _beat(self, generation_id: int, member_id: str) -> None:
        c = self._coordinator
        request = pb.HeartbeatRequest(group_id=c.group_id, generation_id=generation_id, member_id=member_id)
        try:
            response = c._call(lambda stub: stub.Heartbeat, request,
                               min(c._request_timeout_ms, c._session_timeout_ms))
        except KafkaError as exc:
            log.debug("Heartbeat of group %s failed: %s", c.group_id, exc)
            with c._lock:
                c.heartbeat.fail_heartbeat(c._now_ms())
            return
        with c._lock:
            if c.membership.generation.generation_id != generation_id:
                return  # the member rejoined while the heartbeat was out: its answer is about the old generation
            try:
                next_step = c.membership.on_heartbeat_response(response.error_code)
            except KafkaError as exc:
                log.error("Heartbeat of group %s failed: %s", c.group_id, exc)
                c.heartbeat.fail_heartbeat(c._now_ms())
                return
            if next_step is Next.FIND_COORDINATOR:
                c._coordinator = None
                c.heartbeat.fail_heartbeat(c._now_ms())
            elif next_step is Next.JOIN:
                # A rebalance: the poll thread rejoins; the session is alive meanwhile.
                log.info("Attempt to heartbeat with generation %d failed: %s; the member will rejoin", generation_id,
                         ErrorCode(response.error_code).name)
                c.heartbeat.received_heartbeat(c._now_ms())
            else:
                c.heartbeat.received_heartbeat(c._now_ms())
