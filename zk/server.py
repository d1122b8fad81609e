"""A real, local ZooKeeper server process, standalone or one member of an ensemble, for `minibroker cluster up`
and for tests.

Runs ZooKeeperServerMain (standalone) or QuorumPeerMain (an ensemble member: `server.N` lines and a `myid`
file) directly with java (what `zkServer.sh start-foreground`
ends up exec'ing, minus the shell, the JMX agent and the system-wide config), so
the child we hold is the JVM itself: its pid is the server's pid, a signal
reaches it, and nothing is left behind. Everything lives in `data_dir`:
zoo.cfg, the snapshots and transaction logs (data/), zookeeper.log, and
zookeeper_server.pid (the name zkServer.sh uses).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

# Debian/Ubuntu's `zookeeper` package: the jar's manifest Class-Path names its
# dependencies, so one jar is the whole server. slf4j-simple makes it log (to
# stderr, i.e. zookeeper.log) instead of printing a NOP-logger warning.
_DEBIAN_JARS = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-simple.jar"))
ZOOKEEPER_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# An ensemble member's `srvr` says one of these once it serves (a standalone server says "standalone").
SERVING_MODES = ("standalone", "leader", "follower", "observer")
# A coordination server for a handful of brokers: small heap, no JIT tier 2 and
# serial GC make the JVM start in about a third of a second.
_JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
PID_FILE = "zookeeper_server.pid"
LOG_FILE = "zookeeper.log"


class ZooKeeperStartError(RuntimeError):
    pass


# Where free_port() looks: below the kernel's ephemeral range, so no port it hands out can meanwhile be given
# by the kernel to an outgoing connection or to another process's bind(("", 0)) (a controller's listener, say)
# before the process it was planned for binds it. A cursor that starts at a random place and moves on keeps
# one process from handing out the same port twice.
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PICKED_PORT = 20000
_cursor: int | None = None


def _picked_ports() -> range:
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768  # Linux's default
    return range(_LOWEST_PICKED_PORT, max(ephemeral_low, _LOWEST_PICKED_PORT + 1000))


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port nothing uses right now, outside the kernel's ephemeral range, that this process has not
    handed out before (another process may still take it before you bind it, but not by chance)."""
    global _cursor
    ports = _picked_ports()
    if _cursor is None:
        _cursor = random.randrange(len(ports))
    for _ in range(len(ports)):
        port = ports[_cursor % len(ports)]
        _cursor += 1
        if port not in avoid and _bindable(host, port):
            return port
    raise OSError(f"no free TCP port on {host} in {ports.start}..{ports.stop - 1}")


def free_ports(count: int, host: str = "127.0.0.1", avoid: Collection[int] = ()) -> list[int]:
    """`count` distinct free ports (see free_port), none of `avoid` (ports planned for something not started
    yet)."""
    return [free_port(host, avoid) for _ in range(count)]


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on host:port (connections lingering in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command ('ruok', 'srvr', 'stat') and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def server_mode(host: str, port: int, timeout: float = 1.0) -> str | None:
    """What `srvr` says of the server at host:port: "standalone", "leader", "follower"; None when it does not
    answer or does not serve (an ensemble member without a quorum answers "This ZooKeeper instance is not
    currently serving requests")."""
    try:
        match = re.search(r"^Mode: (\w+)", four_letter_word(host, port, "srvr", timeout), re.MULTILINE)
    except OSError:
        return None
    return match.group(1) if match else None


def connect_members(connect: str) -> list[str]:
    """zookeeper.connect ("h1:2181,h2:2181/chroot") -> each member's host:port: the chroot is no member's."""
    return [h for h in (h.strip() for h in connect.partition("/")[0].split(",")) if h]


def member_modes(connect: str, timeout: float) -> list[tuple[str, str]]:
    """Each member of `connect` and its `srvr` mode, "none" when it does not serve (down, or without a quorum)."""
    modes = []
    for member in connect_members(connect):
        host, _, port = member.rpartition(":")
        modes.append((member, server_mode(host, int(port), timeout) or "none"))
    return modes


@dataclass(frozen=True)
class QuorumMember:
    """One server of an ensemble, as every member's zoo.cfg lists it (`server.<id>=...`)."""

    id: int
    host: str
    client_port: int
    quorum_port: int  # followers' connections to the leader
    election_port: int  # leader election

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.client_port}"

    def server_line(self) -> str:
        """ZooKeeper 3.5+'s form, with the member's client address after the semicolon."""
        return f"server.{self.id}={self.host}:{self.quorum_port}:{self.election_port};{self.connect}"


def connect_string(members: Sequence[QuorumMember]) -> str:
    return ",".join(m.connect for m in members)


