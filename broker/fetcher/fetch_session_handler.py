"""A follower's side of its fetch session with one leader (KIP-227; Kafka's FetchSessionHandler.java).

The first fetch is full (session 0, epoch 0): it names every partition and the
leader answers with a session id. Each later fetch names only the partitions
whose fetch state (offset, log start offset, max bytes, leader epoch) changed
since the previous request, and forgets those no longer fetched; the leader
answers only partitions with something new. A session error
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), a transport failure,
or an answer naming a partition the session does not hold sends the next fetch
full again. Rules only: broker/fetcher/blocking_send.py does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.fetcher.protocol import FetchRequestPartition
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
        self._next: dict[TopicPartition, FetchRequestPartition] = {}
        self._in_flight: SessionFetchRequest | None = None

    def build(self, partitions: Iterable[FetchRequestPartition]) -> SessionFetchRequest:
        """The request fetching `partitions` (every partition the fetcher wants now), in its order."""
        self._next = {p.topic_partition: p for p in partitions}
        if self.epoch == INITIAL_EPOCH:
            request = SessionFetchRequest(self.session_id, INITIAL_EPOCH, list(self._next.values()), [])
        else:
            request = SessionFetchRequest(
                self.session_id, self.epoch,
                # The fetcher hands back the same entry for an unchanged partition: identity settles most.
                [p for tp, p in self._next.items() if (named := self._session.get(tp)) is not p and named != p],
                [tp for tp in self._session if tp not in self._next])
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
        if any(tp not in self._next for tp in answered):
            # The leader answered for a partition the session does not hold: start it again.
            self._close_existing()
            return False
        if request.is_full:
            # 0: the leader had no slot; stay sessionless (every fetch full, each asking again).
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        else:
            self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        self._session = dict(self._next) if self.session_id != INVALID_SESSION_ID else {}
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

    @property
    def session_partitions(self) -> Mapping[TopicPartition, FetchRequestPartition]:
        return self._session
