"""expire-session on a local cluster: cut one running process off from ZooKeeper, and from nothing else.

A ZooKeeper session expires when no server of the ensemble hears from its client for the session timeout
(zookeeper.session.timeout.ms). The process learns it only when it reaches a server again and is told
SESSION_EXPIRED; until then it runs on, serving clients and followers as the leader it believes it is,
while its ephemeral znodes are gone and the controller has moved its leaderships away: the zombie broker
(or zombie controller) that Kafka's epochs and conditional ZooKeeper writes are there to fence. So the cut
must leave the process running and every other connection of it (clients, followers, controller) alone,
and leave every other process's ZooKeeper traffic alone too, though they share the address (127.0.0.1, or
the core network namespace with --netns):

- the process moves into a cgroup (v2) of its own, and an iptables rule in its network namespace drops
  the packets of sockets created in that cgroup to ZooKeeper's client ports (xt_cgroup matches the
  cgroup a socket was created in): its reconnection attempts go nowhere;
- its sockets created before the move and connected to ZooKeeper now (read from /proc/<pid>/net/tcp and
  /proc/<pid>/fd: the view of the process's own namespace) are dropped by their 4-tuples, both ways, as
  a cut cable would drop them.

`restore` removes the rules and moves the process back: its client reconnects, hears SESSION_EXPIRED and
starts a new session (a broker registers again). Root only (CAP_NET_ADMIN and CAP_SYS_ADMIN), with iptables,
nsenter and a cgroup2 mount.

In a container (the compose cluster) the process has a network namespace to itself: `cut_namespace` drops
the namespace's ZooKeeper traffic, no cgroup needed.

Not the session-takeover trick of tests/integration/conftest.py (a second client with the same session id
and password, closed): it needs the session's password, which only the process itself holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CHAIN_PREFIX = "MB-ZKCUT-"
_CGROUP_PREFIX = "minibroker-zkcut-"
_TOOLS = ("iptables", "nsenter")


class CutError(Exception):
    """The process cannot be cut off from ZooKeeper, or restored; the message says why."""


@dataclass(frozen=True)
class Connection:
    local: tuple[str, int]
    remote: tuple[str, int]


@dataclass
class ZooKeeperCut:
    pid: int
    chain: str
    netns: str | None  # where the rules are: a namespace file to nsenter, None for ours
    cgroup: Path | None = None  # the process's cgroup during the cut (none: the whole namespace is cut)
    home: Path | None = None  # and the one it came from
    connections: list[Connection] = field(default_factory=list)  # cut by their 4-tuples


def cgroup2_root() -> Path | None:
    """Where the unified (v2) cgroup hierarchy is mounted (/sys/fs/cgroup, or .../unified on a hybrid host)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return Path(fields[1])
    return None


def unsupported() -> str | None:
    """Why this machine cannot cut a process off from ZooKeeper, or None."""
    if os.geteuid() != 0:
        return "expire-session cuts a process's ZooKeeper traffic with iptables and a cgroup: it needs root"
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        return f"expire-session needs {', '.join(missing)} (apt-get install iptables util-linux)"
    if cgroup2_root() is None:
        return "expire-session needs a cgroup2 (unified) hierarchy mounted: none is in /proc/mounts"
    return None


def parse_address(text: str) -> tuple[str, int]:
    """/proc/net/tcp's "0100007F:0885" -> ("127.0.0.1", 2181) (the address in host byte order, little-endian)."""
    address, _, port = text.partition(":")
    return socket.inet_ntoa(struct.pack("<I", int(address, 16))), int(port, 16)


def parse_tcp_table(table: str, inodes: Collection[str], ports: Collection[int]) -> list[Connection]:
    """The connections of /proc/<pid>/net/tcp owned by one of the socket `inodes` and going to one of `ports`."""
    found = []
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[9] not in inodes:
            continue
        local, remote = parse_address(fields[1]), parse_address(fields[2])
        if remote[1] in ports:
            found.append(Connection(local, remote))
    return found


