"""The virtual network of `minibroker cluster up --netns`: every host in a network namespace of its own.

    root namespace (clients)          network namespace minibroker-<tag>-core     ZooKeeper :2181, controllers
      bridge mb<tag> 10.A.B.1/24 ---- veth mb<tag>-c  <-> eth0 10.A.B.2
                                 ---- veth mb<tag>-b1 <-> eth0 10.A.B.11  minibroker-<tag>-broker-1   broker :9092
                                 ---- veth mb<tag>-b2 <-> eth0 10.A.B.12  minibroker-<tag>-broker-2   ...

Each namespace is a machine for the processes in it: its own loopback, ports and firewall. cut_off() loads an
nftables table into one that drops every packet on its link to the bridge except, if asked, those to and from
this machine, where clients run: packets vanish in both directions, as on a cut cable (connections stall and time
out, nothing is refused), and the rules go with the namespace. chaos/netns.py makes partitions of it. ZooKeeper
and the controllers share one "core" host: the faults of a chaos run partition brokers (a controller is stopped,
not cut off), and one host for the control plane means one address to cut a broker off from all of it.

`<tag>` is a hash of the data dir, so clusters in different dirs (parallel test runs) never share a name. Their
/24 is picked from 10.200.0.0/13 starting at the same hash, past every subnet this machine already routes; a lock
file keeps two `cluster up`s from picking the same one at once. Everything is done with iproute2's `ip` and
nftables' `nft`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from local_cluster.cluster_file import NetworkEntry

CORE = "core"
BROKER_PORT = 9092  # Kafka's default: every broker has an address of its own (its gRPC listener)
KAFKA_BROKER_PORT = 9093  # the Kafka-protocol listener
INTERFACE = "eth0"  # the namespace's end of its veth
_POOL = ipaddress.IPv4Network("10.200.0.0/13")
_CORE_HOST_INDEX = 2
_BROKER_HOST_BASE = 10  # broker N is .(10 + N)
_IFNAMSIZ = 15  # longest interface name Linux accepts
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21  # `ip netns add` bind-mounts the namespace under /run/netns
_LOCK_FILE = Path(tempfile.gettempdir()) / "minibroker-netns.lock"
PARTITION_TABLE = "minibroker_partition"


class NetworkError(Exception):
    """The network cannot be created or removed; the message says why."""


def broker_host(broker_id: int) -> str:
    return f"broker-{broker_id}"


# ---------------------------------------------------------------- the plan (no I/O)


def network_tag(data_dir: Path) -> str:
    return hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:6]


def plan_network(tag: str, broker_ids: Iterable[int], routed: Iterable[ipaddress.IPv4Network]) -> NetworkEntry:
    """Names and addresses for ZooKeeper and the controllers ("core") and each broker, on a /24 no route uses."""
    subnet = _free_subnet(int(tag, 16), list(routed))
    hosts = {CORE: (subnet[_CORE_HOST_INDEX], "c")}
    for broker_id in broker_ids:
        if not 0 <= broker_id <= subnet.num_addresses - 2 - _BROKER_HOST_BASE:
            raise NetworkError(f"broker id {broker_id} has no address on the /24 of --netns (ids 0.."
                               f"{subnet.num_addresses - 2 - _BROKER_HOST_BASE})")
        hosts[broker_host(broker_id)] = (subnet[_BROKER_HOST_BASE + broker_id], f"b{broker_id}")
    veths = {host: f"mb{tag}-{short}" for host, (_, short) in hosts.items()}
    too_long = [v for v in veths.values() if len(v) > _IFNAMSIZ]
    if too_long:
        raise NetworkError(f"interface names longer than {_IFNAMSIZ} characters: {', '.join(too_long)}")
    return NetworkEntry(
        bridge=f"mb{tag}", subnet=str(subnet), gateway=str(subnet[1]),
        namespaces={host: f"minibroker-{tag}-{host}" for host in hosts},
        addresses={host: str(address) for host, (address, _) in hosts.items()},
        veths=veths,
    )


def _free_subnet(start: int, routed: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    candidates = list(_POOL.subnets(new_prefix=24))
    for i in range(len(candidates)):
        subnet = candidates[(start + i) % len(candidates)]
        if not any(subnet.overlaps(r) for r in routed):
            return subnet
    raise NetworkError(f"every /24 of {_POOL} is already routed on this machine")


def partition_ruleset(clients: str | None) -> str:
    """An nft script that (re)creates the table: drop everything on the bridge link but traffic with `clients`.

    Starting with `table` then `delete table` makes it idempotent: nft applies the script as one transaction.
    """
    if clients is None:
        kept_in = kept_out = ""
    else:
        kept_in, kept_out = f"ip saddr != {clients} ", f"ip daddr != {clients} "
    return (
        f"{reconnect_ruleset()}"
        f"table inet {PARTITION_TABLE} {{\n"
        f"  chain input {{\n"
        f"    type filter hook input priority filter; policy accept;\n"
        f'    iifname "{INTERFACE}" {kept_in}drop\n'
        f'    iifname "{INTERFACE}" meta nfproto ipv6 drop\n'
        f"  }}\n"
        f"  chain output {{\n"
        f"    type filter hook output priority filter; policy accept;\n"
        f'    oifname "{INTERFACE}" {kept_out}drop\n'
        f'    oifname "{INTERFACE}" meta nfproto ipv6 drop\n'
        f"  }}\n"
        f"}}\n"
    )


def reconnect_ruleset() -> str:
    """An nft script that deletes the table whether or not it exists."""
    return f"table inet {PARTITION_TABLE}\ndelete table inet {PARTITION_TABLE}\n"


def missing_capabilities(proc_status: str) -> list[str]:
    """The capabilities `ip netns` needs that the CapEff line of /proc/<pid>/status lacks."""
    for line in proc_status.splitlines():
        if line.startswith("CapEff:"):
            effective = int(line.split()[1], 16)
            return [name for bit, name in ((_CAP_NET_ADMIN, "CAP_NET_ADMIN"), (_CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
                    if not effective >> bit & 1]
    return ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]


# ---------------------------------------------------------------- the machine


def check_privileges() -> None:
    """Fail early, and say why, where network namespaces cannot be made."""
    missing = missing_capabilities(Path("/proc/self/status").read_text())
    if missing:
        raise NetworkError(
            f"--netns needs root: creating network namespaces, veths and a bridge takes {' and '.join(missing)},"
            f" which this process (uid {os.geteuid()}) does not have; run it as root (e.g. with sudo)")
    _ip("-V")


def exec_prefix(network: NetworkEntry, host: str) -> list[str]:
    """The argv prefix that runs a command inside `host`'s namespace (it execs, so the pid stays the command's)."""
    return ["ip", "netns", "exec", network.namespace(host)]


def cut_off(network: NetworkEntry, host: str, keep_clients: bool) -> None:
    """Drop `host`'s traffic with every other host of the bridge (and with this machine, unless `keep_clients`)."""
    _nft(network, host, partition_ruleset(network.gateway if keep_clients else None))


