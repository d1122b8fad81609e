"""A follower's side of its fetch session with one leader (KIP-227; Kafka's FetchSessionHandler.java).

The first fetch is full (session 0, epoch 0): it names every partition and the
leader answers with a session id. Each later fetch names only the partitions
whose fetch state (offset, log start offset, max bytes, leader epoch) changed
since the previous request, and forgets those no longer fetched; the leader
answers only partitions with something new. Only the partitions the fetcher
says changed since its previous fetch are looked at to decide which (Kafka
compares every partition each time). A session error
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), a transport failure,
or an answer naming a partition the session does not hold sends the next fetch
full again. Rules only: broker/fetcher/blocking_send.py does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.fetcher.protocol import FetchPartitions, FetchRequestPartition
from proto.errors import ErrorCode
from proto.types import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1
SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})


@dataclass(frozen=True, slots=True)
class SessionFetchRequest:
    """What goes into the next Fetch: the session fields and the partitions to name and to forget."""

    session_id: int
    epoch: int
    partitions: list[FetchRequestPartition]
    forgotten: list[TopicPartition]

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds for us: each partition as last named.
        self._session: dict[TopicPartition, FetchRequestPartition] = {}
        # Partitions changed since the session last agreed with the fetcher (insertion-ordered): only these can
        # differ from what the session holds, so an incremental fetch looks at them alone, not at every
        # partition (at 10,000 partitions, a dict and a comparison of each per round, idle or not).
        self._unsynced: dict[TopicPartition, None] = {}
        self._in_flight: SessionFetchRequest | None = None

    def build(self, partitions: FetchPartitions) -> SessionFetchRequest:
        """The request fetching `partitions.entries` (every partition the fetcher wants now), in its order."""
        self._unsynced.update(dict.fromkeys(partitions.changed))
        entries = partitions.entries
        if self.epoch == INITIAL_EPOCH:
            request = SessionFetchRequest(self.session_id, INITIAL_EPOCH, list(entries.values()), [])
        else:
            request = SessionFetchRequest(
                self.session_id, self.epoch,
                # The fetcher hands back the same entry for an unchanged partition: identity settles most.
                [p for tp in self._unsynced
                 if (p := entries.get(tp)) is not None and (named := self._session.get(tp)) is not p and named != p],
                [tp for tp in self._unsynced if tp not in entries and tp in self._session])
        self._in_flight = request
        return request

    def handle_response(self, error: ErrorCode, session_id: int, answered: Iterable[TopicPartition]) -> bool:
        """Kafka's handleResponse: True if the answer's partitions may be used; on False the next fetch is
        full (a new session asked for)."""
        request = self._in_flight
        self._in_flight = None
        if request is None or error is not ErrorCode.NONE:
            if error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self._close_existing()
            return False
        if request.is_full:
            fetched = {p.topic_partition: p for p in request.partitions}
            # 0: the leader had no slot; stay sessionless (every fetch full, each asking again).
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
            self._session = fetched if self.session_id != INVALID_SESSION_ID else {}
        else:
            fetched = self._session
            fetched.update((p.topic_partition, p) for p in request.partitions)
            for tp in request.forgotten:
                del fetched[tp]
            self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        self._unsynced = {}
        if any(tp not in fetched for tp in answered):
            # The leader answered for a partition the session does not hold: start it again.
            self._close_existing()
            return False
        return True

    def handle_error(self) -> None:
        """The fetch failed in transport: the leader may or may not have moved the epoch on (Kafka's
        handleError); the next fetch is full, closing the session it names."""
        self._in_flight = None
        self._close_existing()

    def _close_existing(self) -> None:
        """Kafka's nextCloseExisting: the next fetch is full, with this session's id so the leader drops it."""
        self.epoch = INITIAL_EPOCH
        self._session = {}
        self._unsynced = {}

    @property
    def session_partitions(self) -> Mapping[TopicPartition, FetchRequestPartition]:
        return self._session
