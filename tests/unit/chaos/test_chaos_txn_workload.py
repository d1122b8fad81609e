"""The transactional processors' watchdog over librdkafka calls that can block past their timeout
(confluentinc/librdkafka#5511): what returns or raises is passed on, what does not return becomes ClientHung."""

from __future__ import annotations

import threading

import pytest

from chaos.txn_workload import ClientHung, call_watched


def test_a_call_that_returns_is_waited_for() -> None:
    done: list[int] = []
    call_watched(done.append, 7)
    assert done == [7]


def test_what_a_call_raises_is_raised_on_the_callers_thread() -> None:
    def send_offsets_to_transaction() -> None:
        raise ValueError("abortable")

    with pytest.raises(ValueError, match="abortable"):
        call_watched(send_offsets_to_transaction)


def test_a_call_that_does_not_return_within_its_limit_is_given_up_and_named() -> None:
    release = threading.Event()

    def send_offsets_to_transaction() -> None:
        release.wait()

    try:
        with pytest.raises(ClientHung, match=r"send_offsets_to_transaction did not return within 0\.05 s"):
            call_watched(send_offsets_to_transaction, limit=0.05)
    finally:
        release.set()