def reconnect_all(network: NetworkEntry) -> None:
    """Undo every cut_off() of the network; a namespace that is gone took its rules with it."""
    existing = set(existing_namespaces())
    for host, namespace in network.namespaces.items():
        if namespace in existing:
            _nft(network, host, reconnect_ruleset())


def routed_networks() -> list[ipaddress.IPv4Network]:
    routes = json.loads(_ip("-j", "-4", "route", "show") or "[]")
    return [ipaddress.IPv4Network(r["dst"], strict=False) for r in routes if r.get("dst") != "default"]


@contextlib.contextmanager
def allocation_lock() -> Iterator[None]:
    """Held from picking a subnet until the bridge has its address (and so its route)."""
    with _LOCK_FILE.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def create(network: NetworkEntry) -> None:
    prefix = ipaddress.IPv4Network(network.subnet).prefixlen
    in_root = [
        f"link add {network.bridge} type bridge",
        f"addr add {network.gateway}/{prefix} dev {network.bridge}",
        f"link set {network.bridge} up",
    ]
    for host, namespace in network.namespaces.items():
        veth = network.veths[host]
        in_root += [
            f"netns add {namespace}",
            f"link add {veth} type veth peer name {INTERFACE} netns {namespace}",
            f"link set {veth} master {network.bridge} up",
        ]
    _batch(in_root)
    for host, namespace in network.namespaces.items():
        _batch([
            "link set lo up",
            f"addr add {network.addresses[host]}/{prefix} dev {INTERFACE}",
            f"link set {INTERFACE} up",
        ], namespace)


