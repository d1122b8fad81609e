"""Retry and backoff decisions: pure functions of the error code, the counts and the clock."""

from __future__ import annotations

import pytest

from client.errors import KafkaTimeoutError
from client.retry import (
    FetchAction,
    ProduceAction,
    call_with_retries,
    exponential_backoff_ms,
    fetch_action,
    produce_decision,
)
from proto.errors import ErrorCode, KafkaError, error_for
from tests.fakes import FakeClock

E = ErrorCode


def decide(code: int, retries_done: int = 0, retries: int = 10, now: float = 0, deadline: float = 1000,
           unresolved: bool = False) -> tuple[ProduceAction, bool]:
    d = produce_decision(code, retries_done=retries_done, retries=retries, now_ms=now, delivery_deadline_ms=deadline,
                         earlier_batch_unresolved=unresolved)
    return d.action, d.refresh_metadata


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (E.NONE, (ProduceAction.COMPLETE, False)),
        # The broker already has the batch and answers with its original offsets.
        (E.DUPLICATE_SEQUENCE_NUMBER, (ProduceAction.COMPLETE, False)),
        # The leader moved: retry, but only after looking up the new one.
        (E.NOT_LEADER_OR_FOLLOWER, (ProduceAction.RETRY, True)),
        (E.UNKNOWN_TOPIC_OR_PARTITION, (ProduceAction.RETRY, True)),
        (E.NETWORK_EXCEPTION, (ProduceAction.RETRY, True)),
        (E.LEADER_NOT_AVAILABLE, (ProduceAction.RETRY, True)),
        # Retriable but the metadata is fine.
        (E.NOT_ENOUGH_REPLICAS, (ProduceAction.RETRY, False)),
        (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, (ProduceAction.RETRY, False)),
        (E.REQUEST_TIMED_OUT, (ProduceAction.RETRY, False)),
        (E.CORRUPT_MESSAGE, (ProduceAction.RETRY, False)),
        # Retrying cannot help.
        (E.MESSAGE_TOO_LARGE, (ProduceAction.FAIL, False)),
        (E.INVALID_RECORD, (ProduceAction.FAIL, False)),
        (E.UNKNOWN_SERVER_ERROR, (ProduceAction.FAIL, False)),
        (E.CLUSTER_AUTHORIZATION_FAILED, (ProduceAction.FAIL, False)),
        (E.UNKNOWN_PRODUCER_ID, (ProduceAction.FAIL, False)),
        (9999, (ProduceAction.FAIL, False)),  # a code this client does not know
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_produce_decision_by_error(code: int, expected: tuple[ProduceAction, bool]) -> None:
    assert decide(code) == expected


def test_retries_stop_at_the_retry_count() -> None:
    assert decide(E.NOT_LEADER_OR_FOLLOWER, retries_done=2, retries=3)[0] is ProduceAction.RETRY
    assert decide(E.NOT_LEADER_OR_FOLLOWER, retries_done=3, retries=3) == (ProduceAction.FAIL, True)
    assert decide(E.NOT_ENOUGH_REPLICAS, retries=0)[0] is ProduceAction.FAIL


def test_retries_stop_at_the_delivery_timeout() -> None:
    assert decide(E.REQUEST_TIMED_OUT, now=999, deadline=1000)[0] is ProduceAction.RETRY
    assert decide(E.REQUEST_TIMED_OUT, now=1000, deadline=1000)[0] is ProduceAction.FAIL


