"""When to retry and how long to wait: pure functions of an error, a count and a clock.

Kept apart from the threads and sockets that act on them so every rule here is
unit-tested on its own (tests/unit/client/test_client_retry.py).
"""

from __future__ import annotations

import enum
import math
import random
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from client.errors import KafkaTimeoutError
from proto.errors import ErrorCode, KafkaError, invalidates_metadata, is_retriable

T = TypeVar("T")


def exponential_backoff_ms(
    attempts: int, base_ms: float, max_ms: float, jitter: float = 0.2, rand: Callable[[], float] = random.random
) -> float:
    """Kafka's ExponentialBackoff (reconnect.backoff.ms .. reconnect.backoff.max.ms).

    base * 2^(attempts-1), the exponent capped so the term stays <= max, then
    spread by +-jitter so clients that failed together do not return together.
    """
    if attempts <= 0:
        return 0.0
    exp_max = math.log2(max_ms / base_ms) if max_ms > base_ms else 0.0
    term = base_ms * 2 ** min(attempts - 1, exp_max)
    return term * (1 - jitter + 2 * jitter * rand())


def _known(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:
        return None


class ProduceAction(enum.Enum):
    COMPLETE = "complete"
    RETRY = "retry"
    FAIL = "fail"


class ProduceDecision(NamedTuple):
    action: ProduceAction
    refresh_metadata: bool


def produce_decision(
    code: int,
    *,
    retries_done: int,
    retries: int,
    now_ms: float,
    delivery_deadline_ms: float,
    earlier_batch_unresolved: bool = False,
) -> ProduceDecision:
    """What the sender does with one batch's answer (Kafka's Sender.completeBatch / canRetry).

    DUPLICATE_SEQUENCE_NUMBER is a success: the broker already has the batch
    and answers with its original offsets. OUT_OF_ORDER_SEQUENCE_NUMBER is
    retried only if an earlier batch of the partition was unresolved (in
    flight or awaiting its own retry) when this one was sent or answered: the
    broker may then merely have seen them out of order. UNKNOWN_PRODUCER_ID
    follows the same rule: a new producer's second batch can reach the broker
    before its first, and the broker knows no state for it yet. When every earlier
    batch was acknowledged before this one left, the gap is real (records were
    lost on the broker) and the batch fails, as in Kafka 2.x's
    TransactionManager.canRetry. (Kafka can look only at the answer time
    because a broker handles one connection's requests in order; gRPC does not
    promise that for concurrent calls.)
    """
    known = _known(code)
    if known in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
        return ProduceDecision(ProduceAction.COMPLETE, False)
    refresh = known is not None and invalidates_metadata(known)
    if known in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID):
        retriable = earlier_batch_unresolved
    else:
        retriable = known is not None and is_retriable(known)
    if retriable and retries_done < retries and now_ms < delivery_deadline_ms:
        return ProduceDecision(ProduceAction.RETRY, refresh)
    return ProduceDecision(ProduceAction.FAIL, refresh)


class FetchAction(enum.Enum):
    RECORDS = "records"
    RESET_OFFSET = "reset_offset"  # OFFSET_OUT_OF_RANGE: apply auto_offset_reset
    REFRESH_METADATA = "refresh_metadata"  # wrong or unknown leader: look again, then fetch again
    RETRY = "retry"  # transient: fetch again after retry_backoff_ms
    RAISE = "raise"


def fetch_action(code: int) -> FetchAction:
    """What a consumer does with one partition of a Fetch response (Kafka's Fetcher.initializeCompletedFetch)."""
    known = _known(code)
    if known is None:
        return FetchAction.RAISE
    if known == ErrorCode.NONE:
        return FetchAction.RECORDS
    if known == ErrorCode.OFFSET_OUT_OF_RANGE:
        return FetchAction.RESET_OFFSET
    if invalidates_metadata(known):
        return FetchAction.REFRESH_METADATA
    if is_retriable(known):
        return FetchAction.RETRY
    return FetchAction.RAISE


def call_with_retries(
    attempt: Callable[[float], T],
    *,
    timeout_ms: float,
    backoff_ms: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`attempt(remaining_ms)` until it returns, raises a non-retriable KafkaError, or time is up.

    Retriable errors are retried every `backoff_ms`; when the next try would
    start after `timeout_ms`, KafkaTimeoutError is raised naming the last error.
    """
    deadline = clock() * 1000 + timeout_ms
    while True:
        try:
            return attempt(max(deadline - clock() * 1000, 1.0))
        except KafkaError as exc:
            if not exc.retriable:
                raise
            if clock() * 1000 + backoff_ms >= deadline:
                raise KafkaTimeoutError(f"{what} did not succeed within {timeout_ms:.0f} ms: {exc}") from exc
            sleep(backoff_ms / 1000)
