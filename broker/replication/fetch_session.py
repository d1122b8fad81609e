"""Fetch sessions on the leader (KIP-227; Kafka's kafka.server.FetchSession.scala: FetchSessionCache,
FetchManager.newContext, Full/Incremental/Sessionless/SessionErrorFetchContext, CachedPartition).

A follower's first fetch (session id 0, epoch 0) names every partition it
follows and creates a session holding each partition's fetch state and the
high watermark and log start offset last sent for it. Its next fetches
(epoch 1, 2, ...) name only the partitions whose fetch state changed, and the
answer holds only the partitions with records, an error, or a high watermark
or log start offset the follower has not been sent (CachedPartition's
maybeUpdateResponseData).

Beyond Kafka, which reads every partition of the session on every fetch: the
ReplicaManager marks a partition changed (`mark_changed`) wherever it wakes
delayed fetches on it (an append, a high watermark or log start offset move, a
leadership change, a deletion), so an incremental fetch reads only the
partitions it names and those marked since the session's previous read. An
idle follower's fetch costs the leader nothing per partition. Kafka's reads
also told the ISR's caught-up rule, at every fetch, that a follower at the log
end still was; here a partition's first change since its last read reports
when the follower last fetched it unchanged (`ChangedSession`), the one fetch
of those skipped reads the rule needs. Kafka's reads also retried, at every
fetch, the ISR expansion of a caught-up follower out of the ISR (skipped while
another ISR write was in flight, or dropped by a shrink that raced the fetch
that caught it up): a partition whose follower is out of its ISR when a fetch
is answered is read again at the session's next fetch (`read_again`), until
the follower is back in. And a fetch that brings its session partitions it never
answered (`adds_partitions`: a full fetch, or an incremental one naming new
partitions) is answered at once rather than parked (ReplicaManager.fetch_messages).

No I/O here: a clock is injected; the cache's lock guards every session.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field

from broker.replication.delayed_fetch import FetchResults, LogReadResult, PartitionFetchInfo
from proto.errors import ErrorCode
from proto.types import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch that wants none (and closes the one it names)
_MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # Kafka's FetchSessionCache evictionMs: unused this long, any new session may evict


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: FINAL stays FINAL; past Integer.MAX_VALUE wraps to 1, never to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the follower's last fetch state and what the leader last answered."""

    fetch_offset: int
    fetcher_log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    local_log_start_offset: int = -1

    @classmethod
    def of(cls, info: PartitionFetchInfo) -> CachedPartition:
        return cls(info.fetch_offset, info.log_start_offset, info.max_bytes, info.current_leader_epoch)

    def fetch_info(self, tp: TopicPartition) -> PartitionFetchInfo:
        return PartitionFetchInfo(tp, self.fetch_offset, self.fetcher_log_start_offset, self.max_bytes,
                                  self.current_leader_epoch)

    def update_request(self, info: PartitionFetchInfo) -> None:
        self.fetch_offset = info.fetch_offset
        self.fetcher_log_start_offset = info.log_start_offset
        self.max_bytes = info.max_bytes
        self.current_leader_epoch = info.current_leader_epoch

    def must_respond(self, result: LogReadResult) -> bool:
        """Kafka's maybeUpdateResponseData (updating): records, a new high watermark or log start offset, or an
        error go into the answer; an error resets the cached HW so the partition is sent again once it clears."""
        must = result.size > 0
        if self.high_watermark != result.high_watermark:
            self.high_watermark = result.high_watermark
            must = True
        if self.local_log_start_offset != result.log_start_offset:
            self.local_log_start_offset = result.log_start_offset
            must = True
        if result.error is not ErrorCode.NONE:
            self.high_watermark = -1
            must = True
        return must


@dataclass(frozen=True, slots=True)
class SessionKey:
    """What a session's delayed fetch watches in the fetch purgatory (beside partitions)."""

    session_id: int


