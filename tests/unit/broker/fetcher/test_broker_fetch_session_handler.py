"""The follower's side of a fetch session (broker/fetcher/fetch_session_handler.py)."""

from __future__ import annotations

from broker.fetcher.fetch_session_handler import INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionHandler
from broker.fetcher.protocol import FetchRequestPartition
from proto.errors import ErrorCode
from proto.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(3)]


def part(tp: TopicPartition, offset: int = 10, log_start: int = 0) -> FetchRequestPartition:
    return FetchRequestPartition(tp, offset, log_start, 1024, 4)


def established(session_id: int = 77) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    first = handler.build([part(tp) for tp in TPS])
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
    request = handler.build([part(tp) for tp in TPS])
    assert (request.session_id, request.epoch, request.partitions, request.forgotten) == (77, 1, [], [])
    assert handler.handle_response(ErrorCode.NONE, 77, [])
    assert handler.build([part(tp) for tp in TPS]).epoch == 2


def test_changed_added_and_dropped_partitions_are_named_or_forgotten() -> None:
    handler = established()
    extra = TopicPartition("u", 0)
    request = handler.build([part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra)])
    assert request.partitions == [part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra)]
    assert request.forgotten == [TPS[2]]
    assert handler.handle_response(ErrorCode.NONE, 77, [TPS[0]])
    assert list(handler.session_partitions) == [TPS[0], TPS[1], extra]
    # What was named is what the session holds now: the same state again is not named.
    assert handler.build([part(TPS[0], offset=11), part(TPS[1], log_start=3), part(extra)]).partitions == []


def test_session_not_found_starts_a_new_session() -> None:
    handler = established()
    handler.build([part(tp) for tp in TPS])
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    request = handler.build([part(tp) for tp in TPS])
    assert (request.session_id, request.epoch, len(request.partitions)) == (INVALID_SESSION_ID, INITIAL_EPOCH, 3)


def test_an_invalid_epoch_closes_the_session_with_a_full_fetch_naming_it() -> None:
    handler = established()
    handler.build([part(tp) for tp in TPS])
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77, [])
    request = handler.build([part(tp) for tp in TPS])
    assert (request.session_id, request.epoch, len(request.partitions)) == (77, INITIAL_EPOCH, 3)
    assert handler.handle_response(ErrorCode.NONE, 78, TPS)
    assert (handler.session_id, handler.epoch) == (78, 1)


def test_a_transport_failure_makes_the_next_fetch_full() -> None:
    handler = established()
    handler.build([part(tp) for tp in TPS])
    handler.handle_error()
    assert handler.build([part(tp) for tp in TPS]).is_full


def test_an_answer_for_a_partition_outside_the_session_restarts_it() -> None:
    handler = established()
    handler.build([part(TPS[0])])
    assert not handler.handle_response(ErrorCode.NONE, 77, [TPS[2]])
    assert handler.build([part(TPS[0])]).is_full


def test_a_leader_without_a_slot_leaves_every_fetch_full() -> None:
    handler = FetchSessionHandler()
    handler.build([part(TPS[0])])
    assert handler.handle_response(ErrorCode.NONE, INVALID_SESSION_ID, [TPS[0]])
    request = handler.build([part(TPS[0])])
    assert (request.session_id, request.is_full, len(request.partitions)) == (INVALID_SESSION_ID, True, 1)
