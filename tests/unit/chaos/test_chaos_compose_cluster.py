"""chaos/compose_cluster.py on a fake `docker` (an engine's containers as plain state) and a fake clock: which
docker commands each fault runs, how `start` waits for a stopping container and for health, and the errors."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from chaos.cluster import ChaosError
from chaos.compose import ComposeError, ComposeServices
from chaos.compose_cluster import ComposeChaosCluster
from tests.fakes import FakeClock

# {container port: host port}: each broker's Kafka (9092) and gRPC (9192) host listeners, as docker-compose.yml.
HOST_PORTS = {"broker-1": {9092: 40001, 9192: 40101}, "broker-2": {9092: 40002, 9192: 40102},
              "broker-3": {9092: 40003, 9192: 40103}, "zookeeper": {2181: 40181},
              **{f"zookeeper-{i}": {2181: 40180 + i} for i in (1, 2, 3)}}


@dataclass
class Container:
    running: bool = True
    paused: bool = False
    starts: int = 1
    # How many more `docker inspect`s a SIGTERMed container stays up (its controlled shutdown).
    stopping_for: int = 0
    # How many health checks fail after a start before one passes.
    unhealthy_for: int = 0


class FakeEngine:
    def __init__(self, services: Sequence[str] = ("broker-1", "broker-2", "broker-3", "controller-1001",
                                                  "controller-1002", "zookeeper")) -> None:
        self.containers = {name: Container() for name in services}
        self.calls: list[list[str]] = []
        self.sigterm_takes = 0
        self.unhealthy_after_start = 0
        self.pause_failures = 0  # `docker pause`s that fail (the freezer could not stop a task) before one works

    def acts(self) -> list[list[str]]:
        """The calls that change something (not ps / inspect / port / exec)."""
        return [c for c in self.calls if c[1] not in ("ps", "inspect", "port", "exec")]

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        command, rest = argv[1], list(argv[2:])
        if command == "ps":
            if "--format" in rest:
                return "".join(f"{name}\n" for name in self.containers)
            service = rest[-1].rpartition("=")[2]
            return f"id-{service}\n" if service in self.containers else ""
        c = self.containers.get(rest[-1].removeprefix("id-")) if command != "exec" else self.containers[rest[0][3:]]
        assert c is not None, argv
        if command == "inspect" and "NetworkSettings" in rest[1]:
            return "10.89.0.4\n"
        if command == "inspect":
            if c.stopping_for > 0:
                c.stopping_for -= 1
                c.running = c.stopping_for > 0
            return f"{str(c.running).lower()} {str(c.paused).lower()} 2026-11-22T09:00:0{c.starts}Z\n"
        if command == "port":
            ports = HOST_PORTS[rest[-1].removeprefix("id-")]
            return "".join(f"{inside}/tcp -> 0.0.0.0:{host}\n{inside}/tcp -> [::]:{host}\n"
                           for inside, host in ports.items())
        if command == "kill":
            if rest[1] == "SIGTERM":
                c.stopping_for = self.sigterm_takes
                c.running = c.stopping_for > 0
            else:
                c.running, c.stopping_for = False, 0
        elif command == "start":
            c.running, c.starts, c.unhealthy_for = True, c.starts + 1, self.unhealthy_after_start
        elif command == "pause" and self.pause_failures > 0:
            self.pause_failures -= 1
            raise ComposeError("`/usr/bin/runc pause ...` failed: exit status 1")
        elif command == "pause":
            c.running, c.paused = False, True  # as Podman's Docker API reports a paused container
        elif command == "unpause":
            c.running, c.paused = True, False
        elif command == "exec" and (not c.running or c.unhealthy_for > 0):
            c.unhealthy_for -= 1
            raise ComposeError("unhealthy")
        return ""


class FakeZooKeeper:
    def __init__(self, connect: str, hint: str) -> None:
        self.connect = connect
        self.closed = False

    def active_controller(self) -> str | None:
        return "controller-1002"

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        return {0: (2, (2, 3, 1), (2, 3, 1))}

    def close(self) -> None:
        self.closed = True



def _cluster(engine: FakeEngine, clock: FakeClock | None = None) -> ComposeChaosCluster:
    clock = clock or FakeClock(0.0)
    return ComposeChaosCluster(ComposeServices("mb", run=engine), zookeeper=FakeZooKeeper, start_timeout=60,
                               stop_grace=10, clock=clock, sleep=clock.sleep)


def test_names_addresses_and_state_come_from_the_project() -> None:
    cluster = _cluster(FakeEngine())
    assert cluster.brokers == ["broker-1", "broker-2", "broker-3"]
    assert cluster.controllers == ["controller-1001", "controller-1002"]
    assert cluster.bootstrap_servers == "localhost:40101,localhost:40102,localhost:40103"
    assert cluster.kafka_bootstrap_servers == "localhost:40001,localhost:40002,localhost:40003"
    assert cluster._zk.connect == "localhost:40181"  # type: ignore[attr-defined]
    assert cluster.data_dir is None
    assert cluster.active_controller() == "controller-1002"
    assert cluster.partition_state("chaos") == {0: (2, (2, 3, 1), (2, 3, 1))}
    assert all(cluster.supports(f) is None for f in ("kill-leader", "pause-leader", "partition-leader", "bounce"))


def test_an_ensembles_servers_are_found_and_started_on_their_own_healthcheck() -> None:
    engine = FakeEngine(("broker-1", "controller-1001", "zookeeper-2", "zookeeper-1", "zookeeper-3"))
    cluster = _cluster(engine)
    assert cluster.zookeepers == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    assert cluster._zk.connect == "localhost:40181,localhost:40182,localhost:40183"  # type: ignore[attr-defined]
    cluster.kill("zookeeper-2")
    cluster.start("zookeeper-2")
    assert engine.acts() == [["docker", "kill", "--signal", "SIGKILL", "id-zookeeper-2"],
                             ["docker", "start", "id-zookeeper-2"]]
    assert ["docker", "exec", "id-zookeeper-2", "python", "-m", "minibroker.container", "health",
            "zookeeper"] in engine.calls


def test_a_project_that_is_not_up_is_refused() -> None:
    with pytest.raises(ChaosError, match=r"compose project mb has services none.*docker-compose --project-name mb up"):
        _cluster(FakeEngine(services=()))
    with pytest.raises(ChaosError, match="not zookeeper, controller-\\* and broker-\\*"):
        _cluster(FakeEngine(services=("broker-1", "zookeeper")))


def test_a_broker_without_its_grpc_host_port_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HOST_PORTS, "broker-2", {9093: 40002})  # the pre-issue-13 file: one port, no 9192
    with pytest.raises(ChaosError, match=r"broker-2 of compose project mb publishes \[9093\], not port 9192"):
        _cluster(FakeEngine())


def test_kill_then_start_waits_for_health() -> None:
    engine = FakeEngine()
    engine.unhealthy_after_start = 3
    cluster = _cluster(engine)
    cluster.kill("broker-2", signal.SIGKILL)
    assert not cluster.running("broker-2")
    cluster.start("broker-2")
    assert engine.acts() == [["docker", "kill", "--signal", "SIGKILL", "id-broker-2"],
                             ["docker", "start", "id-broker-2"]]
    health = [c for c in engine.calls if c[1] == "exec"]
    assert len(health) == 4 and health[-1][2:] == ["id-broker-2", "python", "-m", "minibroker.container", "health",
                                                   "broker"]


def test_start_leaves_a_container_the_engine_restarted_alone() -> None:
    engine = FakeEngine()
    cluster = _cluster(engine)
    cluster.kill("controller-1001", signal.SIGKILL)
    engine.containers["controller-1001"].running = True  # restart: on-failure
    cluster.start("controller-1001")
    assert engine.acts() == [["docker", "kill", "--signal", "SIGKILL", "id-controller-1001"]]
    assert [c for c in engine.calls if c[1] == "exec"][-1][-1] == "controller"


def test_a_sigterm_gets_its_grace_then_the_container_starts_again() -> None:
    engine = FakeEngine()
    engine.sigterm_takes = 4
    cluster = _cluster(engine)
    cluster.kill("broker-1", signal.SIGTERM)
    cluster.start("broker-1")
    # It stopped by itself within the grace: no SIGKILL, one start.
    assert engine.acts() == [["docker", "kill", "--signal", "SIGTERM", "id-broker-1"],
                             ["docker", "start", "id-broker-1"]]


def test_a_sigterm_that_does_not_stop_it_is_followed_by_a_sigkill() -> None:
    engine = FakeEngine()
    engine.sigterm_takes = 1000
    clock = FakeClock(0.0)
    cluster = _cluster(engine, clock)
    cluster.kill("broker-1", signal.SIGTERM)
    cluster.start("broker-1")
    assert engine.acts() == [["docker", "kill", "--signal", "SIGTERM", "id-broker-1"],
                             ["docker", "kill", "--signal", "SIGKILL", "id-broker-1"],
                             ["docker", "start", "id-broker-1"]]
    assert 10 <= clock.now < 12


def test_start_gives_up_at_its_deadline() -> None:
    engine = FakeEngine()
    engine.unhealthy_after_start = 10_000
    cluster = _cluster(engine)
    cluster.kill("broker-3")
    with pytest.raises(ChaosError, match="cannot start broker-3 again in 60 s: it never passed its healthcheck"):
        cluster.start("broker-3")


def test_pause_resume_and_paused_counts_as_running() -> None:
    engine = FakeEngine()
    cluster = _cluster(engine)
    cluster.resume("broker-1")  # not paused: nothing to do (the nemesis resumes every running process at the end)
    cluster.pause("broker-1")
    assert cluster.running("broker-1")
    cluster.resume("broker-1")
    assert engine.acts() == [["docker", "pause", "id-broker-1"], ["docker", "unpause", "id-broker-1"]]


def test_a_pause_the_freezer_refuses_is_tried_again() -> None:
    engine = FakeEngine(("broker-1", "controller-1001", "zookeeper-1"))
    clock = FakeClock(0.0)
    cluster = _cluster(engine, clock)
    engine.pause_failures = 2
    cluster.pause("zookeeper-1")
    assert engine.acts() == [["docker", "pause", "id-zookeeper-1"]] * 3 and clock.sleeps == [1.0, 1.0]
    engine.pause_failures = 10
    with pytest.raises(ChaosError, match=r"runc pause .*exit status 1 \(10 attempts\)"):
        cluster.pause("broker-1")


def test_isolate_disconnects_and_heal_reconnects_under_the_service_name_and_address() -> None:
    engine = FakeEngine()
    cluster = _cluster(engine)
    cluster.heal()
    cluster.isolate("broker-3", keep_clients=True)
    cluster.heal()
    cluster.heal()
    assert engine.acts() == [["docker", "network", "disconnect", "mb_default", "id-broker-3"],
                             ["docker", "network", "connect", "--alias", "broker-3", "--ip", "10.89.0.4", "mb_default",
                              "id-broker-3"]]


def test_close_closes_zookeeper() -> None:
    cluster = _cluster(FakeEngine())
    cluster.close()
    assert cluster._zk.closed  # type: ignore[attr-defined]