@dataclass(frozen=True, slots=True)
class ChangedSession:
    """A session holding a changed partition: the key to wake its fetch by; if the change is the first since
    the partition was last read, the follower and when it last fetched the partition unchanged."""

    key: SessionKey
    replica_id: int
    unchanged_at_ms: float | None


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    replica_id: int  # the follower's broker id; -1 for a consumer
    partitions: dict[TopicPartition, CachedPartition]  # in fetch order: answered ones move to the back
    creation_ms: float
    last_used_ms: float
    epoch: int
    # Partitions something happened to since the session last read them (mark_changed).
    changed: set[TopicPartition] = field(default_factory=set)

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.id)

    @property
    def privileged(self) -> bool:
        """A follower's: only a stale session or a larger follower's evicts it."""
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class FetchSessionRequest:
    """The session half of a Fetch request."""

    session_id: int
    epoch: int
    partitions: Sequence[PartitionFetchInfo]  # all of them in a full fetch; added or changed ones in a session
    forgotten: Sequence[TopicPartition] = ()
    replica_id: int = -1  # the follower's broker id; -1 for a consumer

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    error: ErrorCode
    session_id: int
    results: FetchResults


class FetchContext:
    """What one Fetch reads and answers (Kafka's FetchContext). The sessionless one: everything named, all of it
    answered, no session."""

    error = ErrorCode.NONE
    # Whether the fetch brought partitions its session never answered (a full fetch's, or those an incremental
    # one names first): see `ReplicaManager.fetch_messages`, which answers such a fetch at once.
    adds_partitions = False

    def __init__(self, partitions: Sequence[PartitionFetchInfo] = ()) -> None:
        self._partitions = list(partitions)
        self._read_again: set[TopicPartition] = set()

    def partitions_to_read(self) -> list[PartitionFetchInfo]:
        return self._partitions

    def read_again(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions the session's next fetch reads whether or not they change (a follower out of their ISR);
        nothing without a session."""
        self._read_again.update(partitions)

    def take_changed(self) -> list[PartitionFetchInfo]:
        """Partitions of the session changed while this fetch waits, not read yet (taken once)."""
        return []

    @property
    def wake_key(self) -> SessionKey | None:
        return None

    def answer(self, results: FetchResults) -> FetchAnswer:
        return FetchAnswer(ErrorCode.NONE, INVALID_SESSION_ID, results)


class SessionErrorContext(FetchContext):
    """FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH: nothing read, the error alone answered."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__()
        self.error = error

    def answer(self, results: FetchResults) -> FetchAnswer:
        return FetchAnswer(self.error, INVALID_SESSION_ID, [])


class FullFetchContext(FetchContext):
    """A full fetch (epoch 0): everything named is read and answered; the answer creates the session."""

    def __init__(self, cache: FetchSessionCache, partitions: Sequence[PartitionFetchInfo], replica_id: int) -> None:
        super().__init__(partitions)
        self._cache = cache
        self._replica_id = replica_id
        self.adds_partitions = bool(self._partitions)

    def answer(self, results: FetchResults) -> FetchAnswer:
        session_id = self._cache.maybe_create_session(self._replica_id, results, self._read_again)
        return FetchAnswer(ErrorCode.NONE, session_id, results)


class IncrementalFetchContext(FetchContext):
    """A fetch in a session: reads what it names and what changed; answers what the follower has not seen."""

    def __init__(self, cache: FetchSessionCache, session: FetchSession, named: Sequence[PartitionFetchInfo],
                 changed: Sequence[PartitionFetchInfo], adds_partitions: bool) -> None:
        super().__init__([*named, *changed])
        self._cache = cache
        self._session = session
        self._expected_epoch = session.epoch
        self.adds_partitions = adds_partitions

    @property
    def wake_key(self) -> SessionKey:
        return self._session.key

    def take_changed(self) -> list[PartitionFetchInfo]:
        return self._cache.take_changed(self._session, self._expected_epoch)

    def answer(self, results: FetchResults) -> FetchAnswer:
        return self._cache.incremental_answer(self._session, self._expected_epoch, results, self._read_again)


class FetchSessionCache:
    """Kafka's FetchSessionCache and FetchManager: sessions by id, their slots, the partition index
    `mark_changed` uses. Thread-safe: fetches arrive on the event loop, changes from any thread."""

    def __init__(self, max_slots: int = DEFAULT_MAX_SLOTS, time_ms: Callable[[], float] | None = None,
                 eviction_ms: float = DEFAULT_EVICTION_MS, rng: random.Random | None = None) -> None:
        self._max_slots = max_slots
        self._time_ms = time_ms if time_ms is not None else _monotonic_ms
        self._eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._sessions: dict[int, FetchSession] = {}
        self._by_partition: dict[TopicPartition, set[FetchSession]] = {}
        self.evictions = 0

    # ------------------------------------------------------------------ FetchManager.newContext

    def new_context(self, request: FetchSessionRequest) -> FetchContext:
        if request.is_full:
            if request.session_id != INVALID_SESSION_ID:
                # Any session a full fetch names is closed.
                self.remove(request.session_id)
            if request.epoch == FINAL_EPOCH:
                return FetchContext(request.partitions)
            return FullFetchContext(self, request.partitions, request.replica_id)
        with self._lock:
            session = self._sessions.get(request.session_id)
            if session is None:
                return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != request.epoch:
                return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            named, added = self._update(session, request.partitions, request.forgotten)
            if not session.partitions:
                self._remove(session)
                return FetchContext(request.partitions)
            session.last_used_ms = self._time_ms()
            session.epoch = next_epoch(session.epoch)
            changed = self._take_changed(session, exclude=named)
        return IncrementalFetchContext(self, session, request.partitions, changed, added)

    def _update(self, session: FetchSession, partitions: Iterable[PartitionFetchInfo],
                forgotten: Iterable[TopicPartition]) -> tuple[set[TopicPartition], bool]:
        """Kafka's FetchSession.update: named partitions added or updated, forgotten ones removed. Returns the
        named partitions, and whether any was added."""
        named = set()
        added = False
        for info in partitions:
            tp = info.topic_partition
            named.add(tp)
            cached = session.partitions.get(tp)
            if cached is None:
                session.partitions[tp] = CachedPartition.of(info)
                self._by_partition.setdefault(tp, set()).add(session)
                added = True
            else:
                cached.update_request(info)
        for tp in forgotten:
            if session.partitions.pop(tp, None) is not None:
                session.changed.discard(tp)
                self._unindex(tp, session)
        return named, added

    @staticmethod
    def _take_changed(session: FetchSession, exclude: Set[TopicPartition] = frozenset()) -> list[PartitionFetchInfo]:
        taken = [session.partitions[tp].fetch_info(tp) for tp in session.changed
                 if tp not in exclude and tp in session.partitions]
        session.changed.clear()
        return taken

    def take_changed(self, session: FetchSession, expected_epoch: int) -> list[PartitionFetchInfo]:
        with self._lock:
            if session.epoch != expected_epoch or self._sessions.get(session.id) is not session:
                return []
            return self._take_changed(session)

    # ------------------------------------------------------------------ answers

    def maybe_create_session(self, replica_id: int, results: FetchResults,
                             read_again: Set[TopicPartition] = frozenset()) -> int:
        """Kafka's maybeCreateSession: a slot if free or if evicting one is allowed; its id, else 0."""
        now = self._time_ms()
        with self._lock:
            if len(self._sessions) >= self._max_slots and not self._try_evict(replica_id >= 0, len(results), now):
                return INVALID_SESSION_ID
            partitions = {}
            for info, result in results:
                cached = CachedPartition.of(info)
                cached.must_respond(result)
                partitions[info.topic_partition] = cached
            session_id = self._new_session_id()
            session = FetchSession(session_id, replica_id, partitions, now, now, next_epoch(INITIAL_EPOCH),
                                   changed=_errored(results) | (read_again & partitions.keys()))
            self._sessions[session_id] = session
            for tp in partitions:
                self._by_partition.setdefault(tp, set()).add(session)
            return session_id

    def incremental_answer(self, session: FetchSession, expected_epoch: int, results: FetchResults,
                           read_again: Set[TopicPartition] = frozenset()) -> FetchAnswer:
        with self._lock:
            if session.epoch != expected_epoch or self._sessions.get(session.id) is not session:
                # Another fetch in the session came meanwhile: a duplicate or a retry (Kafka's check).
                return FetchAnswer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
            answered = []
            for info, result in results:
                tp = info.topic_partition
                cached = session.partitions.get(tp)
                if cached is not None and cached.must_respond(result):
                    # To the back: the next read's byte budget goes to the others first.
                    session.partitions[tp] = session.partitions.pop(tp)
                    answered.append((info, result))
            session.changed |= _errored(results) | (read_again & session.partitions.keys())
            return FetchAnswer(ErrorCode.NONE, session.id, answered)

    # ------------------------------------------------------------------ changes (any thread)

    def mark_changed(self, tp: TopicPartition) -> list[ChangedSession]:
        """Something happened to `tp` that may change its answer: the sessions holding it, to wake; for each
        whose partition was unchanged until now, the follower was at its fetch offset at the session's last
        fetch (the change comes after it)."""
        with self._lock:
            sessions = self._by_partition.get(tp)
            if not sessions:
                return []
            changed = []
            for session in sessions:
                first = tp not in session.changed
                session.changed.add(tp)
                changed.append(ChangedSession(session.key, session.replica_id, session.last_used_ms if first else None))
            return changed

    # ------------------------------------------------------------------ slots

    def _try_evict(self, privileged: bool, size: int, now: float) -> bool:
        """Kafka's tryEvict: the least recently used session if unused for eviction_ms; else the least valuable
        one the newcomer outranks by (privileged, size), among sessions created over eviction_ms ago and, for
        a follower's newcomer, any consumer's session."""
        if not self._sessions:
            return False
        oldest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self._eviction_ms:
            self._evict(oldest)
            return True
        evictable = [s for s in self._sessions.values()
                     if now - s.creation_ms > self._eviction_ms or (privileged and not s.privileged)]
        if not evictable:
            return False
        least = min(evictable, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size) <= (least.privileged, len(least.partitions)):
            return False
        self._evict(least)
        return True

    def _evict(self, session: FetchSession) -> None:
        self._remove(session)
        self.evictions += 1

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_EPOCH - 1)
            if session_id not in self._sessions:
                return session_id

    def remove(self, session_id: int) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._remove(session)

    def _remove(self, session: FetchSession) -> None:
        self._sessions.pop(session.id, None)
        for tp in session.partitions:
            self._unindex(tp, session)

    def _unindex(self, tp: TopicPartition, session: FetchSession) -> None:
        sessions = self._by_partition.get(tp)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_partition[tp]

    # ------------------------------------------------------------------ metrics

    def __len__(self) -> int:
        """Kafka's NumIncrementalFetchSessions."""
        with self._lock:
            return len(self._sessions)

    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        with self._lock:
            return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        with self._lock:
            return self._sessions.get(session_id)


def _errored(results: FetchResults) -> set[TopicPartition]:
    """Partitions answered with an error are read again at the session's next fetch, as Kafka reads every
    partition every time: what cures an error (this broker becoming the leader, the metadata arriving) marks
    nothing, and a follower fetching in the same state names nothing."""
    return {info.topic_partition for info, result in results if result.error is not ErrorCode.NONE}


def _monotonic_ms() -> float:
    return time.monotonic() * 1000
