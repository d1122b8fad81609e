"""Network partitions on a `minibroker cluster up --netns` cluster: cut a broker off, then heal.

`isolate` cuts a broker off from its peer brokers, the controllers and ZooKeeper (all on other hosts of the
cluster's bridge) while, with `keep_clients`, producers and consumers on this machine still reach it: the
partition in which Kafka's ISR rules earn their keep. `heal` reconnects every host. The mechanics (nftables rules
in the broker's network namespace, dropping packets both ways) are local_cluster/network.py's.

<data dir>/partitions.json records the brokers cut off (so `heal`, `cluster status`, or a nemesis in another
process know); heal works from the namespaces themselves, with or without it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from local_cluster import network as cluster_network
from local_cluster.cluster_file import PARTITIONS_FILE, ClusterInfo, NetworkEntry
from local_cluster.network import NetworkError, broker_host


class PartitionError(Exception):
    """A partition cannot be made or healed; the message says why."""


@dataclass(frozen=True)
class Partition:
    broker_id: int
    keep_clients: bool
    since: float  # Unix time


def isolate(data_dir: Path, broker_id: int, keep_clients: bool = True) -> Partition:
    """Cut broker `broker_id` off from its peers, the controllers and ZooKeeper (and from clients unless
    `keep_clients`), until heal()."""
    info = ClusterInfo.load(data_dir)
    network = _network(info, data_dir)
    info.broker(broker_id)  # a precise error for an unknown broker
    try:
        cluster_network.cut_off(network, broker_host(broker_id), keep_clients)
    except NetworkError as e:
        raise PartitionError(str(e)) from None
    partition = Partition(broker_id, keep_clients, time.time())
    _save(data_dir, [p for p in partitions(data_dir) if p.broker_id != broker_id] + [partition])
    return partition


def heal(data_dir: Path) -> list[Partition]:
    """Restore every link of the cluster; returns the partitions that were recorded. A cluster without
    network namespaces, or whose namespaces are gone, has nothing to heal."""
    info = ClusterInfo.load(data_dir)
    if info.network is None:
        return []
    healed = partitions(data_dir)
    try:
        cluster_network.reconnect_all(info.network)
    except NetworkError as e:
        raise PartitionError(str(e)) from None
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
