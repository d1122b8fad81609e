"""A real, local, standalone ZooKeeper server process, for `minibroker cluster up` and for tests.

Runs ZooKeeperServerMain directly with java (what `zkServer.sh start-foreground`
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
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

# Debian/Ubuntu's `zookeeper` package: the jar's manifest Class-Path names its
# dependencies, so one jar is the whole server. slf4j-simple makes it log (to
# stderr, i.e. zookeeper.log) instead of printing a NOP-logger warning.
_DEBIAN_JARS = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-simple.jar"))
ZOOKEEPER_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# A coordination server for a handful of brokers: small heap, no JIT tier 2 and
# serial GC make the JVM start in about a third of a second.
_JVM_FLAGS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
PID_FILE = "zookeeper_server.pid"
LOG_FILE = "zookeeper.log"


class ZooKeeperStartError(RuntimeError):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (someone else may take it before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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


def server_command(config_file: Path) -> list[str]:
    """The JVM command line of a standalone server reading `config_file` (a zoo.cfg)."""
    return [
        _java(),
        *_JVM_FLAGS,
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
        "-cp",
        zookeeper_classpath(),
        ZOOKEEPER_MAIN_CLASS,
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
    """One standalone ZooKeeper server on 127.0.0.1.

    `port=0` picks a free port (and picks again if another process grabs it
    between our probe and the JVM's bind). `tick_time_ms` is short so sessions
    can be short: ZooKeeper allows session timeouts from 2 to 20 ticks by
    default; we widen the top to 60 s so Kafka's default 18 s is honoured.
    `fsync=False` trades durability on power loss for speed (tests).
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        fsync: bool = True,
        launcher: Sequence[str] = (),
    ) -> None:
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

    def start(self, timeout: float = 30.0, detached: bool = False) -> int:
        """Start the server and wait until it serves requests; returns its pid.

        Attached (default), the JVM dies with this process (Linux parent-death
        signal) and `stop()` reaps it. Detached, it outlives us (`cluster up`);
        stop it later with `LocalZooKeeper(data_dir).stop()`, which finds it by
        the pid file. Either way it runs in its own session, so a Ctrl-C in the
        terminal is ours to handle, not the server's.
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
            if self._wait_ready(proc, deadline):
                if detached:
                    # Forget the child: it must outlive us, and not be reaped by us.
                    self._proc = None
                return proc.pid
            failure = self._describe_failure()
            self.stop()
            if not (self._pick_port and "Address already in use" in failure and time.monotonic() < deadline):
                raise ZooKeeperStartError(failure)

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
        self.config_file.write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        return [*self.launcher, *server_command(self.config_file.resolve())]

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
            with contextlib.suppress(OSError):
                # Not `ruok`: that answers "imok" before the server serves requests.
                if "Mode: standalone" in four_letter_word(self.host, self.port, "srvr"):
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
