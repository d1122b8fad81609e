"""Which ports `minibroker cluster up` listens on: the same ones every time, so a script keeps its
`--bootstrap-server`.

- `--port-base N`: ZooKeeper (when `cluster up` starts it) on N, broker <id>'s gRPC listener on N + <id>
  (3 brokers: N+1, N+2, N+3) and its Kafka listener on N + 100 + <id> (N+101, N+102, N+103). Controllers
  take any free port: only brokers reach them, through /controller.
- Else, on a data dir that ran before: each broker's ports from its server.properties' listeners (the first
  one is gRPC's, PLAINTEXT Kafka's; an edit there moves them), else from cluster.json; ZooKeeper's from
  cluster.json.
- Else (a new data dir, a broker id that is new): any free port.

A port that is taken when `cluster up` starts is an error naming it, not a quiet move elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from minibroker.local.cluster_file import ClusterInfo
from zk.server import free_port, port_in_use

MAX_PORT = 65535
# With --port-base N, broker <id>'s Kafka listener is on N + KAFKA_PORT_OFFSET + <id>.
KAFKA_PORT_OFFSET = 100


@dataclass
class PortPlan:
    zookeeper: int  # 0: any free port
    brokers: dict[int, int]  # the gRPC listeners
    chosen: str  # how: "--port-base N", "as before", "free ports"
    kafka: dict[int, int] = field(default_factory=dict)  # the Kafka-protocol listeners


def port_base_problem(base: int, brokers: int) -> str | None:
    """Why `--port-base base` cannot hold ZooKeeper and `brokers` brokers, or None."""
    if base < 1:
        return f"--port-base must be a port number, not {base}"
    last = base + KAFKA_PORT_OFFSET + brokers
    if last > MAX_PORT:
        return (f"--port-base {base} leaves no room for {brokers} brokers: ports {base}..{last} must be at"
                f" most {MAX_PORT}")
    return None


def plan_ports(previous: ClusterInfo | None, broker_ids: Iterable[int], port_base: int | None,
               broker_config: Callable[[int], Path], first_listener: Callable[[Path], tuple[str, int] | None],
               host: str, kafka_listener: Callable[[Path], int | None] = lambda _: None) -> PortPlan:
    ids = list(broker_ids)
    if port_base is not None:
        return PortPlan(port_base, {i: port_base + i for i in ids}, f"--port-base {port_base}",
                        {i: port_base + KAFKA_PORT_OFFSET + i for i in ids})
    recorded = {} if previous is None else {b.id: b.port for b in previous.brokers}
    recorded_kafka = {} if previous is None else {b.id: b.kafka_port for b in previous.brokers}
    brokers = {}
    kafka = {}
    for broker_id in ids:
        listener = first_listener(broker_config(broker_id))
        port = listener[1] if listener is not None and listener[1] else recorded.get(broker_id)
        brokers[broker_id] = port if port is not None else free_port(host)
        kafka_port = kafka_listener(broker_config(broker_id)) or recorded_kafka.get(broker_id)
        kafka[broker_id] = kafka_port if kafka_port is not None else free_port(host)
    zookeeper = 0
    if previous is not None and previous.zookeeper.pid is not None:
        zookeeper = int(previous.zookeeper.connect.rpartition(":")[2])
    reused = previous is not None and (zookeeper or set(recorded) & set(ids))
    return PortPlan(zookeeper, brokers, "as before" if reused else "free ports", kafka)


def taken(plan: PortPlan, host: str) -> list[str]:
    """"broker-2 port 9002"-style names of the planned ports something else listens on now."""
    wanted = [("zookeeper", plan.zookeeper)] if plan.zookeeper else []
    wanted += [(f"broker-{i}", port) for i, port in plan.brokers.items()]
    wanted += [(f"broker-{i} Kafka listener", port) for i, port in plan.kafka.items()]
    return [f"{name} port {port}" for name, port in wanted if port_in_use(host, port)]
