"""chaos/compose.py: the docker command lines a compose fault runs, and how ComposeServices strings them."""

from __future__ import annotations

import signal
from collections.abc import Sequence

import pytest

from chaos.compose import (
    ComposeError,
    ComposeServices,
    connect_argv,
    disconnect_argv,
    find_argv,
    kill_argv,
    restart_argv,
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


class FakeDocker:
    def __init__(self, containers: str = "abc123\n") -> None:
        self.containers = containers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        return self.containers if argv[1] == "ps" else "true\n"


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
        ["docker", "inspect", "--format", "{{.State.Running}}", "abc123"],
    ]


@pytest.mark.parametrize("found", ["", "a\nb\n"])
def test_a_service_needs_exactly_one_container(found: str) -> None:
    with pytest.raises(ComposeError, match="containers for service broker-9"):
        ComposeServices("mb", run=FakeDocker(found)).pause("broker-9")
