"""The follower's side of a fetch session (broker/fetcher/fetch_session_handler.py)."""

from __future__ import annotations

from collections.abc import Iterable

from broker.fetcher.fetch_session_handler import INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionHandler
from broker.fetcher.protocol import FetchPartitions, FetchRequestPartition
from proto.errors import ErrorCode
from proto.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(3)]


def part(tp: TopicPartition, offset: int = 10, log_start: int = 0) -> FetchRequestPartition:
    return FetchRequestPartition(tp, offset, log_start, 1024, 4)


def wanting(*entries: FetchRequestPartition, changed: Iterable[TopicPartition] | None = None) -> FetchPartitions:
    """The fetcher wants `entries`; `changed` (by default every partition, and TPS for those dropped) changed."""
    wanted = {p.topic_partition: p for p in entries}
    return FetchPartitions(wanted, list(dict.fromkeys([*wanted, *TPS])) if changed is None else list(changed))


def established(session_id: int = 77) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    first = handler.build(wanting(*(part(tp) for tp in TPS)))
    assert (first.session_id, first.epoch, first.is_full) == (INVALID_SESSION_ID, INITIAL_EPOCH, True)
    assert [p.topic_partition for p in first.partitions] == TPS and first.forgotten == []
    assert handler.handle_response(ErrorCode.NONE, session_id, TPS)
    return handler


def test_the_first_fetch_is_full_and_the_answer_opens_the_session() -> None:
    handler = established()
    assert (handler.session_id, handler.epoch) == (77, 1)
    assert list(handler.session_partitions) == TPS


def test_an_unchanged_fetch_names_nothing_and_moves_the_epoch() -> None:
    handler = established()
    request = handler.build(wanting(*(part(tp) for tp in TPS)))
    assert (request.session_id, request.epoch, request.partitions, request.forgotten) == (77, 1, [], [])
    assert handler.handle_response(ErrorCode.NONE, 77, [])
    assert handler.build(wanting(*(part(tp) for tp in TPS))).epoch == 2


def test_changed_added_and_dropped_partitions_are_named_or_forgotten() -> None:
    handler = established()
    extra = TopicPartition("u", 0)
    request = handler.build(wanting(part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra)))
    assert request.partitions == [part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra)]
    assert request.forgotten == [TPS[2]]
    assert handler.handle_response(ErrorCode.NONE, 77, [TPS[0]])
    assert list(handler.session_partitions) == [TPS[0], TPS[1], extra]
    # What was named is what the session holds now: the same state again is not named.
    assert handler.build(wanting(part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra))).partitions == []


def test_session_not_found_starts_a_new_session() -> None:
    handler = established()
    handler.build(wanting(*(part(tp) for tp in TPS)))
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    request = handler.build(wanting(*(part(tp) for tp in TPS)))
    assert (request.session_id, request.epoch, len(request.partitions)) == (INVALID_SESSION_ID, INITIAL_EPOCH, 3)


def test_an_invalid_epoch_closes_the_session_with_a_full_fetch_naming_it() -> None:
    handler = established()
    handler.build(wanting(*(part(tp) for tp in TPS)))
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77, [])
    request = handler.build(wanting(*(part(tp) for tp in TPS)))
    assert (request.session_id, request.epoch, len(request.partitions)) == (77, INITIAL_EPOCH, 3)
    assert handler.handle_response(ErrorCode.NONE, 78, TPS)
    assert (handler.session_id, handler.epoch) == (78, 1)


def test_a_transport_failure_makes_the_next_fetch_full() -> None:
    handler = established()
    handler.build(wanting(*(part(tp) for tp in TPS)))
    handler.handle_error()
    assert handler.build(wanting(*(part(tp) for tp in TPS))).is_full


def test_an_answer_for_a_partition_outside_the_session_restarts_it() -> None:
    handler = established()
    handler.build(wanting(part(TPS[0])))
    assert not handler.handle_response(ErrorCode.NONE, 77, [TPS[2]])
    assert handler.build(wanting(part(TPS[0]))).is_full


def test_a_leader_without_a_slot_leaves_every_fetch_full() -> None:
    handler = FetchSessionHandler()
    handler.build(wanting(part(TPS[0])))
    assert handler.handle_response(ErrorCode.NONE, INVALID_SESSION_ID, [TPS[0]])
    request = handler.build(wanting(part(TPS[0])))
    assert (request.session_id, request.is_full, len(request.partitions)) == (INVALID_SESSION_ID, True, 1)


class CountingEntries(dict[TopicPartition, FetchRequestPartition]):
    """The fetcher's entries, counting the lookups and walks a build makes."""

    looked_at = 0

    def get(self, key: TopicPartition, default: object = None) -> FetchRequestPartition | None:  # type: ignore[override]
        self.looked_at += 1
        return super().get(key)  # type: ignore[return-value]

    def values(self):  # type: ignore[no-untyped-def]
        self.looked_at += len(self)
        return super().values()


def test_an_incremental_fetch_looks_only_at_the_partitions_said_changed() -> None:
    """At 10,000 idle partitions, a dict and a comparison of every entry per round was the follower's cost."""
    many = [TopicPartition("many", p) for p in range(1000)]
    handler = FetchSessionHandler()
    handler.build(FetchPartitions({tp: part(tp) for tp in many}, many))
    assert handler.handle_response(ErrorCode.NONE, 77, [])
    entries = CountingEntries({tp: part(tp) for tp in many})
    entries[many[5]] = part(many[5], offset=11)
    request = handler.build(FetchPartitions(entries, [many[5]]))
    assert request.partitions == [part(many[5], offset=11)] and request.forgotten == []
    assert entries.looked_at == 1
    assert handler.handle_response(ErrorCode.NONE, 77, [many[5]])
    assert handler.session_partitions[many[5]] == part(many[5], offset=11)
    entries.looked_at = 0
    request = handler.build(FetchPartitions(entries, []))  # an idle round
    assert (request.partitions, request.forgotten, entries.looked_at) == ([], [], 0)


def test_changes_of_a_failed_fetch_are_named_by_the_full_fetch_after_it() -> None:
    handler = established()
    handler.build(wanting(part(TPS[0], offset=11), *(part(tp) for tp in TPS[1:]), changed=[TPS[0]]))
    handler.handle_error()
    request = handler.build(wanting(part(TPS[0], offset=11), *(part(tp) for tp in TPS[1:]), changed=[]))
    assert request.is_full and request.partitions[0] == part(TPS[0], offset=11) and len(request.partitions) == 3


def test_a_change_undone_before_the_fetch_names_nothing() -> None:
    handler = established()
    request = handler.build(wanting(*(part(tp) for tp in TPS), changed=[TPS[1]]))
    assert (request.partitions, request.forgotten) == ([], [])
