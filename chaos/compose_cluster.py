"""The ChaosCluster backend for a docker-compose cluster (docker-compose.yml): `minibroker chaos run --compose`.

Processes are the project's services ("broker-2", "controller-1001", as a local cluster names
them), acted on through chaos/compose.py:

    kill(SIGKILL|SIGTERM)  docker kill --signal (tini, the containers' init, passes it on)
    start                  docker start (unless the engine's restart policy did it already), then
                           waits until the container's own healthcheck command passes
    pause / resume         docker pause / unpause (the cgroup freezer)
    isolate / heal         docker network disconnect / connect from the project's network, back at the
                           address it had: a healed partition, not a new host (peers' connections to
                           the old address would otherwise hang until they time out)
    cut_zookeeper          iptables in the container's network namespace (nsenter on its host pid, as
                           root) drops its packets to and from ZooKeeper's port: the process is alone
                           there (chaos/zk_cut.py's cut_namespace)

A disconnect takes the container's only network away: no peer, no ZooKeeper, and no
published port either (the engine forwards host ports through that network), so
`keep_clients` cannot be honoured here; clients on the host see the broker's
connections fail, as they would in a partition that cuts them too. Clients connect to
the brokers' published host listeners (GRPC_HOST for minibroker's client, PLAINTEXT_HOST for
Kafka clients: found by their container ports), and ZooKeeper is read on its
published ports (ZOOKEEPER_<i>_HOST_PORT in docker-compose.yml: each server's mode is
asked there too). The log dirs live in volumes, not on this machine: data_dir is None and the audit runs in the compose
`audit` service instead (`docker-compose run --rm audit`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from chaos import zk_cut
from chaos.cluster import ChaosError, ClusterView, ZooKeeperState, node_id
from chaos.compose import ComposeError, ComposeServices
from zk.client import ZOOKEEPER_PORT

# "zookeeper" (one server) or "zookeeper-1", "zookeeper-2", ... (an ensemble)
ZOOKEEPER_SERVICE = "zookeeper"
# The brokers' listeners for clients on the host, by the container port docker-compose.yml publishes.
KAFKA_HOST_LISTENER_PORT = 9092  # PLAINTEXT_HOST
GRPC_HOST_LISTENER_PORT = 9192  # GRPC_HOST
_PAUSE_ATTEMPTS = 10
T = TypeVar("T")


def health_command(name: str) -> list[str]:
    """The service's healthcheck in docker-compose.yml: registered and serving."""
    role = "broker" if name.startswith("broker-") else "zookeeper" if is_zookeeper(name) else "controller"
    return ["python", "-m", "minibroker.container", "health", role]


def is_zookeeper(service: str) -> bool:
    return service == ZOOKEEPER_SERVICE or service.startswith(f"{ZOOKEEPER_SERVICE}-")


def host_address(services: ComposeServices, service: str, container_port: int) -> str:
    """localhost:<the host port the service publishes `container_port` on>."""
    ports = services.published_ports(service)
    if container_port not in ports:
        raise ChaosError(f"service {service} of compose project {services.project} publishes"
                         f" {sorted(ports) or 'no port'}, not port {container_port} on the host:"
                         " see docker-compose.yml")
    return f"localhost:{ports[container_port]}"


