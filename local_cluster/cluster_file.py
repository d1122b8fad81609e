"""`<data dir>/cluster.json`: what `minibroker cluster up` started and where it listens.

Written by the launcher (local_cluster/cluster.py) and read by every command
that takes `--data-dir`, so its shape is a contract: `bootstrap_servers` (the
brokers' gRPC listeners), `kafka_bootstrap_servers` (their Kafka-protocol
listeners, for kcat, confluent-kafka, kafka-python...), `zookeeper` {connect,
pid, members}, `controllers` [{id, pid}], `brokers` [{id, host, port, pid, log_dir,
kafka_port}], and `network` (null unless `cluster up --netns`): {bridge,
subnet, gateway, namespaces {host: namespace}, addresses {host: IP}, veths},
where a host is "core" (ZooKeeper and the controllers) or "broker-<id>", and
`security` (null unless `cluster up --security`): {ca, client_config,
zookeeper_jaas, admin_user}, the files a client or tool of the secure cluster
needs (paths). A pid
is null for a process that is not ours to manage (an external ZooKeeper given
with `--zookeeper`). `members` is empty for a single ZooKeeper server; for an
ensemble (`cluster up --zookeeper-nodes 3`) it lists each server {id, host,
client_port, quorum_port, election_port, pid}, `connect` is the whole connect
string and the ensemble's own `pid` null.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zk.server import QuorumMember

CLUSTER_FILE = "cluster.json"
# chaos/netns.py's record of the brokers it cut off; it means nothing once the network is gone.
PARTITIONS_FILE = "partitions.json"


class ClusterFileError(Exception):
    """No usable cluster.json; the message says what to do."""


@dataclass
class ZooKeeperMember:
    """One server of an ensemble `cluster up` started: zookeeper-<id>/ in the data dir."""

    id: int
    host: str
    client_port: int
    quorum_port: int
    election_port: int
    pid: int | None

    @property
    def name(self) -> str:
        return f"zookeeper-{self.id}"

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.client_port}"

    def quorum_member(self) -> QuorumMember:
        return QuorumMember(self.id, self.host, self.client_port, self.quorum_port, self.election_port)


@dataclass
class ZooKeeperEntry:
    connect: str
    pid: int | None  # a single server's; null for an ensemble (each member has its own) and an external one
    members: list[ZooKeeperMember] = field(default_factory=list)

    @property
    def external(self) -> bool:
        """Not ours to start, stop or watch (`cluster up --zookeeper H:P`)."""
        return self.pid is None and not self.members


@dataclass
class ControllerEntry:
    id: int
    pid: int | None


@dataclass
class BrokerEntry:
    id: int
    host: str
    port: int
    pid: int | None
    log_dir: str
    # The Kafka-protocol listener's port; None in a cluster.json written before brokers had one.
    kafka_port: int | None = None

    @property
    def address(self) -> str:
        """The gRPC listener."""
        return f"{self.host}:{self.port}"

    @property
    def kafka_address(self) -> str | None:
        return None if self.kafka_port is None else f"{self.host}:{self.kafka_port}"


@dataclass
class NetworkEntry:
    """The virtual network of `cluster up --netns` (local_cluster/network.py): recorded before any of it
    is created, so `cluster down` can remove what a crashed `up` left behind."""

    bridge: str
    subnet: str
    gateway: str  # the bridge's address in the root namespace: where clients on this machine come from
    namespaces: dict[str, str]
    addresses: dict[str, str]
    veths: dict[str, str]  # host -> its veth's root-namespace end; the other end is `eth0` in its namespace

    def namespace(self, host: str) -> str:
        try:
            return self.namespaces[host]
        except KeyError:
            raise ClusterFileError(f"the cluster network has no host {host!r} (hosts: "
                                   f"{', '.join(self.namespaces)})") from None


@dataclass
class SecurityEntry:
    """What `cluster up --security` made under `<data dir>/security` (local_cluster/security.py): the
    development CA's certificate, the admin super user's client properties (security.protocol, sasl.*, ssl.*:
    a `--command-config` for every tool, kcat's -F, confluent-kafka's config) and the JAAS file whose Client
    section is the cluster's ZooKeeper identity."""

    ca: str
    client_config: str
    zookeeper_jaas: str
    admin_user: str


@dataclass
class ClusterInfo:
    zookeeper: ZooKeeperEntry
    controllers: list[ControllerEntry] = field(default_factory=list)
    brokers: list[BrokerEntry] = field(default_factory=list)
    network: NetworkEntry | None = None
    security: SecurityEntry | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def kafka_bootstrap_servers(self) -> str:
        return ",".join(address for b in self.brokers if (address := b.kafka_address) is not None)

    def broker(self, broker_id: int) -> BrokerEntry:
        for broker in self.brokers:
            if broker.id == broker_id:
                return broker
        raise ClusterFileError(f"the cluster has no broker {broker_id} (brokers: "
                               f"{', '.join(str(b.id) for b in self.brokers)})")

    def to_json(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, "kafka_bootstrap_servers": self.kafka_bootstrap_servers,
                **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterInfo:
        return cls(
            zookeeper=ZooKeeperEntry(**{**data["zookeeper"], "members": [
                ZooKeeperMember(**m) for m in data["zookeeper"].get("members", [])]}),
            controllers=[ControllerEntry(**c) for c in data["controllers"]],
            brokers=[BrokerEntry(**b) for b in data["brokers"]],
            network=None if data.get("network") is None else NetworkEntry(**data["network"]),
            security=None if data.get("security") is None else SecurityEntry(**data["security"]),
        )

    def save(self, data_dir: Path) -> None:
        """Atomically: a reader never sees half a file, even if `cluster up` is killed while writing."""
        path = data_dir / CLUSTER_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, data_dir: Path) -> ClusterInfo:
        path = data_dir / CLUSTER_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterFileError(f"no cluster in {data_dir} ({path} does not exist): start one with"
                                   f" `minibroker cluster up --data-dir {data_dir}`") from None
        except (OSError, ValueError) as e:
            raise ClusterFileError(f"cannot read {path}: {e}") from None
        try:
            return cls.from_json(data)
        except (KeyError, TypeError) as e:
            raise ClusterFileError(f"{path} is not a cluster file minibroker wrote: {e!r}") from None

    @classmethod
    def exists(cls, data_dir: Path) -> bool:
        return (data_dir / CLUSTER_FILE).is_file()
