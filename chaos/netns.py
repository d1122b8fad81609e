"""Network partitions on a `minibroker cluster up --netns` cluster: cut a broker off, then heal.

`isolate` loads an nftables table into the broker's network namespace that drops every packet on its link to the
bridge (`eth0`) except, with `keep_clients`, those to and from this machine, where clients run: the broker loses
its peer brokers, the controllers and ZooKeeper (all on other hosts of the bridge) while producers and consumers
still reach it, the partition in which Kafka's ISR rules earn their keep. Packets vanish in both directions, as
on a cut cable: connections stall and time out, nothing is refused. `heal` deletes the table from every namespace
of the cluster. The rules live in the namespace, so `cluster down` takes them away with it.

<data dir>/partitions.json records the brokers cut off (so `heal`, `cluster status`, or a nemesis in another
process know); heal works from the namespaces themselves, with or without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from minibroker.cluster_file import PARTITIONS_FILE, ClusterInfo, NetworkEntry
from minibroker.cluster_network import INTERFACE, NetworkError, broker_host, exec_prefix, existing_namespaces

TABLE = "minibroker_partition"


class PartitionError(Exception):
    """A partition cannot be made or healed; the message says why."""


@dataclass(frozen=True)
class Partition:
    broker_id: int
    keep_clients: bool
    since: float  # Unix time


def partition_ruleset(clients: str | None) -> str:
    """An nft script that (re)creates the table: drop everything on the bridge link but traffic with `clients`.

    Starting with `table` then `delete table` makes it idempotent: nft applies the script as one transaction.
    """
    if clients is None:
        kept_in = kept_out = ""
    else:
        kept_in, kept_out = f"ip saddr != {clients} ", f"ip daddr != {clients} "
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
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


def heal_ruleset() -> str:
    """An nft script that deletes the table whether or not it exists."""
    return f"table inet {TABLE}\ndelete table inet {TABLE}\n"


def isolate(data_dir: Path, broker_id: int, keep_clients: bool = True) -> Partition:
    """Cut broker `broker_id` off from its peers, the controllers and ZooKeeper (and from clients unless
    `keep_clients`), until heal()."""
    info = ClusterInfo.load(data_dir)
    network = _network(info, data_dir)
    info.broker(broker_id)  # a precise error for an unknown broker
    _nft(network, broker_host(broker_id), partition_ruleset(network.gateway if keep_clients else None))
    partition = Partition(broker_id, keep_clients, time.time())
    _save(data_dir, [p for p in partitions(data_dir) if p.broker_id != broker_id] + [partition])
    return partition


def heal(data_dir: Path) -> list[Partition]:
    """Restore every link of the cluster; returns the partitions that were recorded. A cluster without
    network namespaces has nothing to heal."""
    info = ClusterInfo.load(data_dir)
    if info.network is None:
        return []
    healed = partitions(data_dir)
    try:
        existing = set(existing_namespaces())
    except NetworkError as e:
        raise PartitionError(str(e)) from None
    # A namespace that is gone (`cluster down`) took its rules with it.
    for host in [h for h, namespace in info.network.namespaces.items() if namespace in existing]:
        _nft(info.network, host, heal_ruleset())
    (data_dir / PARTITIONS_FILE).unlink(missing_ok=True)
    return healed


def partitions(data_dir: Path) -> list[Partition]:
    """The brokers cut off now, as isolate() recorded them."""
    try:
        data = json.loads((data_dir / PARTITIONS_FILE).read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise PartitionError(f"cannot read {data_dir / PARTITIONS_FILE}: {e}") from None
    return [Partition(**p) for p in data["partitions"]]


def _network(info: ClusterInfo, data_dir: Path) -> NetworkEntry:
    if info.network is None:
        raise PartitionError(f"the cluster in {data_dir} has no network namespaces to cut: start it with"
                             f" `minibroker cluster up --netns --data-dir {data_dir}` (as root)")
    return info.network


def _save(data_dir: Path, records: list[Partition]) -> None:
    path = data_dir / PARTITIONS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"partitions": [asdict(p) for p in records]}, indent=2) + "\n")
    os.replace(tmp, path)


def _nft(network: NetworkEntry, host: str, script: str) -> None:
    try:
        result = subprocess.run([*exec_prefix(network, host), "nft", "-f", "-"], input=script,
                                capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise PartitionError("`ip` not found: install iproute2") from None
    if result.returncode != 0:
        error = result.stderr.strip()
        if "nft" in error and ("No such file" in error or "not found" in error):
            error = "`nft` not found: install nftables (scripts/setup.sh does)"
        elif "Operation not permitted" in error:
            error += " (network partitions need root: CAP_NET_ADMIN)"
        raise PartitionError(f"nft in network namespace {network.namespace(host)}: {error}")
