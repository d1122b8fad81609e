"""The nemesis: faults on a schedule, one at a time, each healed before the next, every window recorded.

    kill-leader       SIGKILL the leader of a random partition; start it again when the window ends
    kill-controller   SIGKILL the active controller; start it again
    kill-random       SIGKILL a random broker or controller; start it again
    pause-leader      SIGSTOP the leader of a random partition; SIGCONT
    pause-controller  SIGSTOP the active controller; SIGCONT
    partition-leader  cut the leader of a random partition off from its peers and ZooKeeper, not from clients; heal
    bounce            SIGTERM the leader of a random partition (a controlled shutdown) and start it again at once
    kill-coordinator  SIGKILL the broker coordinating the workload's consumer group (the leader of its
                      __consumer_offsets partition); start it again

One fault at a time is the failure model Kafka promises to survive (any single broker or the
controller), so no acknowledged record may be lost whatever the schedule. The schedule and every
random choice come from one seeded Random: the same seed against the same cluster state picks the
same faults and targets.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, partition_for
from chaos.cluster import ChaosCluster, ChaosError, broker_name
from chaos.history import Fault

FAULTS = ("kill-leader", "kill-controller", "kill-random", "pause-leader", "pause-controller", "partition-leader",
          "bounce", "kill-coordinator")
# Longest suffix first: "ms" before "s" and "m".
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DEFAULT_FAULTS = ("kill-leader", "kill-controller", "kill-random", "pause-leader", "pause-controller", "bounce")


@dataclass(frozen=True)
class Planned:
    at: float  # seconds after the nemesis starts
    fault: str
    hold: float  # seconds the fault lasts before it heals (0 for bounce: its window is the restart itself)


def coordinator(cluster: ChaosCluster, group: str) -> str | None:
    """The broker coordinating `group`: the leader of __consumer_offsets partition abs(hashCode(group)) % its
    partition count, as ZooKeeper has it (None while that partition has no leader)."""
    states = cluster.partition_state(GROUP_METADATA_TOPIC_NAME)
    leader = states[partition_for(group, len(states))][0]
    return broker_name(leader) if leader >= 0 else None


def parse_faults(text: str) -> tuple[str, ...]:
    faults = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = [f for f in faults if f not in FAULTS]
    if not faults or unknown:
        raise ValueError(f"unknown fault {', '.join(unknown) or '(none given)'}: choose from {', '.join(FAULTS)}")
    return faults


def schedule(faults: Sequence[str], interval: float, duration: float, rng: random.Random) -> list[Planned]:
    """A fault every `interval` seconds, the first after one quiet interval (the workload's baseline), each held
    for half an interval, and none starting later than one interval before the end (time to heal in the run).
    Kinds come in rounds, each kind once per round in a random order: a short run still sees every kind."""
    plan: list[Planned] = []
    kinds = list(dict.fromkeys(faults))
    at = interval
    while at + interval <= duration + 1e-9:
        if len(plan) % len(kinds) == 0:
            rng.shuffle(kinds)
        fault = kinds[len(plan) % len(kinds)]
        plan.append(Planned(at, fault, 0.0 if fault == "bounce" else interval / 2))
        at += interval
    return plan


def parse_duration(text: str) -> float:
    """Seconds from "90", "90s", "2m" or "500ms"."""
    text = text.strip()
    suffix = next((s for s in _DURATION_UNITS if text.endswith(s)), "")
    number, scale = text[: len(text) - len(suffix)], _DURATION_UNITS.get(suffix, 1.0)
    try:
        value = float(number) * scale
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (say 10s, 2m or 500ms)") from None
    if value <= 0:
        raise ValueError(f"a duration must be positive, not {text!r}")
    return value


class Nemesis:
    def __init__(self, cluster: ChaosCluster, topic: str, plan: Sequence[Planned], rng: random.Random,
                 record: Callable[[Fault], None], quiet: float, report: Callable[[str], None] = lambda _: None,
                 group: str | None = None) -> None:
        self._group = group
        self._quiet = quiet
        self._cluster = cluster
        self._topic = topic
        self._plan = list(plan)
        self._rng = rng
        self._record = record
        self._report = report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._started = 0.0
        self.error: BaseException | None = None

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """No new fault; the one under way heals (a restart may take a while: hence `timeout`)."""
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise ChaosError(f"the nemesis did not heal its last fault within {timeout:g} s")

    @property
    def finished(self) -> bool:
        """Every planned fault injected and healed (or the nemesis stopped or failed)."""
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            quiet_until = 0.0
            for planned in self._plan:
                # A slow heal (a restart) pushes the schedule back: every fault gets a quiet half interval after
                # it, so the cluster is seen recovering before the next one.
                at = max(self._started + planned.at, quiet_until)
                if self._stop.wait(max(at - time.monotonic(), 0.0)):
                    return
                self._inject(planned)
                quiet_until = time.monotonic() + self._quiet
        except BaseException as e:  # surfaced by the runner, which stops the run with it
            self.error = e

    def _inject(self, planned: Planned) -> None:
        target, undo = self._begin(planned.fault)
        start = time.time()
        self._report(f"nemesis: {planned.fault} {target}")
        try:
            self._stop.wait(planned.hold)
        finally:
            # As Jepsen draws it, the window ends when the heal begins; how long healing took is in the detail.
            # A fault without a hold (bounce) is its restart: its window ends when the restart has.
            healing = time.time()
            undo()
            healed = time.time()
            end = healed if planned.hold == 0 else healing
            fault = Fault(planned.fault, target, start, end, f"healed in {healed - healing:.1f} s")
            self._record(fault)
            self._report(f"nemesis: healed {planned.fault} {target} ({fault.detail})")

    def _begin(self, fault: str) -> tuple[str, Callable[[], None]]:
        """Inject `fault`; returns its target and how to undo it."""
        cluster = self._cluster
        if fault in ("kill-leader", "kill-controller", "kill-random", "kill-coordinator"):
            target = {"kill-leader": self._leader, "kill-controller": self._controller,
                      "kill-random": self._any_process, "kill-coordinator": self._coordinator}[fault]()
            cluster.kill(target, signal.SIGKILL)
            return target, lambda: cluster.start(target)
        if fault in ("pause-leader", "pause-controller"):
            target = self._leader() if fault == "pause-leader" else self._controller()
            cluster.pause(target)
            return target, lambda: cluster.resume(target)
        if fault == "partition-leader":
            target = self._leader()
            cluster.isolate(target, keep_clients=True)
            return target, cluster.heal
        if fault == "bounce":
            target = self._leader()
            cluster.kill(target, signal.SIGTERM)
            return target, lambda: cluster.start(target)
        raise ChaosError(f"unknown fault {fault!r}")

    def _leader(self) -> str:
        states = self._cluster.partition_state(self._topic)
        partition = self._rng.choice(sorted(states))
        leader = states[partition][0]
        return broker_name(leader) if leader >= 0 else self._rng.choice(self._cluster.brokers)

    def _coordinator(self) -> str:
        if self._group is None:
            raise ChaosError("kill-coordinator needs the workload's consumer group")
        return coordinator(self._cluster, self._group) or self._rng.choice(self._cluster.brokers)

    def _controller(self) -> str:
        return self._cluster.active_controller() or self._rng.choice(self._cluster.controllers)

    def _any_process(self) -> str:
        return self._rng.choice(self._cluster.brokers + self._cluster.controllers)

    def restore(self) -> list[str]:
        """After the run: undo every cut and pause, start whatever is not running. Returns what it did."""
        cluster = self._cluster
        done = []
        cluster.heal()
        for name in cluster.brokers + cluster.controllers:
            if cluster.running(name):
                cluster.resume(name)
            else:
                cluster.start(name)
                done.append(f"started {name}")
        return done