def zookeeper_connections(pid: int, ports: Collection[int]) -> list[Connection]:
    """The process's TCP connections to ZooKeeper's client `ports`, in its own network namespace."""
    inodes = set()
    with contextlib.suppress(FileNotFoundError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
    return parse_tcp_table(Path(f"/proc/{pid}/net/tcp").read_text(), inodes, ports)


def drop_rules(chain: str, cgroup_path: str | None, ports: Sequence[int],
               connections: Sequence[Connection] = ()) -> list[list[str]]:
    """The iptables arguments of the cut (pure): a chain, jumped to from OUTPUT and INPUT, that drops the
    cgroup's new connections to ZooKeeper and both directions of each existing connection; without a cgroup,
    every packet to or from ZooKeeper's ports in the namespace."""
    listed = ",".join(str(p) for p in sorted(set(ports)))
    rules = [["-N", chain], ["-I", "OUTPUT", "-j", chain], ["-I", "INPUT", "-j", chain]]
    if cgroup_path is None:
        return rules + [["-A", chain, "-p", "tcp", "-m", "multiport", direction, listed, "-j", "DROP"]
                        for direction in ("--dports", "--sports")]
    rules.append(["-A", chain, "-p", "tcp", "-m", "cgroup", "--path", cgroup_path, "-m", "multiport",
                  "--dports", listed, "-j", "DROP"])
    for c in connections:
        for (src, sport), (dst, dport) in ((c.local, c.remote), (c.remote, c.local)):
            rules.append(["-A", chain, "-p", "tcp", "-s", src, "--sport", str(sport), "-d", dst, "--dport",
                          str(dport), "-j", "DROP"])
    return rules


def remove_rules(chain: str) -> list[list[str]]:
    return [["-D", "OUTPUT", "-j", chain], ["-D", "INPUT", "-j", chain], ["-F", chain], ["-X", chain]]


def cut(pid: int, ports: Collection[int]) -> ZooKeeperCut:
    """Cut process `pid` off from ZooKeeper's client `ports` until restore()."""
    root = cgroup2_root()
    if root is None:
        raise CutError(unsupported() or "no cgroup2 hierarchy")
    try:
        record = ZooKeeperCut(pid, f"{CHAIN_PREFIX}{pid}", _namespace(pid), root / f"{_CGROUP_PREFIX}{pid}",
                              root / _own_cgroup(pid).lstrip("/"))
    except OSError as e:  # it exited
        raise CutError(f"cannot cut pid {pid} off from ZooKeeper: {e}") from None

    def rules() -> list[list[str]]:
        assert record.cgroup is not None
        record.cgroup.mkdir(exist_ok=True)
        # Every thread of the process: cgroup.procs moves the whole thread group.
        (record.cgroup / "cgroup.procs").write_text(f"{pid}\n")
        # Read after the move: a socket made since is the cgroup rule's, one made before is listed here.
        record.connections = zookeeper_connections(pid, ports)
        return drop_rules(record.chain, f"/{record.cgroup.relative_to(root)}", list(ports), record.connections)

    return _apply(record, rules, f"pid {pid}")


def cut_namespace(pid: int, ports: Collection[int]) -> ZooKeeperCut:
    """Cut the network namespace of process `pid` (a container's: the process is alone there) off from
    ZooKeeper's `ports` until restore()."""
    record = ZooKeeperCut(pid, f"{CHAIN_PREFIX}{pid}", f"/proc/{pid}/ns/net")
    return _apply(record, lambda: drop_rules(record.chain, None, list(ports)), f"pid {pid}'s network namespace")


def _apply(record: ZooKeeperCut, rules: Callable[[], list[list[str]]], what: str) -> ZooKeeperCut:
    """Make the cut (`rules` prepares it and says which iptables rules it takes); undone again if it fails."""
    why = unsupported()
    if why is not None:
        raise CutError(why)
    try:
        for args in rules():
            _iptables(record.netns, args)
    except (OSError, CutError) as e:
        with contextlib.suppress(CutError):
            restore(record)
        raise CutError(f"cannot cut {what} off from ZooKeeper: {e}") from None
    return record


def restore(record: ZooKeeperCut) -> None:
    """Undo cut(): the rules go, the process goes back to its cgroup (if it still runs)."""
    for args in remove_rules(record.chain):
        with contextlib.suppress(CutError):  # a half-made cut lacks some; a gone namespace took them along
            _iptables(record.netns, args)
    if record.cgroup is None or record.home is None:
        return
    with contextlib.suppress(ProcessLookupError, FileNotFoundError):
        (record.home / "cgroup.procs").write_text(f"{record.pid}\n")
    # A process that exited meanwhile leaves its cgroup once it is reaped.
    deadline = time.monotonic() + 5.0
    while record.cgroup.exists():
        try:
            record.cgroup.rmdir()
        except OSError as e:
            if time.monotonic() >= deadline:
                raise CutError(f"cannot remove {record.cgroup}: {e.strerror}") from None
            time.sleep(0.1)


def _own_cgroup(pid: int) -> str:
    """The process's cgroup in the unified hierarchy ("0::/path" in /proc/<pid>/cgroup)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    raise CutError(f"pid {pid} is in no cgroup2 hierarchy")


def _namespace(pid: int) -> str | None:
    """The process's network namespace as a file that outlives it (a named one of `ip netns`, as --netns makes
    them), or None when it is ours."""
    theirs = os.stat(f"/proc/{pid}/ns/net")
    ours = os.stat("/proc/self/ns/net")
    if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino):
        return None
    with contextlib.suppress(OSError):
        for named in Path("/run/netns").iterdir():
            st = named.stat()
            if (st.st_dev, st.st_ino) == (theirs.st_dev, theirs.st_ino):
                return str(named)
    return f"/proc/{pid}/ns/net"


def _iptables(netns: str | None, args: list[str]) -> None:
    # In the process's network namespace: with --netns a broker's packets never pass the root namespace's
    # chains on their way to ZooKeeper.
    command = [*(["nsenter", f"--net={netns}"] if netns else []), "iptables", "-w", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise CutError(f"{' '.join(command)}: {result.stderr.strip()}")
