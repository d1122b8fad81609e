"""LocalZooKeeper: a real server process that starts fast, stops cleanly and keeps its data."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zk.server import LocalZooKeeper, ZooKeeperStartError, four_letter_word, free_port

pytestmark = pytest.mark.integration


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # exited, not yet reaped by init


def test_detached_server_keeps_its_data_and_is_stopped_by_its_pid_file(
    tmp_path: Path, wait_until: Callable[..., None]
) -> None:
    server = LocalZooKeeper(tmp_path, port=free_port(), fsync=False)
    try:
        pid = server.start(timeout=60, detached=True)
        assert "Mode: standalone" in four_letter_word(server.host, server.port, "srvr")
        client = KazooClient(server.connect_string)
        client.start(timeout=30)
        client.create("/kept", b"yes")
        client.stop()
        client.close()

        # Another process (here: another instance) finds the server by data_dir alone.
        other = LocalZooKeeper(tmp_path, port=server.port)
        assert other.pid == pid
        with pytest.raises(ZooKeeperStartError, match="already running"):
            other.start()
        other.stop()
        wait_until(lambda: _pid_gone(pid), message="the detached server to exit")
        assert not other.is_running()
        assert not other.pid_file.exists()

        # Restarted on the same data directory, the znode is still there.
        server.start(timeout=60)
        client = KazooClient(server.connect_string)
        client.start(timeout=30)
        assert client.get("/kept")[0] == b"yes"
        client.stop()
        client.close()
    finally:
        server.stop()
    assert not server.is_running()


def test_busy_port_is_refused(tmp_path: Path, zookeeper: LocalZooKeeper) -> None:
    with pytest.raises(ZooKeeperStartError, match="already in use"):
        LocalZooKeeper(tmp_path, port=zookeeper.port).start(timeout=60)
