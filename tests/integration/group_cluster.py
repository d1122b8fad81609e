"""One real three-broker cluster per test module, for the consumer-group tests: `minibroker cluster up`'s own
library (ZooKeeper, a controller, three brokers with both listeners), SIGKILLed at the module's end whatever
happened. Knows which broker coordinates a group (ZooKeeper's leader of its __consumer_offsets partition) and
what a group looks like through a real client (confluent-kafka's DescribeConsumerGroups)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, NewTopic

from chaos.cluster import LocalChaosCluster, node_id
from chaos.nemesis import coordinator
from local_cluster.cluster import LocalCluster

# Fail over in seconds (a dead broker's ZooKeeper session ends after 6 s), and a new group's first
# rebalance at once rather than after Kafka's 3 s wait for more members.
GROUP_OVERRIDES = (
    "zookeeper.session.timeout.ms=6000",
    "replica.lag.time.max.ms=5000",
    "replica.socket.timeout.ms=3000",
    "replica.fetch.wait.max.ms=100",
    "group.initial.rebalance.delay.ms=0",
)


@dataclass
class GroupCluster:
    local: LocalCluster
    view: LocalChaosCluster

    @property
    def bootstrap(self) -> str:
        """The Kafka listeners."""
        return self.view.kafka_bootstrap_servers

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        admin = self.admin()  # held until the answer: a destroyed handle fails its futures
        admin.create_topics([NewTopic(name, partitions, 3, config=config or {})],
                            operation_timeout=30)[name].result(timeout=60)

    def coordinator(self, group: str) -> int:
        """The broker id ZooKeeper names leader of the group's __consumer_offsets partition (-1: none yet)."""
        name = coordinator(self.view, group)
        return -1 if name is None else node_id(name)

    def describe(self, group: str) -> ConsumerGroupDescription:
        """DescribeConsumerGroups through librdkafka (FindCoordinator, then the coordinator's answer)."""
        admin = self.admin()
        return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)

    def wait_stable(self, group: str, members: int, timeout: float = 60.0,
                    covering: tuple[str, int] | None = None) -> ConsumerGroupDescription:
        """The group Stable with `members` members and, with covering=(topic, partitions), an assignment that
        gives each of the topic's partitions to one member: a leader whose metadata did not have the topic yet
        assigns nothing, and rejoins once it does (kafka-python's leader does)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = self.describe(group)
            except Exception as e:  # a coordinator moving answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
                last = e
            else:
                if (last.state == ConsumerGroupState.STABLE and len(last.members) == members
                        and (covering is None or covers_once(assignments(last, covering[0]), covering[1]))):
                    return last
            time.sleep(0.1)
        if isinstance(last, ConsumerGroupDescription):
            last = (last.state, [(m.client_id, m.member_id, m.assignment.topic_partitions) for m in last.members])
        wanted = f"{members} members" + (f" covering {covering[0]}'s {covering[1]} partitions" if covering else "")
        raise AssertionError(f"group {group} not Stable with {wanted} after {timeout} s: {last}")

    def kill(self, broker_id: int) -> None:
        self.local.send_signal(f"broker-{broker_id}", signal.SIGKILL)

    def restart(self, broker_id: int) -> None:
        self.local.restart_broker(broker_id, timeout=60)


@contextmanager
def group_cluster(data_dir: Path, overrides: tuple[str, ...] = ()) -> Iterator[GroupCluster]:
    local = LocalCluster(data_dir)
    try:
        local.up(brokers=3, controllers=1, overrides=[*GROUP_OVERRIDES, *overrides], timeout=90)
        view = LocalChaosCluster(local)
        try:
            yield GroupCluster(local, view)
        finally:
            view.close()
    finally:
        local.down(kill=True)


def assignments(description: ConsumerGroupDescription, topic: str) -> dict[str, list[int]]:
    """member id -> the partitions of `topic` the group's leader assigned that member."""
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic)
            for m in description.members}


def covers_once(assigned: dict[str, list[int]], partitions: int) -> bool:
    """Every partition assigned to exactly one member."""
    return sorted(p for held in assigned.values() for p in held) == list(range(partitions))
