"""Which ports `minibroker cluster up` listens on: the same ones every time, so a script keeps its
`--bootstrap-server`.

- `--port-base N`: ZooKeeper (when `cluster up` starts it) on N, broker <id>'s gRPC listener on N + <id>
  (3 brokers: N+1, N+2, N+3) and its Kafka listener on N + 100 + <id> (N+101, N+102, N+103); an ensemble's
  member <i> on N + 200 + <i> (N+201, N+202, N+203: client ports; its quorum and election ports are free
  ones, which only the members use). Controllers take any free port: only brokers reach them, through
  /controller.
- Else, on a data dir that ran before: each broker's ports from its server.properties' listeners (the first
  one is gRPC's, PLAINTEXT Kafka's; an edit there moves them), else from cluster.json; ZooKeeper's (each
  member's client port) from cluster.json.
- Else (a new data dir, a broker id that is new): any free port; or, for `minibroker demo`, Kafka's
  well-known ports as docker-compose.yml publishes them (broker <id>'s Kafka listener on 9091 + <id>, its gRPC
  listener on 9191 + <id>, ZooKeeper on 2181) where they are free, and a free port, named in PortPlan.moved,
  for each one that is taken: so `kcat -b localhost:9092` works as a Kafka user types it.

A port that is taken when `cluster up` starts is an error naming it, not a quiet move elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from local_cluster.cluster_file import ClusterInfo
from zk.server import free_port, port_in_use

MAX_PORT = 65535
# With --port-base N, broker <id>'s Kafka listener is on N + KAFKA_PORT_OFFSET + <id>.
KAFKA_PORT_OFFSET = 100
# With --port-base N, ZooKeeper ensemble member <i>'s client port is N + ZOOKEEPER_MEMBER_PORT_OFFSET + <i>.
ZOOKEEPER_MEMBER_PORT_OFFSET = 200
# Kafka's well-known ports (docker-compose.yml publishes the same): broker <id>'s Kafka listener on
# KAFKA_WELL_KNOWN_PORT - 1 + <id> (9092, 9093, ...), its gRPC listener on GRPC_WELL_KNOWN_PORT - 1 + <id>.
KAFKA_WELL_KNOWN_PORT = 9092
GRPC_WELL_KNOWN_PORT = 9192
ZOOKEEPER_WELL_KNOWN_PORT = 2181


@dataclass
class PortPlan:
    zookeeper: int  # 0: any free port
    brokers: dict[int, int]  # the gRPC listeners
    chosen: str  # how: "--port-base N", "as before", "free ports"
    kafka: dict[int, int] = field(default_factory=dict)  # the Kafka-protocol listeners
    # An ensemble's members' client ports (member id: port, 0: any free port); empty for one server.
    zookeeper_members: dict[int, int] = field(default_factory=dict)
    # Well-known ports that were taken, and the free ones chosen instead: "broker-1 Kafka listener 9092: 24013".
    moved: list[str] = field(default_factory=list)


def port_base_problem(base: int, brokers: int, zookeeper_nodes: int = 1) -> str | None:
    """Why `--port-base base` cannot hold ZooKeeper and `brokers` brokers, or None."""
    if base < 1:
        return f"--port-base must be a port number, not {base}"
    last = base + max(KAFKA_PORT_OFFSET + brokers,
                      ZOOKEEPER_MEMBER_PORT_OFFSET + zookeeper_nodes if zookeeper_nodes > 1 else 0)
    if last > MAX_PORT:
        servers = f" and {zookeeper_nodes} ZooKeeper servers" if zookeeper_nodes > 1 else ""
        return (f"--port-base {base} leaves no room for {brokers} brokers{servers}: ports {base}..{last} must be at"
                f" most {MAX_PORT}")
    return None


def plan_ports(previous: ClusterInfo | None, broker_ids: Iterable[int], port_base: int | None,
               broker_config: Callable[[int], Path], first_listener: Callable[[Path], tuple[str, int] | None],
               host: str, kafka_listener: Callable[[Path], int | None] = lambda _: None,
               zookeeper_nodes: int = 1, well_known: bool = False) -> PortPlan:
    ids = list(broker_ids)
    members = range(1, zookeeper_nodes + 1) if zookeeper_nodes > 1 else range(0)
    if port_base is not None:
        return PortPlan(0 if members else port_base, {i: port_base + i for i in ids}, f"--port-base {port_base}",
                        {i: port_base + KAFKA_PORT_OFFSET + i for i in ids},
                        {i: port_base + ZOOKEEPER_MEMBER_PORT_OFFSET + i for i in members})
    recorded = {} if previous is None else {b.id: b.port for b in previous.brokers}
    recorded_kafka = {} if previous is None else {b.id: b.kafka_port for b in previous.brokers}
    moved: list[str] = []

    def new_port(name: str, well_known_port: int) -> int:
        if not well_known:
            return free_port(host)
        if not port_in_use(host, well_known_port):
            return well_known_port
        port = free_port(host)
        moved.append(f"{name} {well_known_port}: {port}")
        return port

    brokers = {}
    kafka = {}
    for broker_id in ids:
        listener = first_listener(broker_config(broker_id))
        port = listener[1] if listener is not None and listener[1] else recorded.get(broker_id)
        brokers[broker_id] = (port if port is not None
                              else new_port(f"broker-{broker_id}", GRPC_WELL_KNOWN_PORT - 1 + broker_id))
        kafka_port = kafka_listener(broker_config(broker_id)) or recorded_kafka.get(broker_id)
        kafka[broker_id] = (kafka_port if kafka_port is not None
                            else new_port(f"broker-{broker_id} Kafka listener", KAFKA_WELL_KNOWN_PORT - 1 + broker_id))
    zookeeper = 0
    if previous is not None and previous.zookeeper.pid is not None and not members:
        zookeeper = int(previous.zookeeper.connect.rpartition(":")[2])
    elif well_known and not members:
        zookeeper = new_port("zookeeper", ZOOKEEPER_WELL_KNOWN_PORT)
    recorded_members = {} if previous is None else {m.id: m.client_port for m in previous.zookeeper.members}
    zookeeper_members = {i: recorded_members.get(i, 0) for i in members}
    reused = previous is not None and (zookeeper or any(zookeeper_members.values()) or set(recorded) & set(ids))
    chosen = "as before" if reused else "Kafka's well-known ports" if well_known else "free ports"
    return PortPlan(zookeeper, brokers, chosen, kafka, zookeeper_members, moved)


def taken(plan: PortPlan, host: str) -> list[str]:
    """"broker-2 port 9002"-style names of the planned ports something else listens on now."""
    wanted = [("zookeeper", plan.zookeeper)] if plan.zookeeper else []
    wanted += [(f"zookeeper-{i}", port) for i, port in plan.zookeeper_members.items() if port]
    wanted += [(f"broker-{i}", port) for i, port in plan.brokers.items()]
    wanted += [(f"broker-{i} Kafka listener", port) for i, port in plan.kafka.items()]
    return [f"{name} port {port}" for name, port in wanted if port_in_use(host, port)]
