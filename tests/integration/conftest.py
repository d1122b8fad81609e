"""Integration fixtures: one real ZooKeeper server per test session, a private chroot per test.

Each test's clients connect under /test-<random>, so tests never see each
other's znodes and need no cleanup between them; the whole server (and its data
directory) goes away at the end of the session.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kazoo.client import KazooClient

from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from zk.client import KafkaZkClient
from zk.server import LocalZooKeeper, free_port

WaitUntil = Callable[..., None]
REPO_ROOT = Path(__file__).resolve().parents[2]
SERVING = health_pb2.HealthCheckResponse.SERVING


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


# --- real processes ---


class LoggedProcess:
    """A child process whose stdout and stderr go to a log file (read it with log())."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        return self.popen.wait(timeout)


StartProcess = Callable[..., LoggedProcess]


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[StartProcess]:
    """start(name, argv): a real process run from the repository root, logging to <tmp_path>/<name>.log;
    every one still running at teardown is SIGKILLed and reaped."""
    started: list[LoggedProcess] = []

    def start(name: str, argv: Sequence[str]) -> LoggedProcess:
        log_path = tmp_path / f"{name}.log"
        with log_path.open("wb") as log_file:
            popen = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        process = LoggedProcess(name, popen, log_path)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.popen.poll() is None:
            process.popen.kill()
        process.popen.wait(30)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A `cluster up` data dir; whatever cluster runs from it at the end is SIGKILLed (and its network, with
    --netns, removed), even if the test failed."""
    path = tmp_path / "cluster"
    try:
        yield path
    finally:
        if ClusterInfo.exists(path):
            LocalCluster(path).down(kill=True)


# --- brokers ---

CLUSTER_CREDENTIAL = "integration-cluster-secret"
# Short, so a broker restarted after SIGKILL waits little for its old registration to expire.
BROKER_SESSION_TIMEOUT_MS = 3000


def broker_argv(config_path: Path, *extra: str) -> list[str]:
    """The broker command line, as a user types it (`minibroker broker`), run by this interpreter."""
    return [sys.executable, "-m", "minibroker.cli", "broker", "--config", str(config_path), *extra]


@dataclass
class BrokerProcess:
    broker_id: int
    port: int  # the gRPC listener (GRPC)
    log_dir: Path
    config_path: Path
    process: LoggedProcess
    kafka_port: int  # the Kafka-protocol listener (PLAINTEXT)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def kafka_address(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"


def wait_until_serving(address: str, process: LoggedProcess, timeout: float = 30.0) -> None:
    """Until grpc.health.v1 says SERVING; fails at once, with the log, if the process exits first."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            returncode = process.popen.poll()
            if returncode is not None:
                pytest.fail(f"{process.name} exited with {returncode} before serving:\n{process.log()[-4000:]}")
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() >= deadline:
                pytest.fail(f"{process.name} not serving after {timeout}s:\n{process.log()[-4000:]}")
            time.sleep(0.05)


StartBroker = Callable[..., BrokerProcess]


@pytest.fixture
def start_broker(processes: StartProcess, zk_connect: str, tmp_path: Path) -> StartBroker:
    """start_broker(broker_id=1, overrides={...}, wait=True): a real broker process on the test's ZooKeeper
    chroot, on a free port it keeps across restarts, with the cluster credential CLUSTER_CREDENTIAL.
    With wait, returns once it is SERVING."""
    ports: dict[int, int] = {}
    kafka_ports: dict[int, int] = {}
    starts: dict[int, int] = {}

    def start(broker_id: int = 1, overrides: Mapping[str, str] | None = None, *, wait: bool = True) -> BrokerProcess:
        port = ports.setdefault(broker_id, free_port())
        kafka_port = kafka_ports.setdefault(broker_id, free_port())
        log_dir = tmp_path / f"broker-{broker_id}-logs"
        config_path = tmp_path / f"broker-{broker_id}.properties"
        props = {
            "broker.id": str(broker_id),
            "zookeeper.connect": zk_connect,
            "listeners": f"GRPC://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{kafka_port}",
            "log.dirs": str(log_dir),
            "cluster.credential": CLUSTER_CREDENTIAL,
            "zookeeper.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
            **(overrides or {}),
        }
        config_path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
        starts[broker_id] = starts.get(broker_id, 0) + 1
        process = processes(f"broker-{broker_id}-{starts[broker_id]}", broker_argv(config_path))
        broker = BrokerProcess(broker_id, port, log_dir, config_path, process, kafka_port)
        if wait:
            wait_until_serving(broker.address, process)
        return broker

    return start


# --- controllers ---

StartController = Callable[..., LoggedProcess]


@pytest.fixture
def start_controller(processes: StartProcess, zk_connect: str) -> StartController:
    """start_controller(controller_id=1000, overrides={...}): the real controller process on the test's chroot,
    with the brokers' cluster credential and their short session timeout."""

    def start(controller_id: int = 1000, overrides: Mapping[str, str] | None = None) -> LoggedProcess:
        argv = [sys.executable, "-m", "controller.main", "--zookeeper", zk_connect,
                "--controller-id", str(controller_id)]
        settings = {"cluster.credential": CLUSTER_CREDENTIAL,
                    "zookeeper.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS), **(overrides or {})}
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        return processes(f"controller-{controller_id}", argv)

    return start


StartBrokers = Callable[..., dict[int, BrokerProcess]]


@pytest.fixture
def start_brokers(start_broker: StartBroker) -> StartBrokers:
    """start_brokers((1, 2, 3), overrides={...}): several brokers started together, returned once all serve."""

    def start(broker_ids: Sequence[int], overrides: Mapping[str, str] | None = None) -> dict[int, BrokerProcess]:
        brokers = {broker_id: start_broker(broker_id, overrides, wait=False) for broker_id in broker_ids}
        for broker in brokers.values():
            wait_until_serving(broker.address, broker.process)
        return brokers

    return start