class ComposeChaosCluster(ClusterView):
    def __init__(self, services: ComposeServices, zookeeper: Callable[[str, str], ZooKeeperState] = ZooKeeperState,
                 start_timeout: float = 90.0, stop_grace: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._services = services
        self._start_timeout = start_timeout
        self._stop_grace = stop_grace
        self._clock = clock
        self._sleep = sleep
        up = f"is it up (`docker-compose --project-name {services.project} up -d`)?"
        try:
            names = services.services()
            self._brokers = sorted((n for n in names if n.startswith("broker-")), key=node_id)
            self._controllers = sorted((n for n in names if n.startswith("controller-")), key=node_id)
            zookeepers = sorted((n for n in names if is_zookeeper(n)), key=lambda n: n.rpartition("-")[2])
            if not self._brokers or not self._controllers or not zookeepers:
                raise ChaosError(f"compose project {services.project} has services {names or 'none'}, not"
                                 f" {ZOOKEEPER_SERVICE}, controller-* and broker-*: {up}")
            self._bootstrap = ",".join(host_address(services, b, GRPC_HOST_LISTENER_PORT) for b in self._brokers)
            self._kafka_bootstrap = ",".join(host_address(services, b, KAFKA_HOST_LISTENER_PORT)
                                             for b in self._brokers)
            self._zookeepers = {n: host_address(services, n, ZOOKEEPER_PORT) for n in zookeepers}
        except ComposeError as e:
            raise ChaosError(f"{e}: {up}") from None
        self._zk = zookeeper(",".join(self._zookeepers.values()), up)
        self._cut: dict[str, str] = {}  # service: its address before the cut
        self._zookeeper_cuts = {}
        # SIGTERMed services, by the start time of the container then stopping.
        self._stopping: dict[str, str] = {}

    @property
    def data_dir(self) -> Path | None:
        return None

    def running(self, name: str) -> bool:
        return self._docker(lambda: self._services.state(name).alive)

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        if signum == signal.SIGTERM:
            self._stopping[name] = self._docker(lambda: self._services.state(name).started_at)
        self._docker(lambda: self._services.kill(name, signum))

    def start(self, name: str) -> None:
        self._docker(lambda: self._stopped(name))
        deadline = self._clock() + self._start_timeout
        error = "it never passed its healthcheck"
        while True:
            try:
                if not self._services.state(name).alive:
                    self._services.start(name)
                elif self._services.succeeds(name, health_command(name)):
                    return
            except ComposeError as e:  # the engine restarting it meanwhile: try again
                error = str(e)
            if self._clock() > deadline:
                raise ChaosError(f"cannot start {name} again in {self._start_timeout:.0f} s: {error}")
            self._sleep(1.0)

    def _stopped(self, name: str) -> None:
        """A SIGTERMed process hands its leaderships off before it exits: wait for that, SIGKILL after a grace."""
        started_at = self._stopping.pop(name, None)
        if started_at is None:
            return
        grace_ends = self._clock() + self._stop_grace

        def stopping() -> bool:
            state = self._services.state(name)
            return state.alive and state.started_at == started_at

        while stopping():
            if self._clock() > grace_ends:
                self._services.kill(name, signal.SIGKILL)
                return
            self._sleep(0.5)

    def pause(self, name: str) -> None:
        for attempt in range(1, _PAUSE_ATTEMPTS + 1):
            try:
                self._services.pause(name)
                return
            except ComposeError as e:
                # The cgroup freezer gives up on a task it cannot stop at once (a ZooKeeper server in an fsync on
                # a busy disk: `runc pause` fails with "exit status 1"); a moment later it freezes.
                if attempt == _PAUSE_ATTEMPTS:
                    raise ChaosError(f"{e} ({attempt} attempts)") from None
                self._sleep(1.0)

    def resume(self, name: str) -> None:
        if self._docker(lambda: self._services.state(name).paused):
            self._docker(lambda: self._services.unpause(name))

    def isolate(self, name: str, keep_clients: bool) -> None:
        address = self._docker(lambda: self._services.address(name))
        self._docker(lambda: self._services.disconnect(name))
        self._cut[name] = address

    def cut_zookeeper(self, name: str) -> None:
        pid = self._docker(lambda: self._services.pid(name))
        if not pid or not Path(f"/proc/{pid}/ns/net").exists():
            raise ChaosError(f"the process of {name}'s container (pid {pid}) is not visible from here: expire-session"
                             " needs the engine on this machine, and root")
        self._cut_zookeeper(name, lambda: zk_cut.cut_namespace(pid, [ZOOKEEPER_PORT]))

    def heal(self) -> None:
        self._restore_zookeeper_cuts()
        for name, address in sorted(self._cut.items()):
            try:
                self._services.connect(name, address or None)
            except ComposeError as e:
                raise ChaosError(str(e)) from None
            del self._cut[name]

    def supports(self, fault: str) -> str | None:
        return zk_cut.unsupported() if fault == "expire-session" else None

    def close(self) -> None:
        self._zk.close()

    @staticmethod
    def _docker(action: Callable[[], T]) -> T:
        try:
            return action()
        except ComposeError as e:
            raise ChaosError(str(e)) from None