def zookeeper_classpath() -> str:
    """Debian's package, else an upstream tarball's lib/ under $ZOOKEEPER_HOME."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        return f"{Path(home) / 'lib'}/*"
    if _DEBIAN_JARS[0].exists():
        return ":".join(str(j) for j in _DEBIAN_JARS if j.exists())
    raise ZooKeeperStartError(
        "ZooKeeper not found: install Debian's `zookeeper` package (scripts/setup.sh does) or set ZOOKEEPER_HOME"
    )


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java:
        raise ZooKeeperStartError("java not found: install a JRE (default-jre-headless) or set JAVA_HOME")
    return java


def server_command(config_file: Path, main_class: str = ZOOKEEPER_MAIN_CLASS) -> list[str]:
    """The JVM command line of a server reading `config_file` (a zoo.cfg): standalone, or with QUORUM_MAIN_CLASS
    an ensemble member."""
    return [
        _java(),
        *_JVM_FLAGS,
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
        "-cp",
        zookeeper_classpath(),
        main_class,
        str(config_file),
    ]


# Looked up here, not between fork and exec, where loading a library could
# deadlock on a lock another thread held at fork time.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if our process dies (a test run
    # SIGKILLed), the kernel SIGKILLs the JVM too instead of orphaning it. The
    # "parent" is the thread that forked, so start attached servers from a
    # thread that lives as long as they should.
    assert _prctl is not None
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie child of ours is reaped and counts as gone)."""
    try:
        # Reaps it if it is a child of ours that exited (a zombie still "exists").
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


