"""The nemesis's schedule and what each fault does to a cluster (a recording fake: the real one is in
tests/integration/chaos_and_audit/test_chaos.py)."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import ClassVar

import pytest

from chaos import nemesis as nemesis_module
from chaos.cluster import ChaosError
from chaos.history import Fault
from chaos.nemesis import (
    DEFAULT_FAULTS,
    FAULTS,
    Nemesis,
    Planned,
    coordinator,
    parse_duration,
    parse_faults,
    schedule,
    txn_coordinator,
)


class RecordingCluster:
    """Leader of every partition: broker-2; active controller: controller-1001; ZooKeeper leader: zookeeper-2.
    Every broker's and the active controller's session is 0x100 + its id until it is cut off from ZooKeeper
    (then, if `expires`, ZooKeeper has expired it). Records every call."""

    def __init__(self, expires: bool = True) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.down: set[str] = set()
        self.cut: set[str] = set()
        self.expires = expires

    bootstrap_servers = "127.0.0.1:1"
    data_dir: Path | None = None
    brokers: ClassVar[list[str]] = ["broker-1", "broker-2", "broker-3"]
    controllers: ClassVar[list[str]] = ["controller-1001", "controller-1002"]
    zookeepers: ClassVar[list[str]] = ["zookeeper-1", "zookeeper-2", "zookeeper-3"]

    def zookeeper_mode(self, name: str) -> str | None:
        return "leader" if name == "zookeeper-2" else "follower"

    def zookeeper_session(self, name: str) -> int | None:
        if name == "controller-1002" or (name in self.cut and self.expires):
            return None
        return 0x100 + int(name.rpartition("-")[2])

    def cut_zookeeper(self, name: str) -> None:
        self.calls.append(("cut", name))
        self.cut.add(name)

    def restore_zookeeper(self, name: str) -> None:
        self.calls.append(("restore", name))
        self.cut.discard(name)

    def active_controller(self) -> str | None:
        return "controller-1001"

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        return {p: (2, (1, 2, 3), (1, 2, 3)) for p in range(3)}

    def running(self, name: str) -> bool:
        return name not in self.down

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        self.calls.append(("kill", name, signal.Signals(signum).name))
        self.down.add(name)

    def start(self, name: str) -> None:
        self.calls.append(("start", name))
        self.down.discard(name)

    def pause(self, name: str) -> None:
        self.calls.append(("pause", name))

    def resume(self, name: str) -> None:
        self.calls.append(("resume", name))

    def isolate(self, name: str, keep_clients: bool) -> None:
        self.calls.append(("isolate", name, str(keep_clients)))

    def heal(self) -> None:
        self.calls.append(("heal",))

    def supports(self, fault: str) -> str | None:
        return None

    def close(self) -> None:
        pass


def test_schedule_is_seeded_and_covers_every_kind_each_round() -> None:
    plan = schedule(DEFAULT_FAULTS, 10.0, 130.0, random.Random(5))
    assert plan == schedule(DEFAULT_FAULTS, 10.0, 130.0, random.Random(5))
    assert [p.at for p in plan] == [10.0 * i for i in range(1, 13)]
    assert sorted(p.fault for p in plan[:6]) == sorted(DEFAULT_FAULTS)
    assert sorted(p.fault for p in plan[6:]) == sorted(DEFAULT_FAULTS)
    assert {p.hold for p in plan if p.fault != "bounce"} == {5.0}
    assert {p.hold for p in plan if p.fault == "bounce"} == {0.0}
    assert schedule(DEFAULT_FAULTS, 10.0, 130.0, random.Random(6)) != plan


def test_schedule_leaves_an_interval_to_heal_before_the_end() -> None:
    assert [p.at for p in schedule(("kill-leader",), 8.0, 25.0, random.Random(0))] == [8.0, 16.0]
    assert schedule(("kill-leader",), 10.0, 15.0, random.Random(0)) == []


def test_parse_faults_and_durations() -> None:
    assert parse_faults("kill-leader, bounce") == ("kill-leader", "bounce")
    with pytest.raises(ValueError, match="unknown fault kill-everything: choose from kill-leader"):
        parse_faults("kill-leader,kill-everything")
    with pytest.raises(ValueError, match=r"unknown fault \(none given\)"):
        parse_faults(" , ")
    assert parse_duration("10s") == 10.0
    assert parse_duration("2m") == 120.0
    assert parse_duration("500ms") == 0.5
    assert parse_duration("7") == 7.0
    with pytest.raises(ValueError, match="not a duration: 'soon'"):
        parse_duration("soon")
    with pytest.raises(ValueError, match="must be positive"):
        parse_duration("0s")


@pytest.mark.parametrize(("fault", "calls"), [
    ("kill-leader", [("kill", "broker-2", "SIGKILL"), ("start", "broker-2")]),
    ("kill-controller", [("kill", "controller-1001", "SIGKILL"), ("start", "controller-1001")]),
    ("pause-leader", [("pause", "broker-2"), ("resume", "broker-2")]),
    ("pause-controller", [("pause", "controller-1001"), ("resume", "controller-1001")]),
    ("partition-leader", [("isolate", "broker-2", "True"), ("heal",)]),
    ("bounce", [("kill", "broker-2", "SIGTERM"), ("start", "broker-2")]),
])
def test_each_fault_and_its_heal(fault: str, calls: list[tuple[str, ...]]) -> None:
    cluster = RecordingCluster()
    recorded: list[Fault] = []
    nemesis = Nemesis(cluster, "t", [Planned(0.0, fault, 0.0 if fault == "bounce" else 0.05)], random.Random(1),
                      recorded.append, quiet=0.0)
    nemesis.start()
    deadline = time.monotonic() + 10
    while not nemesis.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert nemesis.finished and nemesis.error is None
    assert cluster.calls == calls
    assert [(f.fault, f.target) for f in recorded] == [(fault, calls[0][1] if len(calls[0]) > 1 else "")]
    assert recorded[0].end >= recorded[0].start


def test_kill_random_targets_any_broker_or_controller_and_restore_restarts_it() -> None:
    targets = set()
    for seed in range(30):
        cluster = RecordingCluster()
        nemesis = Nemesis(cluster, "t", [], random.Random(seed), lambda _: None, quiet=0.0)
        target = nemesis._begin("kill-random").target
        targets.add(target)
        assert nemesis.restore() == [f"started {target}"]
        assert ("start", target) in cluster.calls
        assert ("heal",) in cluster.calls  # and every other process resumed
        resumed = {c[1] for c in cluster.calls if c[0] == "resume"}
        assert resumed == set(cluster.zookeepers + cluster.brokers + cluster.controllers) - {target}
    assert targets == set(RecordingCluster.brokers + RecordingCluster.controllers)


def test_stop_heals_the_fault_under_way() -> None:
    cluster = RecordingCluster()
    recorded: list[Fault] = []
    nemesis = Nemesis(cluster, "t", [Planned(0.0, "pause-leader", 60.0)], random.Random(1), recorded.append,
                      quiet=0.0)
    nemesis.start()
    deadline = time.monotonic() + 10
    while not cluster.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.stop(timeout=10)
    assert cluster.calls == [("pause", "broker-2"), ("resume", "broker-2")]
    assert len(recorded) == 1


def test_every_fault_is_known() -> None:
    # partition-leader needs network namespaces, kill-coordinator a workload with a consumer group,
    # kill-txn-coordinator one with transactional processors; the ZooKeeper faults are asked for by name
    # (expire-session, like partition-leader, needs root).
    assert set(DEFAULT_FAULTS) == set(FAULTS) - {"partition-leader", "kill-coordinator", "kill-txn-coordinator",
                                                 "kill-zookeeper", "pause-zookeeper", "expire-session"}


def _run_one(cluster: RecordingCluster, fault: str, seed: int = 1,
             group: str | None = None) -> tuple[Nemesis, list[Fault]]:
    recorded: list[Fault] = []
    nemesis = Nemesis(cluster, "t", [Planned(0.0, fault, 0.05)], random.Random(seed), recorded.append, quiet=0.0,
                      group=group)
    nemesis.start()
    deadline = time.monotonic() + 10
    while not nemesis.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert nemesis.finished
    return nemesis, recorded


class OffsetsTopicCluster(RecordingCluster):
    """__consumer_offsets has 50 partitions: broker-1 leads partitions 0 and 22, broker-3 all others.
    (Java: "hello".hashCode() == 99162322, partition 22; "polygenelubricants".hashCode() == Integer.MIN_VALUE,
    which Kafka's Utils.abs maps to 0.)"""

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        if topic != "__consumer_offsets":
            return super().partition_state(topic)
        return {p: (1 if p in (0, 22) else 3, (1, 2, 3), (1, 2, 3)) for p in range(50)}


@pytest.mark.parametrize("group", ["hello", "polygenelubricants"])
def test_kill_coordinator_kills_the_leader_of_the_groups_offsets_partition(group: str) -> None:
    cluster = OffsetsTopicCluster()
    assert coordinator(cluster, group) == "broker-1"
    nemesis, recorded = _run_one(cluster, "kill-coordinator", group=group)
    assert nemesis.error is None
    assert cluster.calls == [("kill", "broker-1", "SIGKILL"), ("start", "broker-1")]
    assert [(f.fault, f.target) for f in recorded] == [("kill-coordinator", "broker-1")]


class TransactionStateCluster(RecordingCluster):
    """__transaction_state has 50 partitions: broker-3 leads partition 22, broker-1 all others; it does not exist
    until `created`."""

    created = True

    def partition_state(self, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        if topic != "__transaction_state":
            return super().partition_state(topic)
        if not self.created:
            raise ChaosError(f"topic {topic!r} does not exist")
        return {p: (3 if p == 22 else 1, (1, 2, 3), (1, 2, 3)) for p in range(50)}


def test_kill_txn_coordinator_kills_the_leader_of_the_ids_transaction_state_partition() -> None:
    cluster = TransactionStateCluster()
    assert txn_coordinator(cluster, "hello") == "broker-3"  # "hello".hashCode() % 50 == 22
    recorded: list[Fault] = []
    nemesis = Nemesis(cluster, "t", [Planned(0.0, "kill-txn-coordinator", 0.05)], random.Random(1), recorded.append,
                      quiet=0.0, transactional_ids=["hello"])
    nemesis.start()
    deadline = time.monotonic() + 10
    while not nemesis.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert nemesis.error is None
    assert cluster.calls == [("kill", "broker-3", "SIGKILL"), ("start", "broker-3")]
    assert [(f.fault, f.target) for f in recorded] == [("kill-txn-coordinator", "broker-3")]
    cluster.created = False
    assert txn_coordinator(cluster, "hello") is None


def test_kill_txn_coordinator_without_processors_is_an_error() -> None:
    nemesis = Nemesis(TransactionStateCluster(), "t", [], random.Random(1), lambda _: None, quiet=0.0)
    with pytest.raises(ChaosError, match="kill-txn-coordinator needs the workload's transactional processors"):
        nemesis._begin("kill-txn-coordinator")


def test_kill_coordinator_without_a_group_is_an_error() -> None:
    nemesis = Nemesis(OffsetsTopicCluster(), "t", [], random.Random(1), lambda _: None, quiet=0.0)
    with pytest.raises(ChaosError, match="kill-coordinator needs the workload's consumer group"):
        nemesis._begin("kill-coordinator")


@pytest.mark.parametrize(("fault", "act", "undo"), [("kill-zookeeper", "kill", "start"),
                                                     ("pause-zookeeper", "pause", "resume")])
def test_zookeeper_faults_hit_the_leader_or_a_follower_by_their_modes(fault: str, act: str, undo: str) -> None:
    seen = set()
    for seed in range(20):
        cluster = RecordingCluster()
        nemesis, recorded = _run_one(cluster, fault, seed)
        assert nemesis.error is None
        target = recorded[0].target
        assert cluster.calls[0][:2] == (act, target) and cluster.calls[1] == (undo, target)
        mode = cluster.zookeeper_mode(target)
        assert recorded[0].detail.startswith(f"was {mode};")
        seen.add(mode)
    assert seen == {"leader", "follower"}


def test_expire_session_cuts_a_session_holder_until_zookeeper_expires_it() -> None:
    targets = set()
    for seed in range(20):
        cluster = RecordingCluster()
        nemesis, recorded = _run_one(cluster, "expire-session", seed)
        assert nemesis.error is None
        target = recorded[0].target
        assert cluster.calls == [("cut", target), ("restore", target)]
        assert f"session 0x{0x100 + int(target.rpartition('-')[2]):x} cut off; done after" in recorded[0].detail
        targets.add(target)
    # Brokers and the active controller; never the standby, which holds no session.
    assert targets == {"broker-1", "broker-2", "broker-3", "controller-1001"}


def test_a_session_that_never_expires_fails_the_nemesis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nemesis_module, "SESSION_EXPIRY_WAIT_S", 0.2)
    cluster = RecordingCluster(expires=False)
    nemesis, recorded = _run_one(cluster, "expire-session")
    assert isinstance(nemesis.error, ChaosError) and "did not expire" in str(nemesis.error)
    assert cluster.calls[-1][0] == "restore"  # healed all the same
    assert "the session did not expire" in recorded[0].detail
