"""A docker-compose cluster for the system tests: the image built, `docker-compose up` of the given files on free
host ports, every service healthy, and `down -v` at the end; without a container engine, a loud skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from chaos.compose import PROJECT_LABEL, ComposeServices
from client import Admin
from client.admin import PartitionInfo
from zk.server import free_port

REPO = Path(__file__).resolve().parents[2]
IMAGE = "minibroker:system-test"
BROKERS = {1: "broker-1", 2: "broker-2", 3: "broker-3"}
# Every long-running service, and the role its health check takes (minibroker/container.py).
ZOOKEEPERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")
SERVICES = {**{service: "zookeeper" for service in ZOOKEEPERS}, "controller-1001": "controller",
            "controller-1002": "controller", **{service: "broker" for service in BROKERS.values()}}
HEALTHY_TIMEOUT_S = 240.0


def log(message: str) -> None:
    print(f"compose system test: {message}", file=sys.stderr, flush=True)


def until(condition: Callable[[], bool], timeout: float, interval: float = 1.0) -> float | None:
    """Seconds it took until `condition`, or None at the deadline."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            return None
        time.sleep(interval)
    return time.monotonic() - began


def wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    took = until(condition, timeout)
    if took is None:
        pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
    return took


@dataclass
class ComposeCluster:
    project: str
    files: tuple[str, ...]
    env: dict[str, str]
    host_ports: dict[int, int]  # broker id: the host port of its gRPC listener (GRPC_HOST)
    kafka_host_ports: dict[int, int]  # broker id: the host port of its Kafka listener (PLAINTEXT_HOST)
    zookeeper_host_ports: tuple[int, ...]
    services: ComposeServices

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.host_ports.values())

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.kafka_host_ports.values())

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        files = [argument for name in self.files for argument in ("--file", name)]
        return subprocess.run(["docker-compose", *files, "--project-name", self.project, *args], cwd=REPO,
                              env=self.env, capture_output=True, text=True, timeout=timeout, check=False)

    def healthy(self, service: str) -> bool:
        try:
            container = self.services.container(service)
        except Exception:
            return False
        check = subprocess.run(["docker", "exec", container, "python", "-m", "minibroker.container", "health",
                                SERVICES[service]], capture_output=True, timeout=60, check=False)
        return check.returncode == 0

    def partitions(self, topic: str,
                   channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel) -> list[PartitionInfo]:
        with Admin(bootstrap_servers=self.bootstrap, channel_factory=channel_factory) as admin:
            [described] = admin.describe_topics([topic])
        return list(described.partitions)

    def leftovers(self) -> dict[str, list[str]]:
        """What of the project is still there, by kind."""
        label = f"label={PROJECT_LABEL}={self.project}"
        listings = {
            "containers": ["docker", "ps", "--all", "--quiet", "--filter", label],
            "volumes": ["docker", "volume", "ls", "--quiet", "--filter", label],
            "networks": ["docker", "network", "ls", "--quiet", "--filter", label],
        }
        return {kind: subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
                for kind, argv in listings.items()}


def _no_engine_reason() -> str | None:
    for command in ("docker", "docker-compose"):
        if shutil.which(command) is None:
            return f"no `{command}` command"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer in 30 s"
    if info.returncode != 0:
        return f"no container engine answers `docker info` (DOCKER_HOST={os.environ.get('DOCKER_HOST')}): " + (
            info.stderr.strip().splitlines() or ["?"])[-1]
    return None


def compose_cluster(files: Sequence[str], project: str) -> Iterator[ComposeCluster]:
    """A module fixture's body: the cluster of `files` up and healthy, taken down (volumes too) afterwards."""
    reason = _no_engine_reason()
    if reason is not None:
        log("!" * 60)
        log(f"SKIPPED: no container runtime: {reason}")
        log("run scripts/compose_system_test.sh, which starts one where it can")
        log("!" * 60)
        pytest.skip(f"COMPOSE SYSTEM TEST NOT RUN, no container runtime: {reason}"
                    " (scripts/compose_system_test.sh prepares one where it can)")
    ports = {broker_id: free_port() for broker_id in BROKERS}
    kafka_ports = {broker_id: free_port() for broker_id in BROKERS}
    zookeeper_ports = tuple(free_port() for _ in ZOOKEEPERS)
    env = {**os.environ, "MINIBROKER_IMAGE": IMAGE, "DOCKER_BUILDKIT": "0",
           **{f"ZOOKEEPER_{i}_HOST_PORT": str(port) for i, port in enumerate(zookeeper_ports, start=1)},
           **{f"BROKER_{broker_id}_GRPC_HOST_PORT": str(port) for broker_id, port in ports.items()},
           **{f"BROKER_{broker_id}_HOST_PORT": str(port) for broker_id, port in kafka_ports.items()}}
    base_image = env.get("BASE_IMAGE", "python:3.11-slim-bookworm")
    began = time.monotonic()
    build = subprocess.run(["docker", "build", "--quiet", "--tag", IMAGE, "--build-arg", f"BASE_IMAGE={base_image}",
                            "."], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert build.returncode == 0, f"docker build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    log(f"image {IMAGE} built FROM {base_image} in {time.monotonic() - began:.1f}s")
    cluster = ComposeCluster(f"{project}{os.getpid()}", tuple(files), env, ports, kafka_ports, zookeeper_ports,
                             ComposeServices(f"{project}{os.getpid()}"))
    try:
        began = time.monotonic()
        up = cluster.compose("up", "--detach", "--no-build")
        assert up.returncode == 0, f"docker-compose up failed:\n{up.stderr[-3000:]}"
        wait(lambda: all(cluster.healthy(s) for s in SERVICES), HEALTHY_TIMEOUT_S, "every service healthy")
        log(f"docker-compose {' + '.join(files)} up to every service healthy: {time.monotonic() - began:.1f}s")
        yield cluster
    finally:
        cluster.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
