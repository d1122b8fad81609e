"""A cluster known by its brokers' gRPC listeners only (`--bootstrap-server`: a compose cluster from the host, any
cluster not of this machine's `cluster up`): what the console learns of the rest through the brokers alone.

A compose cluster's controllers and ZooKeeper servers answer on in-container names (`controller-1001:9090`,
`zookeeper-1:2181`) that do not resolve on the host, so the console asks neither directly: any broker forwards
DescribeEvents to the active controller (as it forwards ElectLeaders, KIP-590), whose answer carries its events,
its controller epoch and ZooKeeper's members with their `srvr` modes as the controller reaches them. Nothing is
published or advertised for the console, and it needs no ZooKeeper credentials. The Kafka listener DescribeLogDirs
is asked on comes from one broker's own DescribeConfigs (advertised.listeners, grpc.listener.names):
`kafka_listener` chooses it, with no I/O; kafka-python finds the other brokers from there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from client.metadata import ClusterMetadata
from client.structs import BrokerMetadata, format_address
from common.config import parse_endpoints, parse_security_protocol_map
from common.grpc_tls import GrpcSecurity
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import EndPoint

# ConfigResource.Type.BROKER, as Kafka numbers it.
BROKER_RESOURCE = 4
DESCRIBE_CONFIGS_TIMEOUT_S = 5.0


class ControllerUnavailable(Exception):
    """No broker could forward DescribeEvents, or none found an active controller."""


def kafka_listener(endpoints: Iterable[EndPoint], grpc_listener_names: Iterable[str], reached_host: str) -> str:
    """A broker's Kafka-protocol listener to bootstrap kafka-python from: of the endpoints it advertises that are not
    gRPC ones, the one on the host the console reached it at (a compose broker advertises localhost beside its
    in-container name), else its first; "" when it has none."""
    grpc_names = {n.strip().upper() for n in grpc_listener_names if n.strip()}
    kafka = [e for e in endpoints if e.listener_name.upper() not in grpc_names]
    if not kafka:
        return ""
    chosen = next((e for e in kafka if e.host == reached_host), kafka[0])
    return format_address(chosen.host, chosen.port)


def advertised_endpoints(configs: Mapping[str, str | None]) -> tuple[EndPoint, ...]:
    """A broker's own described configs -> the endpoints its registration advertises (advertised.listeners, else
    listeners, as KafkaConfig falls back)."""
    protocols = configs.get("listener.security.protocol.map")
    listeners = configs.get("advertised.listeners") or configs.get("listeners") or ""
    return parse_endpoints(listeners, parse_security_protocol_map(protocols) if protocols else None)


def zookeeper_picture(response: pb.DescribeEventsResponse) -> dict[str, Any]:
    """The controller's answer as the page shows ZooKeeper: each member's mode, the controller and its epoch."""
    return {"servers": [{"name": s.connect, "connect": s.connect, "mode": s.mode} for s in response.zookeeper_servers],
            "controller_id": response.controller_id, "controller_epoch": response.controller_epoch}


class RemoteCluster:
    """The controller (through the brokers) and the Kafka listener of a --bootstrap-server cluster."""

    def __init__(self, security: GrpcSecurity) -> None:
        self._security = security
        self._kafka_servers: str | None = None
        self._listeners: dict[int, tuple[EndPoint, ...]] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._zookeeper: dict[str, Any] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()

    def broker_listeners(self, metadata: ClusterMetadata) -> dict[int, tuple[EndPoint, ...]]:
        """The listeners each broker advertises, from its own DescribeConfigs: asked once of each broker that
        answers (a broker id seen again is asked again only if it never answered)."""
        for broker in sorted(metadata.brokers.values()):
            if broker.node_id not in self._listeners:
                configs = self._own_configs(broker)
                if configs is None:
                    continue
                endpoints = advertised_endpoints(configs)
                self._listeners[broker.node_id] = endpoints
                if self._kafka_servers is None:
                    self._kafka_servers = kafka_listener(
                        endpoints, (configs.get("grpc.listener.names") or "").split(","), broker.host)
        return {b: self._listeners[b] for b in metadata.brokers if b in self._listeners}

    def kafka_servers(self, metadata: ClusterMetadata) -> str:
        """A Kafka listener of the cluster ("" when no broker has one), from the first broker that described its
        own configs."""
        self.broker_listeners(metadata)
        return self._kafka_servers or ""

    def describe_events(self, metadata: ClusterMetadata, events_after: int,
                        timeout_s: float) -> pb.DescribeEventsResponse:
        """The active controller's events after `events_after`, forwarded by the first broker that answers; raises
        ControllerUnavailable when none does or none found a controller."""
        failures = []
        for broker in sorted(metadata.brokers.values()):
            try:
                response = pb_grpc.KafkaClientStub(self._channel(broker)).DescribeEvents(
                    pb.DescribeEventsRequest(events_after=events_after), timeout=timeout_s)
            except grpc.RpcError as e:  # a broker away: another forwards as well
                failures.append(f"broker {broker.node_id}: {e.code().name if isinstance(e, grpc.Call) else e}")
                continue
            if response.error_code != ErrorCode.NONE:
                self._zookeeper = {"servers": [], "error": "no active controller answers"}
                raise ControllerUnavailable(f"no active controller answers ({ErrorCode(response.error_code).name})")
            self._zookeeper = zookeeper_picture(response)
            return response
        self._zookeeper = {"servers": [], "error": "no broker answers"}
        raise ControllerUnavailable("no broker forwards DescribeEvents: " + ", ".join(failures))

    def zookeeper(self) -> dict[str, Any]:
        """ZooKeeper as the last DescribeEvents answer showed it."""
        return self._zookeeper

    def _own_configs(self, broker: BrokerMetadata) -> dict[str, str | None] | None:
        """The broker's DescribeConfigs of itself (a broker describes only its own static configs, as Kafka's)."""
        request = pb.DescribeConfigsRequest(resources=[pb.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=str(broker.node_id))])
        try:
            response = pb_grpc.KafkaClientStub(self._channel(broker)).DescribeConfigs(
                request, timeout=DESCRIBE_CONFIGS_TIMEOUT_S)
        except grpc.RpcError:
            return None
        [result] = response.results
        if result.error_code != ErrorCode.NONE:
            return None
        return {c.name: c.value if c.HasField("value") else None for c in result.configs}

    def _channel(self, broker: BrokerMetadata) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(broker.address)
            if channel is None:
                channel = self._channels[broker.address] = self._security.channel(broker.address)
            return channel
