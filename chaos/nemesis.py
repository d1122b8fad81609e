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
    kill-txn-coordinator
                      SIGKILL the broker coordinating a transactional processor's transactions (the leader of its
                      transactional id's __transaction_state partition); start it again
    kill-zookeeper    SIGKILL one ZooKeeper server, the leader or a follower (a coin toss, then each server's mode
                      asked); start it again (it rejoins the quorum). The one server of a single-node ZooKeeper:
                      nothing can change (no election, no ISR change) until it is back, nothing acknowledged is lost
    pause-zookeeper   SIGSTOP one ZooKeeper server, chosen so; SIGCONT
    expire-session    cut one broker's or the active controller's ZooKeeper traffic (and only that) until ZooKeeper
                      has expired its session (its ephemeral znode gone), while the process runs on: the zombie;
                      then restore it, and the process finds its session expired and starts a new one

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
from broker.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.transaction_state_manager import partition_for as txn_partition_for
from chaos.cluster import ChaosCluster, ChaosError, broker_name
from chaos.history import Fault

FAULTS = ("kill-leader", "kill-controller", "kill-random", "pause-leader", "pause-controller", "partition-leader",
          "bounce", "kill-coordinator", "kill-txn-coordinator", "kill-zookeeper", "pause-zookeeper", "expire-session")
# Longest suffix first: "ms" before "s" and "m".
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DEFAULT_FAULTS = ("kill-leader", "kill-controller", "kill-random", "pause-leader", "pause-controller", "bounce")
# How long expire-session waits, past its hold, for ZooKeeper to expire the session: several session timeouts.
SESSION_EXPIRY_WAIT_S = 60.0
_POLL_S = 0.2


@dataclass(frozen=True)
class Injected:
    """A fault under way: what it hit, how to undo it, and (expire-session) what must hold before it may be undone."""

    target: str
    undo: Callable[[], None]
    note: str = ""
    done: Callable[[], bool] | None = None


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


