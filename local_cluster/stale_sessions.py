"""Registrations a killed cluster left in ZooKeeper, removed by the `cluster up` that starts it again.

After `cluster down --kill` (or a crash) the brokers' ephemeral /brokers/ids/<id>
and the controller's /controller outlive their processes until ZooKeeper
expires the sessions (zookeeper.session.timeout.ms, 18 s by default; a
restarted ZooKeeper gives restored sessions the whole timeout again). A broker
waits for its old registration to go (a live one would mean two brokers with
one id), and no controller is elected while /controller is held, so `up` would
wait that long for nothing.

A registration is removed only when it is provably this data dir's and dead:
the id is one cluster.json recorded for this data dir, the znode names the
address cluster.json recorded (the broker's listener, the controller's
endpoint), no process of the data dir runs (`cluster up` has refused to start
otherwise), and nothing listens on that address now. A live broker or
controller anywhere keeps its port open, so its znode is never touched. The
delete is conditional on the owning session read just before.
"""

from __future__ import annotations

from collections.abc import Callable

from local_cluster.cluster_file import ClusterInfo
from zk import paths
from zk.client import KafkaZkClient
from zk.server import port_in_use

Report = Callable[[str], None]


def remove_stale_registrations(zk: KafkaZkClient, previous: ClusterInfo, report: Report) -> list[str]:
    """Delete the dead registrations of `previous`'s brokers and controller; returns the znodes deleted."""
    removed = []
    for broker in previous.brokers:
        registration = zk.get_broker(broker.id)
        if registration is None:
            continue
        addresses = {(e.host, e.port) for e in registration.endpoints}
        if (broker.host, broker.port) in addresses and not port_in_use(broker.host, broker.port):
            removed += _remove(zk, paths.broker_id_path(broker.id), f"broker {broker.id} ({broker.address})", report)
    controller_id = zk.get_controller_id()
    endpoint = zk.get_controller_endpoint()
    if controller_id in {c.id for c in previous.controllers} and endpoint is not None:
        host, _, port = endpoint.rpartition(":")
        if port.isdigit() and not port_in_use(host.strip("[]"), int(port)):
            removed += _remove(zk, paths.CONTROLLER, f"controller {controller_id} ({endpoint})", report)
    return removed


def _remove(zk: KafkaZkClient, path: str, whose: str, report: Report) -> list[str]:
    owner = zk.ephemeral_owner(path)
    if owner is None or not zk.delete_ephemeral_of(path, owner):
        return []
    report(f"Removed {path}: {whose} of this data dir is gone, its session 0x{owner:x} had not expired yet")
    return [path]
