"""Faults on a docker-compose cluster (docker-compose.yml): the containers of one compose project, by service name.

What the nemesis needs from a compose backend, through the `docker` command line
(Docker, or Podman serving the Docker API): SIGKILL / SIGTERM a service's
container, pause and unpause it (the cgroup freezer: SIGSTOP without the
process noticing), start it again on its volumes, and cut it off the project's
network and back (reconnected under its service name, so the others' DNS finds
it again). Containers are found by the labels docker-compose puts on them, so no
compose file or working directory is needed.

The argv builders are pure (unit-tested); ComposeServices runs them.
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"

Run = Callable[[Sequence[str]], str]


class ComposeError(Exception):
    """A docker command failed, or a service has no single container; the message says which."""


def default_network(project: str) -> str:
    """The network docker-compose creates for a project's services."""
    return f"{project}_default"


def find_argv(project: str, service: str) -> list[str]:
    """The id of the service's container, running or not."""
    return ["docker", "ps", "--all", "--quiet", "--filter", f"label={PROJECT_LABEL}={project}",
            "--filter", f"label={SERVICE_LABEL}={service}"]


def kill_argv(container: str, signum: int = signal.SIGKILL) -> list[str]:
    return ["docker", "kill", "--signal", signal.Signals(signum).name, container]


def pause_argv(container: str) -> list[str]:
    return ["docker", "pause", container]


def unpause_argv(container: str) -> list[str]:
    return ["docker", "unpause", container]


def start_argv(container: str) -> list[str]:
    return ["docker", "start", container]


def restart_argv(container: str, timeout_s: int = 10) -> list[str]:
    """docker stop (SIGTERM, SIGKILL after timeout_s) then start."""
    return ["docker", "restart", "--time", str(timeout_s), container]


# Docker says Running for a paused container, Podman's Docker API does not: both flags are read.
STATE_FORMAT = "{{.State.Running}} {{.State.Paused}} {{.State.StartedAt}}"


@dataclass(frozen=True)
class ContainerState:
    running: bool
    paused: bool
    started_at: str  # changes with every start: tells a restarted container from one still stopping

    @property
    def alive(self) -> bool:
        """Its process exists (maybe frozen)."""
        return self.running or self.paused


def pid_argv(container: str) -> list[str]:
    """The host pid of the container's first process (0 when it is not running)."""
    return ["docker", "inspect", "--format", "{{.State.Pid}}", container]


def state_argv(container: str) -> list[str]:
    return ["docker", "inspect", "--format", STATE_FORMAT, container]


def parse_state(text: str) -> ContainerState:
    running, paused, started_at = text.split(maxsplit=2)
    return ContainerState(running == "true", paused == "true", started_at.strip())


def services_argv(project: str) -> list[str]:
    """The service name of each of the project's containers."""
    return ["docker", "ps", "--all", "--filter", f"label={PROJECT_LABEL}={project}",
            "--format", f'{{{{.Label "{SERVICE_LABEL}"}}}}']


def port_argv(container: str) -> list[str]:
    return ["docker", "port", container]


def parse_ports(text: str) -> dict[int, int]:
    """{container port: host port} from `docker port` ("9092/tcp -> 0.0.0.0:41234", one per address family)."""
    ports = {}
    for line in text.splitlines():
        inside, arrow, host = line.partition(" -> ")
        if arrow and inside.endswith("/tcp"):
            ports[int(inside.removesuffix("/tcp"))] = int(host.rpartition(":")[2])
    return ports


def exec_argv(container: str, command: Sequence[str]) -> list[str]:
    return ["docker", "exec", container, *command]


def default_project(directory: Path, env: Mapping[str, str]) -> str:
    """The project name docker-compose gives a compose file in `directory`: COMPOSE_PROJECT_NAME, else the
    directory's name lower-cased, without characters a project name cannot have."""
    return env.get("COMPOSE_PROJECT_NAME") or re.sub(r"[^-_a-z0-9]", "", directory.name.lower())


def disconnect_argv(network: str, container: str) -> list[str]:
    return ["docker", "network", "disconnect", network, container]


def connect_argv(network: str, container: str, alias: str, ip: str | None = None) -> list[str]:
    return ["docker", "network", "connect", "--alias", alias, *(["--ip", ip] if ip else []), network, container]


def address_argv(network: str, container: str) -> list[str]:
    return ["docker", "inspect", "--format", f'{{{{(index .NetworkSettings.Networks "{network}").IPAddress}}}}',
            container]


def _run(argv: Sequence[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        raise ComposeError(f"`{' '.join(argv)}` did not finish in 120 s") from None
    if result.returncode != 0:
        raise ComposeError(f"`{' '.join(argv)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


class ComposeServices:
    """The services of one compose project, addressed by service name ("broker-2", "controller-1001")."""

    def __init__(self, project: str, run: Run = _run) -> None:
        self.project = project
        self.network = default_network(project)
        self._run = run

    def container(self, service: str) -> str:
        ids = self._run(find_argv(self.project, service)).split()
        if len(ids) != 1:
            raise ComposeError(f"compose project {self.project} has {len(ids)} containers for service {service}")
        return ids[0]

    def services(self) -> list[str]:
        """The project's services that have a container, running or not."""
        return sorted(set(self._run(services_argv(self.project)).split()))

    def state(self, service: str) -> ContainerState:
        return parse_state(self._run(state_argv(self.container(service))))

    def running(self, service: str) -> bool:
        return self.state(service).running

    def pid(self, service: str) -> int:
        """The host pid of its container's process (0: not running)."""
        return int(self._run(pid_argv(self.container(service))).strip() or 0)

    def published_ports(self, service: str) -> dict[int, int]:
        """{container port: host port}."""
        return parse_ports(self._run(port_argv(self.container(service))))

    def succeeds(self, service: str, command: Sequence[str]) -> bool:
        """Whether `command` run in the service's container exits 0."""
        try:
            self._run(exec_argv(self.container(service), command))
        except ComposeError:
            return False
        return True

    def kill(self, service: str, signum: int = signal.SIGKILL) -> None:
        self._run(kill_argv(self.container(service), signum))

    def pause(self, service: str) -> None:
        self._run(pause_argv(self.container(service)))

    def unpause(self, service: str) -> None:
        self._run(unpause_argv(self.container(service)))

    def start(self, service: str) -> None:
        self._run(start_argv(self.container(service)))

    def restart(self, service: str, timeout_s: int = 10) -> None:
        self._run(restart_argv(self.container(service), timeout_s))

    def disconnect(self, service: str) -> None:
        """Off the project network: no peer, no ZooKeeper; published ports stay (clients on the host)."""
        self._run(disconnect_argv(self.network, self.container(service)))

    def address(self, service: str) -> str:
        """Its IP address on the project network."""
        return self._run(address_argv(self.network, self.container(service))).strip()

    def connect(self, service: str, ip: str | None = None) -> None:
        """Back on the project network, under its service name; at `ip` if given (by default the engine picks)."""
        self._run(connect_argv(self.network, self.container(service), service, ip))