def txn_coordinator(cluster: ChaosCluster, transactional_id: str) -> str | None:
    """The broker coordinating `transactional_id`: the leader of __transaction_state partition
    abs(hashCode(id)) % its partition count (None while it has none, or the topic does not exist yet)."""
    try:
        states = cluster.partition_state(TRANSACTION_STATE_TOPIC_NAME)
    except ChaosError:  # not created yet: no processor has initialized
        return None
    leader = states[txn_partition_for(transactional_id, len(states))][0]
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
                 group: str | None = None, transactional_ids: Sequence[str] = ()) -> None:
        self._group = group
        self._transactional_ids = list(transactional_ids)
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
        injected = self._begin(planned.fault)
        target = injected.target
        start = time.time()
        self._report(f"nemesis: {planned.fault} {target}" + (f" ({injected.note})" if injected.note else ""))
        notes = [injected.note] if injected.note else []
        failure = None
        try:
            self._stop.wait(planned.hold)
            if injected.done is not None:
                failure = self._wait_done(injected.done, start)
                notes.append(failure or f"done after {time.time() - start:.1f} s")
                # The zombie lives on a while: its leaderships are moved away while clients still reach it.
                self._stop.wait(planned.hold / 2)
        finally:
            # As Jepsen draws it, the window ends when the heal begins; how long healing took is in the detail.
            # A fault without a hold (bounce) is its restart: its window ends when the restart has.
            healing = time.time()
            injected.undo()
            healed = time.time()
            end = healed if planned.hold == 0 else healing
            fault = Fault(planned.fault, target, start, end, "; ".join([*notes, f"healed in {healed - healing:.1f} s"]))
            self._record(fault)
            self._report(f"nemesis: healed {planned.fault} {target} ({fault.detail})")
        if failure is not None:
            raise ChaosError(f"{planned.fault} {target}: {failure}")

    def _wait_done(self, done: Callable[[], bool], start: float) -> str | None:
        """None once `done()` holds; else (the run stopping, or SESSION_EXPIRY_WAIT_S gone by) why not."""
        deadline = time.monotonic() + SESSION_EXPIRY_WAIT_S
        while not done():
            if self._stop.is_set():
                return None if done() else "the run ended before the session expired"
            if time.monotonic() >= deadline:
                return f"the session did not expire in {time.time() - start:.0f} s"
            time.sleep(_POLL_S)
        return None

    def _begin(self, fault: str) -> Injected:
        """Inject `fault`; returns its target and how to undo it."""
        cluster = self._cluster
        if fault in ("kill-leader", "kill-controller", "kill-random", "kill-coordinator", "kill-txn-coordinator"):
            target = {"kill-leader": self._leader, "kill-controller": self._controller,
                      "kill-random": self._any_process, "kill-coordinator": self._coordinator,
                      "kill-txn-coordinator": self._txn_coordinator}[fault]()
            cluster.kill(target, signal.SIGKILL)
            return Injected(target, lambda: cluster.start(target))
        if fault in ("pause-leader", "pause-controller"):
            target = self._leader() if fault == "pause-leader" else self._controller()
            cluster.pause(target)
            return Injected(target, lambda: cluster.resume(target))
        if fault == "partition-leader":
            target = self._leader()
            cluster.isolate(target, keep_clients=True)
            return Injected(target, cluster.heal)
        if fault == "bounce":
            target = self._leader()
            cluster.kill(target, signal.SIGTERM)
            return Injected(target, lambda: cluster.start(target))
        if fault in ("kill-zookeeper", "pause-zookeeper"):
            target, mode = self._zookeeper_server()
            if fault == "kill-zookeeper":
                cluster.kill(target, signal.SIGKILL)
                return Injected(target, lambda: cluster.start(target), f"was {mode}")
            cluster.pause(target)
            return Injected(target, lambda: cluster.resume(target), f"was {mode}")
        if fault == "expire-session":
            target, session = self._session_holder()
            cluster.cut_zookeeper(target)
            return Injected(target, lambda: cluster.restore_zookeeper(target), f"session 0x{session:x} cut off",
                            lambda: cluster.zookeeper_session(target) != session)
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

    def _txn_coordinator(self) -> str:
        if not self._transactional_ids:
            raise ChaosError("kill-txn-coordinator needs the workload's transactional processors")
        transactional_id = self._rng.choice(self._transactional_ids)
        return txn_coordinator(self._cluster, transactional_id) or self._rng.choice(self._cluster.brokers)

    def _controller(self) -> str:
        return self._cluster.active_controller() or self._rng.choice(self._cluster.controllers)

    def _any_process(self) -> str:
        return self._rng.choice(self._cluster.brokers + self._cluster.controllers)

    def _zookeeper_server(self) -> tuple[str, str]:
        """A ZooKeeper server and its mode: the leader or a follower, as a coin toss says (the one server of a
        single-node ZooKeeper whatever it says)."""
        servers = self._cluster.zookeepers
        if not servers:
            raise ChaosError("the cluster has no ZooKeeper server of its own to act on")
        modes = {name: self._cluster.zookeeper_mode(name) or "not serving" for name in servers}
        wanted = self._rng.choice(("leader", "follower"))
        name = self._rng.choice([n for n in servers if modes[n] == wanted] or servers)
        return name, modes[name]

    def _session_holder(self) -> tuple[str, int]:
        """A broker registered in ZooKeeper or the active controller, and the session that holds its znode."""
        cluster = self._cluster
        candidates = [name for name in [*cluster.brokers, cluster.active_controller()] if name is not None]
        sessions = {name: session for name in candidates if (session := cluster.zookeeper_session(name))}
        if not sessions:
            raise ChaosError("no broker is registered and no controller is active: no session to expire")
        name = self._rng.choice(sorted(sessions))
        return name, sessions[name]
    def restore(self) -> list[str]:
        """After the run: undo every cut and pause, start whatever is not running. Returns what it did."""
        cluster = self._cluster
        done = []
        cluster.heal()
        # ZooKeeper first: the brokers and controllers started after it need it.
        for name in cluster.zookeepers + cluster.brokers + cluster.controllers:
            if cluster.running(name):
                cluster.resume(name)
            else:
                cluster.start(name)
                done.append(f"started {name}")
        return done
