"""The follower's channel to its leader: reconnects at replica.fetch.backoff.ms, not gRPC's default backoff."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from broker.fetcher.blocking_send import ReplicaFetcherBlockingSend
from broker.fetcher.protocol import BrokerEndPoint, ReplicaFetcherConfig


@pytest.mark.parametrize(("fetch_backoff_ms", "expected"), [(250, 250), (0, 1)])
def test_channel_reconnects_at_the_fetch_backoff(monkeypatch: pytest.MonkeyPatch, fetch_backoff_ms: int,
                                                 expected: int) -> None:
    made: list[tuple[str, dict[str, Any]]] = []
    real = grpc.insecure_channel

    def capture(target: str, options: list[tuple[str, Any]]) -> grpc.Channel:
        made.append((target, dict(options)))
        return real(target, options=options)

    monkeypatch.setattr(grpc, "insecure_channel", capture)
    send = ReplicaFetcherBlockingSend(BrokerEndPoint(2, "127.0.0.1", 9), 1, None,
                                      ReplicaFetcherConfig(fetch_backoff_ms=fetch_backoff_ms))
    send.close()
    [(target, options)] = made
    assert target == "127.0.0.1:9"
    for key in ("grpc.initial_reconnect_backoff_ms", "grpc.min_reconnect_backoff_ms", "grpc.max_reconnect_backoff_ms"):
        assert options[key] == expected
