"""Kafka's Heartbeat timers, on a clock only the test moves."""

from __future__ import annotations

import pytest

from client.heartbeat import Heartbeat


def heartbeat(now: float = 0.0) -> Heartbeat:
    return Heartbeat(session_timeout_ms=10_000, heartbeat_interval_ms=3_000, max_poll_interval_ms=30_000,
                     retry_backoff_ms=100, now_ms=now)


def test_a_heartbeat_is_due_every_interval_after_the_last_one_sent() -> None:
    hb = heartbeat()
    assert not hb.should_heartbeat(2_999) and hb.time_to_next_heartbeat(2_000) == 1_000
    assert hb.should_heartbeat(3_000)
    hb.sent_heartbeat(3_000)
    assert hb.heartbeat_in_flight and not hb.should_heartbeat(5_999) and hb.should_heartbeat(6_000)


def test_a_failed_heartbeat_is_retried_after_the_backoff() -> None:
    hb = heartbeat()
    hb.sent_heartbeat(3_000)
    hb.fail_heartbeat(3_050)
    assert not hb.heartbeat_in_flight and not hb.should_heartbeat(3_149) and hb.should_heartbeat(3_150)


def test_the_session_expires_without_an_answer_for_session_timeout() -> None:
    hb = heartbeat()
    hb.received_heartbeat(4_000)
    assert not hb.session_timeout_expired(13_999)
    assert hb.session_timeout_expired(14_000)


def test_the_poll_timer_expires_after_max_poll_interval_without_poll() -> None:
    hb = heartbeat()
    hb.poll(5_000)
    assert not hb.poll_timeout_expired(34_999) and hb.poll_timeout_expired(35_000)


def test_a_completed_join_restarts_every_timer() -> None:
    hb = heartbeat()
    hb.sent_heartbeat(1_000)
    hb.reset_timeouts(50_000)
    assert not hb.heartbeat_in_flight
    assert not hb.session_timeout_expired(59_999) and not hb.poll_timeout_expired(79_999)
    assert not hb.should_heartbeat(52_999) and hb.should_heartbeat(53_000)


def test_the_interval_must_be_below_the_session_timeout() -> None:
    with pytest.raises(ValueError, match=r"heartbeat\.interval\.ms"):
        Heartbeat(session_timeout_ms=3_000, heartbeat_interval_ms=3_000, max_poll_interval_ms=1, retry_backoff_ms=1,
                  now_ms=0)
