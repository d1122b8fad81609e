"""A cluster known by its bootstrap brokers' gRPC listeners only (`--bootstrap-server`: a compose cluster, any
cluster not of this machine's `cluster up`): its ZooKeeper, controller and Kafka listeners, learnt from the cluster.

From one broker's DescribeConfigs: zookeeper.connect (unless --zookeeper names it, as Kafka's tools take it: a
compose cluster's brokers name ZooKeeper by in-container names) and grpc.listener.names. From ZooKeeper, read
only: the /controller znode (the active controller's RPC address, as local.py reads it), /controller_epoch, the
members' `srvr` modes, and the brokers' registrations, whose Kafka-protocol listeners DescribeLogDirs is asked on.
`kafka_listeners` chooses them, with no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from client import Admin
from client.admin import ConfigResource, ConfigResourceType
from client.metadata import ClusterMetadata
from client.structs import format_address
from console.zookeeper import connect_members, zookeeper_picture
from zk.acl import OPEN, ZkSecurity
from zk.client import KafkaZkClient, connect_checked
from zk.paths import BrokerInfo

ZOOKEEPER_TIMEOUT_S = 5.0


def kafka_listeners(registrations: Iterable[BrokerInfo], grpc_listener_names: Iterable[str],
                    reached: Mapping[int, str]) -> str:
    """The brokers' Kafka-protocol listeners to bootstrap from: per broker, of the endpoints its registration
    advertises that are not gRPC ones, the one on the host the console reached it at (`reached`: Metadata's host
    per broker; a compose broker advertises localhost beside its in-container name), else its first."""
    grpc_names = {n.strip().upper() for n in grpc_listener_names if n.strip()}
    servers = []
    for broker in sorted(registrations, key=lambda b: b.id):
        kafka = [e for e in broker.endpoints if e.listener_name.upper() not in grpc_names]
        if kafka:
            chosen = next((e for e in kafka if e.host == reached.get(broker.id)), kafka[0])
            servers.append(format_address(chosen.host, chosen.port))
    return ",".join(servers)


class RemoteCluster:
    """The ZooKeeper and controller of a --bootstrap-server cluster; connects on first use, from the slow loop."""

    def __init__(self, zookeeper: str | None = None, security: ZkSecurity = OPEN) -> None:
        self._connect = zookeeper
        self._security = security
        self._grpc_listener_names: list[str] | None = None
        self._zk: KafkaZkClient | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._zk is not None:
            self._zk.close()

    def learn(self, metadata: ClusterMetadata, admin: Admin) -> None:
        """zookeeper.connect (unless given) and grpc.listener.names, from the DescribeConfigs of one broker."""
        if self._grpc_listener_names is not None:
            return
        broker = ConfigResource(ConfigResourceType.BROKER, str(min(metadata.brokers)))
        configs = {c.name: c.value for c in admin.describe_configs([broker]).get(broker, [])}
        if self._connect is None:
            self._connect = configs.get("zookeeper.connect") or None
            if self._connect is None:
                raise RuntimeError(f"broker {broker.name} does not describe zookeeper.connect: give --zookeeper")
        self._grpc_listener_names = (configs.get("grpc.listener.names") or "").split(",")

    def zookeeper(self) -> dict[str, Any]:
        if self._connect is None:
            return {}
        return zookeeper_picture(connect_members(self._connect), self._zookeeper)

    def controller_endpoint(self) -> str | None:
        return self._zookeeper().get_controller_endpoint()

    def kafka_servers(self, metadata: ClusterMetadata) -> str:
        """The live brokers' Kafka listeners, from their registrations ("" when none has one)."""
        return kafka_listeners(self._zookeeper().get_all_brokers(), self._grpc_listener_names or (),
                               {b.node_id: b.host for b in metadata.brokers.values()})

    def _zookeeper(self) -> KafkaZkClient:
        with self._lock:
            if self._connect is None:
                raise RuntimeError("ZooKeeper not known yet")
            if self._zk is None:
                self._zk = connect_checked(self._connect, ZOOKEEPER_TIMEOUT_S, self._security)
            return self._zk
