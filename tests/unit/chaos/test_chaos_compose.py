"""chaos/compose.py: the docker command lines a compose fault runs, and how ComposeServices strings them."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

from chaos.compose import (
    ComposeError,
    ComposeServices,
    ContainerState,
    address_argv,
    connect_argv,
    default_project,
    disconnect_argv,
    find_argv,
    kill_argv,
    parse_ports,
    parse_state,
    restart_argv,
    services_argv,
)


def test_argv() -> None:
    assert find_argv("mb", "broker-2") == [
        "docker", "ps", "--all", "--quiet", "--filter", "label=com.docker.compose.project=mb",
        "--filter", "label=com.docker.compose.service=broker-2",
    ]
    assert kill_argv("c1") == ["docker", "kill", "--signal", "SIGKILL", "c1"]
    assert kill_argv("c1", signal.SIGTERM) == ["docker", "kill", "--signal", "SIGTERM", "c1"]
    assert restart_argv("c1", 3) == ["docker", "restart", "--time", "3", "c1"]
    assert disconnect_argv("mb_default", "c1") == ["docker", "network", "disconnect", "mb_default", "c1"]
    assert connect_argv("mb_default", "c1", "broker-2") == [
        "docker", "network", "connect", "--alias", "broker-2", "mb_default", "c1",
    ]

    assert connect_argv("mb_default", "c1", "broker-2", "10.89.0.4") == [
        "docker", "network", "connect", "--alias", "broker-2", "--ip", "10.89.0.4", "mb_default", "c1",
    ]
    assert address_argv("mb_default", "c1") == [
        "docker", "inspect", "--format", '{{(index .NetworkSettings.Networks "mb_default").IPAddress}}', "c1",
    ]
    assert services_argv("mb") == ["docker", "ps", "--all", "--filter", "label=com.docker.compose.project=mb",
                                   "--format", '{{.Label "com.docker.compose.service"}}']


def test_parse_what_docker_prints() -> None:
    assert parse_state("true false 2026-11-22T09:00:00.1Z\n") == ContainerState(True, False, "2026-11-22T09:00:00.1Z")
    assert parse_state("false true 2026-11-22T09:00:00Z").alive  # paused, as Podman reports it
    assert not parse_state("false false 0001-01-01T00:00:00Z").alive
    assert parse_ports("9092/tcp -> 0.0.0.0:41234\n9092/tcp -> [::]:41234\n2181/udp -> 0.0.0.0:5\n") == {9092: 41234}
    assert parse_ports("9092/tcp -> :41921\n") == {9092: 41921}  # Podman, published on every address
    assert parse_ports("") == {}


def test_default_project_is_named_as_docker_compose_names_it() -> None:
    assert default_project(Path("/src/Mini.Broker_2"), {}) == "minibroker_2"
    assert default_project(Path("/src/minibroker"), {"COMPOSE_PROJECT_NAME": "mb"}) == "mb"


class FakeDocker:
    def __init__(self, containers: str = "abc123\n") -> None:
        self.containers = containers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        return self.containers if argv[1] == "ps" else "true false 2026-11-22T09:00:00Z\n"


def test_services_find_their_container_then_act_on_it() -> None:
    docker = FakeDocker()
    services = ComposeServices("mb", run=docker)
    services.kill("broker-2")
    services.disconnect("broker-2")
    services.connect("broker-2")
    assert services.running("broker-2")
    assert [call for call in docker.calls if call[1] != "ps"] == [
        ["docker", "kill", "--signal", "SIGKILL", "abc123"],
        ["docker", "network", "disconnect", "mb_default", "abc123"],
        ["docker", "network", "connect", "--alias", "broker-2", "mb_default", "abc123"],
        ["docker", "inspect", "--format", "{{.State.Running}} {{.State.Paused}} {{.State.StartedAt}}", "abc123"],
    ]


@pytest.mark.parametrize("found", ["", "a\nb\n"])
def test_a_service_needs_exactly_one_container(found: str) -> None:
    with pytest.raises(ComposeError, match="containers for service broker-9"):
        ComposeServices("mb", run=FakeDocker(found)).pause("broker-9")
