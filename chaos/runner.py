"""One chaos run, start to verdict: workload and nemesis for `duration`, then heal, recover, read, check, audit.

    1. create the topic (RF=3, min.insync.replicas=2), start readers, then writers
    2. the nemesis injects its schedule while the writers write
    3. at `duration`: the nemesis heals its fault, writers stop and wait for their answers
    4. restore (SIGCONT, start what is down, heal cuts), wait for a full ISR on every partition
    5. readers (and the group's members, and the transactional processors) read on to the end offsets; a final
       read of every partition from the beginning, the group's committed offsets read back, and the
       transactional output read with read_committed and read_uncommitted
    6. check the history (chaos/checker.py), run the Spark audit (chaos/audit.py), write the report
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.client_logs import CLIENT_LOG_FILE, client_logs
from chaos.clients import ClientLibrary, GroupSettings, library
from chaos.cluster import ChaosCluster, ChaosError
from chaos.group_workload import GroupMember, GroupProgress, read_final_committed
from chaos.history import HistoryWriter, Recovered
from chaos.nemesis import Nemesis, schedule
from chaos.workload import Reader, WorkloadConfig, Writer, create_topic, end_offsets, final_read

if TYPE_CHECKING:
    from chaos.txn_workload import TxnStage

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
    """Run the workload and the nemesis against `cluster`; returns the history file. The clients' own log
    lines go to the output's clients.log."""
    output.mkdir(parents=True, exist_ok=True)
    with client_logs(output / CLIENT_LOG_FILE):
        return _run(cluster, config, output, report)


def _run(cluster: ChaosCluster, config: RunConfig, output: Path, report: Callable[[str], None]) -> Path:
    for fault in config.faults:
        why = cluster.supports(fault)
        if why is not None:
            raise ChaosError(why)
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
    why = group_unsupported(config)
    if why is not None:
        raise ChaosError(why)
    group = GroupSettings("", workload.group, workload.topic, workload.session_timeout_ms,
                          workload.request_timeout_ms)
    nemesis: Nemesis | None = None
    restored: list[str] | None = None
    members: list[GroupMember] = []
    stage: TxnStage | None = None
    try:
        create_topic(bootstrap, workload)
        if workload.txn_processors:
            from chaos.txn_workload import TxnStage  # confluent-kafka (an extra): only for a run that needs it
            stage = TxnStage(bootstrap, cluster.kafka_bootstrap_servers, workload, history)
        started = time.time()
        history.meta(topic=workload.topic, partitions=workload.partitions,
                     replication_factor=workload.replication_factor,
                     min_insync_replicas=workload.min_insync_replicas, writers=workload.writers,
                     acks1_writer=workload.acks1_writer, consumers=workload.readers, rate=workload.rate,
                     faults=list(config.faults), interval=config.interval, duration=config.duration,
                     seed=config.seed, bootstrap_servers=bootstrap, client=config.client,
                     group=workload.group if workload.group_members else None, group_members=workload.group_members,
                     client_bootstrap_servers=client_bootstrap, txn_processors=workload.txn_processors,
                     txn_group=None if stage is None else stage.group,
                     data_dir=None if cluster.data_dir is None else str(cluster.data_dir), start=started)
        report(f"chaos: topic {workload.topic!r} ({workload.partitions} partitions, RF {workload.replication_factor},"
               f" min.insync.replicas {workload.min_insync_replicas}); {len(plan)} faults over"
               f" {config.duration:g} s, seed {config.seed}; {client.name} clients at {client_bootstrap}")
        readers = [Reader(f"c{i}", client, client_bootstrap, workload, history) for i in range(workload.readers)]
        writers = [Writer(f"w{i}", client, client_bootstrap, workload, history) for i in range(workload.writers)]
        if workload.acks1_writer:
            writers.append(Writer("a1", client, client_bootstrap, workload, history, acks="1"))
        progress = GroupProgress(workload.partitions)
        members = [GroupMember(client, client_bootstrap, _member_settings(group, f"g{i}"), progress, history)
                   for i in range(workload.group_members)]
        for reader in readers:
            reader.start()
        for member in members:
            member.start()
        if stage is not None:
            stage.start()
        for writer in writers:
            writer.start()
        nemesis = Nemesis(cluster, workload.topic, plan, rng, history.write, config.interval / 2, report,
                          group=workload.group if workload.group_members else None,
                          transactional_ids=[] if stage is None else stage.transactional_ids)
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
        notes, member_errors = _finish_group(members, client, client_bootstrap, group, targets, workload.partitions,
                                             history)
        if stage is not None:
            notes_txn, processor_errors = stage.finish(targets)
            notes += notes_txn
            member_errors += processor_errors
        unread = final_read(bootstrap, workload, targets, history, timeout=60)
        notes += [f"{r.name} did not read up to the end offsets" for r in readers if not r.caught_up]
        notes += [f"final read could not reach the end of partition {p}" for p in unread]
        errors = [w.error for w in writers if w.error is not None] + member_errors
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
        for member in members:
            with contextlib.suppress(Exception):
                member.close()
        if stage is not None:
            with contextlib.suppress(Exception):
                stage.close()
        history.close()
    return history.path


def group_unsupported(config: RunConfig) -> str | None:
    """Why the run's consumer group (or kill-coordinator) cannot be, or None."""
    if "kill-coordinator" in config.faults and not config.workload.group_members:
        return "kill-coordinator kills the broker coordinating the workload's consumer group: give --group-members N"
    if "kill-txn-coordinator" in config.faults and not config.workload.txn_processors:
        return ("kill-txn-coordinator kills the broker coordinating the processors' transactions: give"
                " --txn-processors N")
    client = library(config.client)
    if config.workload.group_members and (client.group_member is None or client.committed is None):
        return (f"--client {config.client} has no group consumer in the chaos workload yet: give --client"
                " confluent-kafka with --group-members")
    return None


def _member_settings(group: GroupSettings, client_id: str) -> GroupSettings:
    return GroupSettings(client_id, group.group, group.topic, group.session_timeout_ms, group.request_timeout_ms)


def _finish_group(members: list[GroupMember], client: ClientLibrary, bootstrap: str, group: GroupSettings,
                  targets: dict[int, int], partitions: int, history: HistoryWriter
                  ) -> tuple[list[str], list[BaseException]]:
    """The members read on to `targets` and commit; then the group's committed offsets are read back. Returns
    notes on what did not happen, and the members' errors."""
    if not members:
        return [], []
    for member in members:
        member.finish(targets, timeout=90)
    for member in members:
        member.join()
    notes = [] if all(m.finished for m in members) else [
        f"the group {group.group} did not settle and read up to the end offsets within 90 s"]
    failed = [m.error for m in members if m.error is not None]
    for member in members:
        member.close()
    members.clear()  # closed: run()'s cleanup has nothing left to do
    read_final_committed(client, bootstrap, group, partitions, history)
    return notes, failed


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