class LocalZooKeeper:
    """One ZooKeeper server on 127.0.0.1: standalone, or with `ensemble` (every member, this one's id `myid`)
    one member of an ensemble, whose ports are then the ensemble's.

    `port=0` picks a free port (and picks again if another process grabs it
    between our probe and the JVM's bind). `tick_time_ms` is short so sessions
    can be short: ZooKeeper allows session timeouts from 2 to 20 ticks by
    default; we widen the top to 60 s so Kafka's default 18 s is honoured.
    `fsync=False` trades durability on power loss for speed (tests). An ensemble member serves only once a
    quorum of members runs: start them all with `wait=False`, then `wait_ready()` each.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        fsync: bool = True,
        launcher: Sequence[str] = (),
        ensemble: Sequence[QuorumMember] = (),
        myid: int | None = None,
    ) -> None:
        self.ensemble = tuple(ensemble)
        self.myid = myid
        if self.ensemble:
            me = next((m for m in self.ensemble if m.id == myid), None)
            if me is None:
                raise ValueError(f"myid {myid} is not a member of the ensemble {[m.id for m in self.ensemble]}")
            host, port = me.host, me.client_port
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.fsync = fsync
        # An argv prefix the JVM runs under; it must exec (`ip netns exec NS`), so the pid stays the server's.
        # The server then binds in another network namespace, where our port probes cannot look: the port must
        # be given, and be free there.
        self.launcher = tuple(launcher)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pick_port = port == 0
        if self.launcher and self._pick_port:
            raise ValueError("a ZooKeeper started through a launcher needs an explicit port")

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.data_dir / LOG_FILE

    @property
    def pid_file(self) -> Path:
        return self.data_dir / PID_FILE

    @property
    def pid(self) -> int | None:
        """The server's pid: our child's, or (detached, another process) the pid file's if it is running."""
        if self._proc is not None:
            return self._proc.pid if self._proc.poll() is None else None
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        return pid if self._is_our_server(pid) else None

    def is_running(self) -> bool:
        return self.pid is not None

    def start(self, timeout: float = 30.0, detached: bool = False, wait: bool = True) -> int:
        """Start the server and wait until it serves requests; returns its pid.

        Attached (default), the JVM dies with this process (Linux parent-death
        signal) and `stop()` reaps it. Detached, it outlives us (`cluster up`);
        stop it later with `LocalZooKeeper(data_dir).stop()`, which finds it by
        the pid file. Either way it runs in its own session, so a Ctrl-C in the
        terminal is ours to handle, not the server's. With `wait=False` (an
        ensemble member, which cannot serve alone) it returns once the JVM is
        spawned; `wait_ready()` waits for it.
        """
        if self.is_running():
            raise ZooKeeperStartError(f"ZooKeeper already running from {self.data_dir} (pid {self.pid})")
        deadline = time.monotonic() + timeout
        while True:
            if self._pick_port:
                self.port = free_port(self.host)
            elif not self.launcher and port_in_use(self.host, self.port):
                # Checked first so that another server's "imok" cannot pass for ours.
                raise ZooKeeperStartError(f"port {self.connect_string} is already in use")
            proc = self._spawn(detached)
            if not wait:
                return self._started(proc, detached)
            if self._wait_ready(proc, deadline):
                return self._started(proc, detached)
            failure = self._describe_failure()
            self.stop()
            if not (self._pick_port and "Address already in use" in failure and time.monotonic() < deadline):
                raise ZooKeeperStartError(failure)

    def _started(self, proc: subprocess.Popen[bytes], detached: bool) -> int:
        if detached:
            # Forget the child: it must outlive us, and not be reaped by us.
            self._proc = None
        return proc.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the server (started with wait=False) serves: an ensemble member, once it has a quorum."""
        deadline = time.monotonic() + timeout
        while (mode := server_mode(self.host, self.port)) not in SERVING_MODES:
            if not self.is_running():
                raise ZooKeeperStartError(self._describe_failure())
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"no quorum after {timeout:g} s (srvr: {mode}); "
                                          + self._describe_failure())
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; idempotent. Works on a detached server too."""
        if self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        else:
            pid = self.pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    if not _wait(lambda: not pid_alive(pid), timeout, interval=0.05):
                        os.kill(pid, signal.SIGKILL)
                        _wait(lambda: not pid_alive(pid), timeout, interval=0.05)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _write_config(self) -> None:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={(self.data_dir / 'data').resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"maxSessionTimeout={max(60_000, 20 * self.tick_time_ms)}",
            # Every broker, controller, client and test connects from 127.0.0.1;
            # the default cap of 60 connections per address is far too low.
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat",
            # 64 MB of preallocated transaction log per data dir is a lot for tests.
            "preAllocSize=4096",
            f"forceSync={'yes' if self.fsync else 'no'}",
        ]
        if self.ensemble:
            lines += [
                # Ticks a follower has to connect and sync with a new leader, and to stay in step with it: a
                # follower (or leader) silent for syncLimit ticks (2.5 s) is dropped, and a new leader elected.
                "initLimit=20",
                "syncLimit=5",
                *(m.server_line() for m in self.ensemble),
            ]
            (self.data_dir / "data" / "myid").write_text(f"{self.myid}\n")
        self.config_file.write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        main_class = QUORUM_MAIN_CLASS if self.ensemble else ZOOKEEPER_MAIN_CLASS
        return [*self.launcher, *server_command(self.config_file.resolve(), main_class)]

    def _spawn(self, detached: bool) -> subprocess.Popen[bytes]:
        self._write_config()
        command = self._command()
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
                preexec_fn=None if detached or _prctl is None else _die_with_parent,
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")
        return self._proc

    def _wait_ready(self, proc: subprocess.Popen[bytes], deadline: float) -> bool:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            # Not `ruok`: that answers "imok" before the server serves requests.
            if server_mode(self.host, self.port) in SERVING_MODES:
                return proc.poll() is None
            time.sleep(0.02)
        return False

    def _is_our_server(self, pid: int) -> bool:
        # A stale pid file may name a pid the kernel has since given to
        # something else: only a java running our zoo.cfg is ours.
        if not Path("/proc").is_dir():  # not Linux: the pid file is all we have
            return pid_alive(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self.config_file.resolve()).encode() in cmdline

    def _describe_failure(self) -> str:
        try:
            tail = self.log_file.read_text(errors="replace").splitlines()[-15:]
        except OSError:
            tail = []
        return f"ZooKeeper did not start on {self.connect_string} (log {self.log_file}):\n" + "\n".join(tail)


def plan_ensemble(size: int, host: str = "127.0.0.1", client_ports: Sequence[int] = (),
                  avoid: Collection[int] = ()) -> list[QuorumMember]:
    """Members 1..size on `host`: the client ports given (0 or none: a free one), quorum and election ports free
    (and none of `avoid`, nor a client port given)."""
    free = iter(free_ports(3 * size, host, {*avoid, *client_ports}))
    ports = list(client_ports) + [0] * (size - len(client_ports))
    return [QuorumMember(i, host, ports[i - 1] or next(free), next(free), next(free)) for i in range(1, size + 1)]


def start_ensemble(servers: Sequence[LocalZooKeeper], timeout: float = 30.0, detached: bool = False) -> list[int]:
    """Start every member (LocalZooKeeper with an `ensemble`), then wait until each serves as leader or
    follower; returns their pids. On failure every member is stopped again."""
    deadline = time.monotonic() + timeout
    try:
        pids = [server.start(timeout, detached=detached, wait=False) for server in servers]
        for server in servers:
            server.wait_ready(max(deadline - time.monotonic(), 0.1))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return pids
