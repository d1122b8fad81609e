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

import signal
import subprocess
from collections.abc import Callable, Sequence

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


def running_argv(container: str) -> list[str]:
    return ["docker", "inspect", "--format", "{{.State.Running}}", container]


def disconnect_argv(network: str, container: str) -> list[str]:
    return ["docker", "network", "disconnect", network, container]


def connect_argv(network: str, container: str, alias: str) -> list[str]:
    return ["docker", "network", "connect", "--alias", alias, network, container]


def _run(argv: Sequence[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
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

    def running(self, service: str) -> bool:
        return self._run(running_argv(self.container(service))).strip() == "true"

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

    def connect(self, service: str) -> None:
        self._run(connect_argv(self.network, self.container(service), service))
