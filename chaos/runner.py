"""One chaos run, start to verdict: workload and nemesis for `duration`, then heal, recover, read, check, audit.

    1. create the topic (RF=3, min.insync.replicas=2), start readers, then writers
    2. the nemesis injects its schedule while the writers write
    3. at `duration`: the nemesis heals its fault, writers stop and wait for their answers
    4. restore (SIGCONT, start what is down, heal cuts), wait for a full ISR on every partition
    5. readers read on to the end offsets; a final read of every partition from the beginning
    6. check the history (chaos/checker.py), run the Spark audit (chaos/audit.py), write the report
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos.clients import library
from chaos.cluster import ChaosCluster, ChaosError
from chaos.history import HistoryWriter, Recovered
from chaos.nemesis import Nemesis, schedule
from chaos.workload import Reader, WorkloadConfig, Writer, create_topic, end_offsets, final_read

HISTORY_FILE = "history.jsonl"


@dataclass(frozen=True)
class RunConfig:
    faults: tuple[str, ...]
    interval: float = 10.0
    duration: float = 120.0
    seed: int = 0
    client: str = "minibroker"  # the writers' and readers' library: a name from chaos.clients.CLIENTS
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    recovery_timeout: float = 90.0  # for a full ISR after the run
    flush_timeout: float = 35.0  # for writers' last answers: past delivery.timeout.ms, every send has one


def run(cluster: ChaosCluster, config: RunConfig, output: Path, report: Callable[[str], None]) -> Path:
    """Run the workload and the nemesis against `cluster`; returns the history file."""
    for fault in config.faults:
        why = cluster.supports(fault)
        if why is not None:
            raise ChaosError(why)
    output.mkdir(parents=True, exist_ok=True)
    workload = config.workload
    history = HistoryWriter(output / HISTORY_FILE)
    rng = random.Random(config.seed)
    plan = schedule(config.faults, config.interval, config.duration, rng)
    bootstrap = cluster.bootstrap_servers
    client = library(config.client)
    # Kafka clients on the Kafka listeners; topic creation, end offsets and the final read stay on gRPC.
    client_bootstrap = cluster.kafka_bootstrap_servers if client.kafka_protocol else bootstrap
    if not client_bootstrap:
        raise ChaosError(f"--client {config.client} needs the brokers' Kafka listeners, and the cluster records none"
                         " (a cluster.json from before they existed?): start the cluster again")
    nemesis: Nemesis | None = None
    restored: list[str] | None = None
    try:
        create_topic(bootstrap, workload)
        started = time.time()
        history.meta(topic=workload.topic, partitions=workload.partitions,
                     replication_factor=workload.replication_factor,
                     min_insync_replicas=workload.min_insync_replicas, writers=workload.writers,
                     acks1_writer=workload.acks1_writer, consumers=workload.readers, rate=workload.rate,
                     faults=list(config.faults), interval=config.interval, duration=config.duration,
                     seed=config.seed, bootstrap_servers=bootstrap, client=config.client,
                     client_bootstrap_servers=client_bootstrap,
                     data_dir=None if cluster.data_dir is None else str(cluster.data_dir), start=started)
        report(f"chaos: topic {workload.topic!r} ({workload.partitions} partitions, RF {workload.replication_factor},"
               f" min.insync.replicas {workload.min_insync_replicas}); {len(plan)} faults over"
               f" {config.duration:g} s, seed {config.seed}; {client.name} clients at {client_bootstrap}")
        readers = [Reader(f"c{i}", client, client_bootstrap, workload, history) for i in range(workload.readers)]
        writers = [Writer(f"w{i}", client, client_bootstrap, workload, history) for i in range(workload.writers)]
        if workload.acks1_writer:
            writers.append(Writer("a1", client, client_bootstrap, workload, history, acks="1"))
        for reader in readers:
            reader.start()
        for writer in writers:
            writer.start()
        nemesis = Nemesis(cluster, workload.topic, plan, rng, history.write, config.interval / 2, report)
        nemesis.start()
        # Slow heals (restarts) push the schedule back; the run then goes on until every planned fault has
        # happened, up to one more `duration`.
        deadline = started + config.duration
        while nemesis.error is None and (time.time() < deadline or not nemesis.finished) \
                and time.time() < deadline + config.duration:
            time.sleep(0.2)
        nemesis.stop(timeout=config.recovery_timeout)
        writers_stopped = time.time()
        for writer in writers:
            writer.stop(config.flush_timeout)
        history.meta(end=writers_stopped)
        report("chaos: writers stopped; restoring the cluster")
        restored = nemesis.restore()
        full, detail = _wait_full_isr(cluster, workload.topic, config.recovery_timeout)
        history.write(Recovered(time.time(), full, "; ".join([*restored, detail])))
        report(f"chaos: {detail}")
        targets = end_offsets(bootstrap, workload)
        for reader in readers:
            reader.finish(targets, timeout=60)
        unread = final_read(bootstrap, workload, targets, history, timeout=60)
        notes = [f"{r.name} did not read up to the end offsets" for r in readers if not r.caught_up]
        notes += [f"final read could not reach the end of partition {p}" for p in unread]
        errors = [w.error for w in writers if w.error is not None]
        if nemesis.error is not None:
            errors.insert(0, nemesis.error)
        history.meta(notes=notes, errors=[repr(e) for e in errors])
        if nemesis.error is not None:
            raise ChaosError(f"the nemesis failed: {nemesis.error}") from nemesis.error
    finally:
        if nemesis is not None and restored is None:
            # Interrupted (Ctrl-C, an error): a user's cluster must not be left with a paused or dead process.
            with contextlib.suppress(Exception):
                nemesis.stop(timeout=config.recovery_timeout)
                nemesis.restore()
        history.close()
    return history.path


def _wait_full_isr(cluster: ChaosCluster, topic: str, timeout: float) -> tuple[bool, str]:
    started = time.monotonic()
    deadline = started + timeout
    while True:
        states = cluster.partition_state(topic)
        lagging = [f"{topic}-{p} (leader {leader}, isr {list(isr)}, replicas {list(replicas)})"
                   for p, (leader, replicas, isr) in sorted(states.items())
                   if leader < 0 or set(isr) != set(replicas)]
        if not lagging:
            return True, f"full ISR on every partition {time.monotonic() - started:.1f} s after the run"
        if time.monotonic() >= deadline:
            return False, f"no full ISR after {timeout:g} s: {', '.join(lagging)}"
        time.sleep(0.2)
