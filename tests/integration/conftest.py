"""Integration fixtures: one real ZooKeeper server per test session, a private chroot per test.

Each test's clients connect under /test-<random>, so tests never see each
other's znodes and need no cleanup between them; the whole server (and its data
directory) goes away at the end of the session.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from zk.client import KafkaZkClient
from zk.server import LocalZooKeeper

WaitUntil = Callable[..., None]


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    # fsync off: a test run does not need to survive a power cut, and fsync on a
    # loaded CI disk makes every write slow.
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"), fsync=False)
    server.start(timeout=60)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: LocalZooKeeper) -> str:
    """A connect string with a chroot of the test's own (KafkaZkClient creates it)."""
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_clients(zk_connect: str) -> Iterator[Callable[..., KafkaZkClient]]:
    """Factory of connected clients on the test's chroot; all closed at teardown."""
    clients: list[KafkaZkClient] = []

    def connect(session_timeout_ms: int = 6000) -> KafkaZkClient:
        client = KafkaZkClient.connect(zk_connect, session_timeout_ms=session_timeout_ms, timeout=30)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture
def zk_client(zk_clients: Callable[..., KafkaZkClient]) -> KafkaZkClient:
    """A connected client whose chroot has Kafka's persistent paths."""
    client = zk_clients()
    client.ensure_persistent_paths()
    return client


@pytest.fixture
def expire_session(zookeeper: LocalZooKeeper) -> Callable[[KafkaZkClient], None]:
    """Expire a client's session from the server side, as a long partition would.

    A second connection takes over the session with its id and password, then
    closes it: the server ends the session and the original client learns it
    has expired when it reconnects.
    """

    def expire(client: KafkaZkClient) -> None:
        client_id = client.client_id
        assert client_id is not None, "client is not connected"
        intruder = KazooClient(hosts=zookeeper.connect_string, client_id=client_id)
        intruder.start(timeout=30)
        intruder.stop()
        intruder.close()

    return expire


@pytest.fixture
def wait_until() -> WaitUntil:
    """wait_until(condition, timeout=30, message=...): poll until true; fail at the deadline."""

    def wait(condition: Callable[[], object], timeout: float = 30.0, message: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout}s waiting for {message or condition}")
            time.sleep(0.01)

    return wait