def remove(tag: str, recorded: NetworkEntry | None = None) -> list[str]:
    """Delete the veths, bridge and namespaces of `recorded` and any other carrying `tag` that a crash left
    behind; whatever is already gone is skipped. Returns what was deleted."""
    # Links first: deleting a veth's root end takes its namespace end at once, whereas a deleted namespace's
    # devices go some time later, in the kernel's own time.
    links = set(_links())
    bridges = {f"mb{tag}"} | ({recorded.bridge} if recorded is not None else set())
    veths = {link for link in links if any(link.startswith(f"{b}-") for b in bridges)}
    if recorded is not None:
        veths |= set(recorded.veths.values()) & links
    doomed_links = sorted(veths) + sorted(bridges & links)
    _batch([f"link del {link}" for link in doomed_links])
    namespaces = set(existing_namespaces())
    doomed_namespaces = {n for n in namespaces if n.startswith(f"minibroker-{tag}-")}
    if recorded is not None:
        doomed_namespaces |= set(recorded.namespaces.values()) & namespaces
    _batch([f"netns del {n}" for n in sorted(doomed_namespaces)])
    return doomed_links + sorted(doomed_namespaces)


def existing_namespaces() -> list[str]:
    return [n["name"] for n in json.loads(_ip("-j", "netns", "list") or "[]")]


def _links() -> list[str]:
    return [link["ifname"] for link in json.loads(_ip("-j", "link", "show") or "[]")]


def _batch(commands: list[str], namespace: str | None = None) -> None:
    if commands:
        in_namespace = () if namespace is None else ("-n", namespace)
        _ip(*in_namespace, "-batch", "-", stdin="\n".join(commands) + "\n")


def _ip(*args: str, stdin: str | None = None) -> str:
    try:
        result = subprocess.run(["ip", *args], input=stdin, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetworkError("`ip` not found: install iproute2") from None
    if result.returncode != 0:
        raise NetworkError(ip_failure(args, stdin, result.stderr))
    return result.stdout


def ip_failure(args: Iterable[str], stdin: str | None, stderr: str) -> str:
    """What failed, in words: in a batch, the command on the line `ip` names rather than the whole batch."""
    command = f"ip {' '.join(args)}"
    failed_line = re.search(r"Command failed -:(\d+)", stderr)
    if failed_line and stdin is not None:
        lines = stdin.splitlines()
        number = int(failed_line.group(1))
        if 0 < number <= len(lines):
            command = f"ip {' '.join(a for a in args if a not in ('-batch', '-'))} {lines[number - 1]}"
    error = " ".join(line.strip() for line in stderr.splitlines() if not line.startswith("Command failed"))
    if "Operation not permitted" in stderr:
        error += " (network namespaces need root: CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    return f"`{command}` failed: {error}"


def _nft(network: NetworkEntry, host: str, script: str) -> None:
    try:
        result = subprocess.run([*exec_prefix(network, host), "nft", "-f", "-"], input=script,
                                capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetworkError("`ip` not found: install iproute2") from None
    if result.returncode != 0:
        error = result.stderr.strip()
        if "nft" in error and ("No such file" in error or "not found" in error):
            error = "`nft` not found: install nftables (scripts/setup.sh does)"
        elif "Operation not permitted" in error:
            error += " (network partitions need root: CAP_NET_ADMIN)"
        raise NetworkError(f"nft in network namespace {network.namespace(host)}: {error}")
