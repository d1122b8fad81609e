"""zk.server.free_port: the ports tests and `cluster up` plan for processes that bind them later."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from zk import server
from zk.server import free_port, free_ports


def test_free_ports_are_distinct_and_outside_the_kernels_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = free_ports(200)
    assert len(set(ports)) == 200
    assert all(p < low for p in ports), "the kernel could hand such a port to an outgoing connection meanwhile"


def test_a_port_someone_listens_on_or_that_is_to_be_avoided_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    first = free_port()
    with socket.create_server(("127.0.0.1", first)):
        monkeypatch.setattr(server, "_cursor", first - server._picked_ports().start)  # it would be next
        assert free_port(avoid={first + 1}) not in (first, first + 1)