@pytest.mark.parametrize("code", [E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID])
def test_sequence_errors_are_retried_only_behind_an_unresolved_batch(code: E) -> None:
    # An earlier batch is still in flight or awaiting its retry: the broker merely saw them out of order
    # (for a new producer: its second batch arrived before the first, so the broker knows no state yet).
    assert decide(code, unresolved=True)[0] is ProduceAction.RETRY
    # The batch is the very next one the broker expects: the gap is real and the batch fails.
    assert decide(code, unresolved=False)[0] is ProduceAction.FAIL


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (E.NONE, FetchAction.RECORDS),
        (E.OFFSET_OUT_OF_RANGE, FetchAction.RESET_OFFSET),
        (E.NOT_LEADER_OR_FOLLOWER, FetchAction.REFRESH_METADATA),
        (E.UNKNOWN_TOPIC_OR_PARTITION, FetchAction.REFRESH_METADATA),
        (E.FENCED_LEADER_EPOCH, FetchAction.REFRESH_METADATA),
        (E.UNKNOWN_LEADER_EPOCH, FetchAction.REFRESH_METADATA),
        (E.KAFKA_STORAGE_ERROR, FetchAction.REFRESH_METADATA),
        (E.REQUEST_TIMED_OUT, FetchAction.RETRY),
        (E.CORRUPT_MESSAGE, FetchAction.RETRY),
        (E.CLUSTER_AUTHORIZATION_FAILED, FetchAction.RAISE),
        (E.UNKNOWN_SERVER_ERROR, FetchAction.RAISE),
        (12345, FetchAction.RAISE),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_fetch_action_by_error(code: int, expected: FetchAction) -> None:
    assert fetch_action(code) is expected


def test_every_known_code_has_a_consistent_classification() -> None:
    for code in ErrorCode:
        error = error_for(code)
        # Metadata-invalidating errors are a subset of the retriable ones, as in Kafka.
        if error.invalid_metadata:
            assert error.retriable, code


def test_exponential_backoff_doubles_up_to_the_maximum() -> None:
    middle = lambda: 0.5  # noqa: E731 - jitter factor exactly 1
    assert exponential_backoff_ms(0, 50, 1000, rand=middle) == 0
    assert [exponential_backoff_ms(n, 50, 1000, rand=middle) for n in range(1, 8)] == pytest.approx(
        [50, 100, 200, 400, 800, 1000, 1000])
    assert exponential_backoff_ms(3, 50, 1000, rand=lambda: 0.0) == pytest.approx(200 * 0.8)
    assert exponential_backoff_ms(3, 50, 1000, rand=lambda: 1.0) == pytest.approx(200 * 1.2)
    assert exponential_backoff_ms(5, 100, 100, rand=middle) == 100  # max <= base: constant



def test_call_with_retries_backs_off_between_retriable_errors() -> None:
    clock = FakeClock(0.0)
    answers: list[Exception | str] = [KafkaError("x", E.COORDINATOR_NOT_AVAILABLE),
                                      KafkaError("y", E.NETWORK_EXCEPTION), "done"]

    def attempt(remaining_ms: float) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert call_with_retries(attempt, timeout_ms=1000, backoff_ms=100, what="t", clock=clock,
                             sleep=clock.sleep) == "done"
    assert clock.sleeps == [0.1, 0.1]


def test_call_with_retries_raises_non_retriable_at_once() -> None:
    clock = FakeClock(0.0)

    def attempt(remaining_ms: float) -> None:
        raise KafkaError("no", E.TOPIC_ALREADY_EXISTS)

    with pytest.raises(KafkaError) as err:
        call_with_retries(attempt, timeout_ms=1000, backoff_ms=100, what="t", clock=clock, sleep=clock.sleep)
    assert err.value.code == E.TOPIC_ALREADY_EXISTS and clock.sleeps == []


def test_call_with_retries_times_out_naming_the_last_error() -> None:
    clock = FakeClock(0.0)
    remaining_seen: list[float] = []

    def attempt(remaining_ms: float) -> None:
        remaining_seen.append(remaining_ms)
        raise KafkaError("broker gone", E.NETWORK_EXCEPTION)

    with pytest.raises(KafkaTimeoutError, match="broker gone"):
        call_with_retries(attempt, timeout_ms=350, backoff_ms=100, what="t", clock=clock, sleep=clock.sleep)
    assert remaining_seen == pytest.approx([350, 250, 150, 50])  # each attempt gets what is left, no more
