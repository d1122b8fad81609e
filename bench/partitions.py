"""What a partition costs: a cluster with N partitions at RF=3, each figure beside the same at N=100 (issue 27).

    .venv/bin/python bench/partitions.py [--partitions 1000,3000,10000] [--baseline 100] [--idle-seconds 60]
        [--steps create,idle,traffic,metadata,controlled,kill,controller] [--topics 0] [--topic-batch 200]
        [--spread 2000] [--spread-records 100000] [--spread-workloads keyless,keyed] [--trace-stalls DIR]

For each N (the baseline first) a fresh local cluster (3 brokers, 2 controllers, one real ZooKeeper; as
`minibroker cluster up` runs them) gets one topic of N partitions at RF=3, so each broker hosts N replicas.
An ApiVersions probe on broker 3's Kafka listener (bench/free_loop.py's, every 5 ms) records its round trips
through every step; the longest is the step's event-loop stall. The steps:

- create: CreateTopics until every partition has a leader and a full ISR (read from ZooKeeper's state znodes);
  then each broker's VmRSS and open file descriptors beyond its empty baseline, per replica it hosts;
- idle: each broker's CPU (utime + stime from /proc) over --idle-seconds with no clients;
- traffic: 1% of the partitions take ~500 records/s (confluent-kafka, acks=all): each broker's CPU, the
  produce latency (median and p99 from delivery reports);
- metadata: one Metadata request for all topics (v8, on a raw connection): response bytes and time;
- controlled: SIGTERM of broker 1 or 2, whichever leads more: until it exits, and until every partition it
  led has another leader; then its clean restart: until it serves, and until it is back in every ISR;
- kill: SIGKILL of broker 1 or 2, whichever leads more: until every partition it led has another leader; then
  its restart (log recovery): until it serves, and until it is back in every ISR;
- controller: SIGKILL of the active controller: until its /controller znode goes (the session timeout), and
  until the standby logs it is ready (the cluster loaded, its first election done).

With --topics K, instead: K one-partition topics (RF=3) created in batches of --topic-batch as clients do,
then deleted in the same batches; the time until a Metadata request shows every create (then every delete),
and until the active controller is idle again (under 5% of a core over 5 s), with its CPU meanwhile. Each
step's figures are printed as it ends; a step whose metadata is not there within 600 s prints how many topics
are still off (and its controller CPU) and ends the run of that count.

With --trace-stalls DIR, each broker also writes what its event loop was doing whenever it was busy over
100 ms, and its slow garbage collections (bench/stall_trace/sitecustomize.py says how to read the files).

With --spread W, instead: traffic spread thin. One cluster holds a W-partition topic and a 6-partition one
(RF=3); each producer (confluent-kafka on the Kafka listener, the project's client over gRPC; acks=all,
linger.ms 5, 100-byte values) sends --spread-records records to each topic, warm (its metadata and connections
made before the clock), in each workload: keyless (the default, sticky, partitioner fills one partition's batch
at a time) and keyed (a distinct key per record: the records spread thin, a few per partition per batch; the
issue's case). The records/s on each topic and their ratio are printed against the goal (at least 0.5, issue 27),
and for confluent-kafka the records per Produce request it sent (its statistics, statistics.interval.ms).

Prints one table per step: the figure at each N and its ratio to the baseline. Every cluster is torn down and
its data dir removed however the run ends. Timings on a loaded machine vary: the load average is printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kio.schema.metadata.v8.request import MetadataRequest  # noqa: E402
from kio.schema.metadata.v8.response import MetadataResponse  # noqa: E402

import client  # noqa: E402
from bench.free_loop import Probe  # noqa: E402
from local_cluster.cluster import LocalCluster, scratch_cluster  # noqa: E402
from proto.types import TopicPartition  # noqa: E402
from tests.integration.kafka_wire import WireConnection, encode_request  # noqa: E402
from zk.client import KafkaZkClient  # noqa: E402

TOPIC = "partitions-bench"
# The probe's broker is never stopped; the broker stopped in a step is whichever of the others leads more.
PROBED = 3
STOPPABLE = (1, 2)
REPLICATION_FACTOR = 3
CLK_TCK = os.sysconf("SC_CLK_TCK")
_POLL_S = 0.1
_STEP_TIMEOUT_S = 600.0
# librdkafka's socket.timeout.ms (60 s by default) bounds every request, CreateTopics' operation timeout or not.
ADMIN_TIMEOUT_MS = 300_000
STEPS = ("create", "idle", "traffic", "metadata", "controlled", "kill", "controller")

Figures = dict[str, float]


# ---------------------------------------------------------------------- what a process costs

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors by what they point at: a segment file's suffix (`.log`, `.index`, ...), a checkpoint's
    name, `socket`, `pipe`, or `other`."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        name = target.rsplit("/", 1)[-1]
        kind = (target.split(":", 1)[0] if not target.startswith("/") else
                name[name.index("."):] if "." in name and name[0].isdigit() else
                name if "checkpoint" in name else "other")
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def alive(pid: int) -> bool:
    """Running and not a zombie (an exited child the cluster has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def broker_pids(cluster: LocalCluster) -> dict[int, int]:
    return {b.id: cluster.pid(f"broker-{b.id}") for b in cluster.load().brokers}


def cpu_over(pids: dict[int, int], work: Callable[[], None]) -> dict[int, float]:
    """Each process's share of one core while `work` runs."""
    before = {i: cpu_seconds(pid) for i, pid in pids.items()}
    began = time.monotonic()
    work()
    wall = time.monotonic() - began
    return {i: (cpu_seconds(pid) - before[i]) / wall for i, pid in pids.items()}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = _STEP_TIMEOUT_S) -> float:
    """Seconds until `condition` holds, polled every _POLL_S."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(_POLL_S)
    return time.monotonic() - began


# ---------------------------------------------------------------------- the partitions in ZooKeeper

class Partitions:
    """The bench topic's partitions as their state znodes say (one pipelined read for all)."""

    def __init__(self, zk: KafkaZkClient, count: int) -> None:
        self._zk = zk
        self._tps = [TopicPartition(TOPIC, p) for p in range(count)]
        # (which check, the partitions that failed it at its last look)
        self._failing: tuple[str, list[TopicPartition]] | None = None

    def states(self, tps: list[TopicPartition] | None = None) -> dict[TopicPartition, tuple[int, tuple[int, ...]]]:
        return {tp: (s.leader, s.isr)
                for tp, s in self._zk.get_partition_states(self._tps if tps is None else tps).items()}

    def _all(self, check: str, ok: Callable[[tuple[int, tuple[int, ...]]], bool]) -> bool:
        """Whether `ok` holds for every partition. The partitions that failed it at the last look are read again
        alone until they pass, then all of them once more to confirm: reading every state znode every 0.1 s
        took the bench and ZooKeeper over a core while a 10,000-partition creation was waited for (ps: the bench
        69%, ZooKeeper 54%), the CPU the brokers it measured needed."""
        tps = self._failing[1] if self._failing is not None and self._failing[0] == check else self._tps
        states = self.states(tps)
        failing = [tp for tp in tps if tp not in states or not ok(states[tp])]
        if failing:
            self._failing = (check, failing)
            return False
        self._failing = None
        return tps is self._tps or self._all(check, ok)

    def all_led_with_full_isr(self) -> bool:
        return self._all("full ISR", lambda state: state[0] >= 0 and len(state[1]) == REPLICATION_FACTOR)

    def led_by(self, broker: int) -> set[TopicPartition]:
        return {tp for tp, (leader, _) in self.states().items() if leader == broker}

    def all_led_elsewhere(self, partitions: set[TopicPartition], broker: int) -> bool:
        states = self.states()
        return all(states[tp][0] not in (-1, broker) for tp in partitions)

    def in_every_isr(self, broker: int) -> bool:
        return self._all(f"in every ISR: {broker}", lambda state: broker in state[1])


# ---------------------------------------------------------------------- steps

def create_topics(admin: AdminClient, topics: list[NewTopic]) -> None:
    for future in admin.create_topics(topics, operation_timeout=300, request_timeout=300).values():
        future.result()


def step_create(cluster: LocalCluster, admin: AdminClient, partitions: Partitions, count: int) -> Figures:
    pids = broker_pids(cluster)
    empty_rss = {i: rss_kb(pid) for i, pid in pids.items()}
    empty_fds = {i: open_fds(pid) for i, pid in pids.items()}
    empty_kinds = {i: fd_kinds(pid) for i, pid in pids.items()}
    began = time.monotonic()
    create_topics(admin, [NewTopic(TOPIC, count, REPLICATION_FACTOR)])
    wait_for(partitions.all_led_with_full_isr, "every partition led with a full ISR")
    created = time.monotonic() - began
    time.sleep(2)  # the last LeaderAndIsr's logs and fetchers settle
    replicas_per_broker = count * REPLICATION_FACTOR / len(pids)
    kinds = {i: fd_kinds(pid) for i, pid in pids.items()}
    by_kind = {f"fds/replica: {kind}": max((kinds[i].get(kind, 0) - empty_kinds[i].get(kind, 0)) / replicas_per_broker
                                            for i in pids)
               for kind in sorted({kind for counts in kinds.values() for kind in counts})}
    return {
        "create s": created,
        "RSS KB/replica": max((rss_kb(pid) - empty_rss[i]) / replicas_per_broker for i, pid in pids.items()),
        "fds/replica": max((open_fds(pid) - empty_fds[i]) / replicas_per_broker for i, pid in pids.items()),
        **by_kind,
    }


def step_idle(cluster: LocalCluster, seconds: float) -> Figures:
    shares = cpu_over(broker_pids(cluster), lambda: time.sleep(seconds))
    return {"idle CPU % (max broker)": 100 * max(shares.values()),
            "idle CPU % (mean)": 100 * statistics.mean(shares.values())}


def step_traffic(cluster: LocalCluster, bootstrap: str, count: int, seconds: float = 15.0,
                 records_per_s: float = 500.0) -> Figures:
    """1% of the partitions (at least one) take `records_per_s` records between them, acks=all."""
    hot = max(1, count // 100)
    latencies: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def delivered(err: object, _msg: object, sent: float) -> None:
        if err is None:
            latencies.append((time.monotonic() - sent) * 1000)

    def work() -> None:
        began = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - began) < seconds:
            if sent > records_per_s * elapsed:
                producer.poll(0.002)
                continue
            now = time.monotonic()
            producer.produce(TOPIC, b"x" * 100, partition=sent % hot,
                             on_delivery=functools.partial(delivered, sent=now))
            sent += 1
            producer.poll(0)
        producer.flush(60)

    shares = cpu_over(broker_pids(cluster), work)
    latencies.sort()
    return {"traffic CPU % (max broker)": 100 * max(shares.values()),
            "produce p50 ms": statistics.median(latencies),
            "produce p99 ms": latencies[int(len(latencies) * 0.99)]}


def step_metadata(bootstrap: str) -> Figures:
    request = encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                             include_cluster_authorized_operations=False,
                                             include_topic_authorized_operations=False), 1)
    with WireConnection(bootstrap.split(",")[0], timeout=120) as conn:
        conn.send(request)  # the first: connection set-up and any warm-up
        conn.receive_body(MetadataResponse)
        began = time.perf_counter()
        conn.send(request)
        _, raw = conn.receive()
        took = time.perf_counter() - began
    return {"Metadata ms": took * 1000, "Metadata KB": len(raw) / 1024}


def victim(partitions: Partitions) -> tuple[int, set[TopicPartition]]:
    """The stoppable broker that leads the most partitions, and those partitions."""
    return max(((b, partitions.led_by(b)) for b in STOPPABLE), key=lambda led: len(led[1]))


def step_controlled(cluster: LocalCluster, partitions: Partitions) -> Figures:
    broker, led = victim(partitions)
    pid = cluster.send_signal(f"broker-{broker}", signal.SIGTERM)
    began = time.monotonic()
    moved: float | None = None
    while alive(pid):
        if moved is None and partitions.all_led_elsewhere(led, broker):
            moved = time.monotonic() - began
        if time.monotonic() - began > _STEP_TIMEOUT_S:
            raise TimeoutError("controlled shutdown: the broker did not exit")
        time.sleep(_POLL_S)
    exited = time.monotonic() - began
    if moved is None:  # not every leadership moved before the exit: the figure is when it did after it
        moved = exited + wait_for(lambda: partitions.all_led_elsewhere(led, broker), "leaders after SIGTERM")
    serving, back = restart(cluster, partitions, broker)
    return {"SIGTERM: exit s": exited, "SIGTERM: re-led s": moved, "clean restart: serving s": serving,
            "clean restart: full ISR s": back}


def step_kill(cluster: LocalCluster, partitions: Partitions) -> Figures:
    broker, led = victim(partitions)
    cluster.send_signal(f"broker-{broker}", signal.SIGKILL)
    re_led = wait_for(lambda: partitions.all_led_elsewhere(led, broker), "leaders after SIGKILL")
    serving, back = restart(cluster, partitions, broker)
    return {"SIGKILL: re-led s": re_led, "restart after kill: serving s": serving,
            "restart after kill: full ISR s": back}


def restart(cluster: LocalCluster, partitions: Partitions, broker: int) -> tuple[float, float]:
    """(until the stopped broker serves again, until it is back in every ISR), both from its start."""
    began = time.monotonic()
    cluster.restart_broker(broker, timeout=_STEP_TIMEOUT_S)
    serving = time.monotonic() - began
    wait_for(lambda: partitions.in_every_isr(broker), "back in every ISR")
    return serving, time.monotonic() - began


def step_controller(cluster: LocalCluster, zk: KafkaZkClient) -> Figures:
    active = zk.get_controller_id()
    assert active is not None, "no active controller"
    standby = next(c.id for c in cluster.load().controllers if c.id != active)
    log = cluster.log_file(f"controller-{standby}")
    seen = log.read_text(errors="replace").count("Ready to serve as the new controller")
    cluster.send_signal(f"controller-{active}", signal.SIGKILL)
    gone = wait_for(lambda: zk.get_controller_id() != active, "/controller released")
    ready = wait_for(lambda: log.read_text(errors="replace").count("Ready to serve as the new controller") > seen,
                     "the standby ready") + gone
    cluster.restart_controller(active, timeout=_STEP_TIMEOUT_S)
    return {"controller kill: /controller gone s": gone, "controller kill: standby ready s": ready,
            "standby ready after gone s": ready - gone}


def measure_partitions(count: int, args: argparse.Namespace) -> Figures:
    figures: Figures = {}
    stalls: Figures = {}
    with scratch_cluster("minibroker-partitions-bench-", brokers=3, controllers=2, timeout=120) as (cluster, info):
        bootstrap = info.kafka_bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": ADMIN_TIMEOUT_MS})
        zk = KafkaZkClient.connect(info.zookeeper.connect)
        probe = Probe(bootstrap.split(",")[PROBED - 1])
        probe.start()
        partitions = Partitions(zk, count)
        try:
            steps: dict[str, Callable[[], Figures]] = {
                "create": lambda: step_create(cluster, admin, partitions, count),
                "idle": lambda: step_idle(cluster, args.idle_seconds),
                "traffic": lambda: step_traffic(cluster, bootstrap, count),
                "metadata": lambda: step_metadata(bootstrap),
                "controlled": lambda: step_controlled(cluster, partitions),
                "kill": lambda: step_kill(cluster, partitions),
                "controller": lambda: step_controller(cluster, zk),
            }
            for name in ["create", *(s for s in args.steps if s != "create")]:
                probe.phase = name
                print(f"  N={count}: {name}", flush=True)
                figures.update(steps[name]())
                probe.phase = "between"
                stalls[f"stall ms: {name}"] = max(probe.round_trips.get(name, [0.0]))
        finally:
            probe.stop()
            zk.close()
    return {**figures, **stalls}


# ---------------------------------------------------------------------- many topics

def topics_in_metadata(conn: WireConnection, prefix: str) -> int:
    conn.send(encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                             include_cluster_authorized_operations=False,
                                             include_topic_authorized_operations=False), 1))
    _, response = conn.receive_body(MetadataResponse)
    return sum(1 for t in response.topics if t.name.startswith(prefix) and t.error_code == 0
               and all(p.leader_id >= 0 for p in t.partitions))


def shows(conn: WireConnection, prefix: str, count: int) -> bool:
    return topics_in_metadata(conn, prefix) == count


def idle_after(pid: int, threshold: float = 0.05, window: float = 5.0) -> float:
    """Seconds until the process used under `threshold` of a core over `window` seconds (the window's end)."""
    began = time.monotonic()
    while True:
        before = cpu_seconds(pid)
        time.sleep(window)
        if (cpu_seconds(pid) - before) / window < threshold:
            return time.monotonic() - began
        if time.monotonic() - began > _STEP_TIMEOUT_S:
            raise TimeoutError("the controller never went idle")


def measure_topics(count: int, batch: int) -> Figures:
    prefix = "many-"
    names = [f"{prefix}{i:06d}" for i in range(count)]
    with scratch_cluster("minibroker-topics-bench-", brokers=3, controllers=2, timeout=120) as (cluster, info):
        bootstrap = info.kafka_bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": ADMIN_TIMEOUT_MS})
        zk = KafkaZkClient.connect(info.zookeeper.connect)
        controller_pid = cluster.pid(f"controller-{zk.get_controller_id()}")
        zk.close()
        figures: Figures = {}
        with WireConnection(bootstrap.split(",")[0], timeout=120) as conn:
            for what, want in (("create", count), ("delete", 0)):
                cpu_before = cpu_seconds(controller_pid)
                began = time.monotonic()
                for i in range(0, count, batch):
                    chunk = names[i:i + batch]
                    if what == "create":
                        create_topics(admin, [NewTopic(n, 1, REPLICATION_FACTOR) for n in chunk])
                    else:
                        for future in admin.delete_topics(chunk, operation_timeout=300).values():
                            future.result()
                requested = time.monotonic() - began
                figures[f"{what}: requests s"] = requested
                try:
                    wait_for(functools.partial(shows, conn, prefix, want), f"metadata after {what}")
                except TimeoutError:
                    # What a step that never ends still tells: how far it got (the other figures stay blank).
                    figures[f"{what}: off target in metadata at timeout"] = abs(
                        topics_in_metadata(conn, prefix) - want)
                    figures[f"{what}: controller CPU s"] = cpu_seconds(controller_pid) - cpu_before
                    print_figures(count, figures)
                    break
                shown = time.monotonic() - began
                idle = idle_after(controller_pid)
                figures[f"{what}: in metadata s"] = shown
                figures[f"{what}: controller idle after last request s"] = shown - requested + idle
                figures[f"{what}: controller CPU s"] = cpu_seconds(controller_pid) - cpu_before
                print_figures(count, figures)
        return figures


def print_figures(count: int, figures: Figures) -> None:
    """Each step's figures as soon as measured, with the load: a later step may run for many minutes."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"  {count} topics, so far (load {load}): "
          + ", ".join(f"{name} {value:.2f}" for name, value in figures.items()), flush=True)


# ---------------------------------------------------------------------- traffic spread thin

NARROW = 6
SPREAD_GOAL = 0.5  # issue 27: the wide topic reaches at least half the narrow one's records/s
_VALUE = b"x" * 100


# The goal's two readings (issue 27). keyless: no key and no partition, the producer's default partitioner
# (KIP-480's sticky one in both clients: librdkafka's sticky.partitioning.linger.ms, client/builtin_partitioner.py),
# so a batch fills on one partition before the next: what a Kafka user producing keyless records gets, and the
# partition count should barely matter. keyed: every record a distinct key, hashed over the partitions (murmur2 in
# the project's client, librdkafka's consistent_random): traffic really spread thin, each partition's batch holding
# the few records of one linger, so a request carries hundreds of tiny batches: the case.
SPREAD_WORKLOADS = ("keyless", "keyed")


def _spread_key(workload: str, i: int) -> bytes | None:
    return b"key-%d" % i if workload == "keyed" else None


def _produce_requests(stats: str) -> int:
    """Produce requests librdkafka has sent to the brokers so far, from its statistics (bootstrap entries,
    nodeid -1, aside)."""
    return sum(b["req"].get("Produce", 0) for b in json.loads(stats)["brokers"].values() if b["nodeid"] >= 0)


def _fresh_count(producer: Producer, counts: list[int]) -> int:
    """The Produce requests sent, from statistics taken after this call: the second to come, since the first
    may have been taken before it."""
    wanted = len(counts) + 2
    while len(counts) < wanted:
        producer.poll(1)
    return counts[-1]


def confluent_spread(bootstrap: str, topic: str, partitions: int, records: int,
                     workload: str) -> tuple[float, float | None]:
    """Records/s of confluent-kafka sending `records` to the topic as `workload` says, acks=all, and the records
    per Produce request it sent (librdkafka puts one partition in a request, librdkafka issue 1700: records spread
    thin are a few per request)."""
    counts: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 2 * records, "statistics.interval.ms": 100,
                         "stats_cb": lambda stats: counts.append(_produce_requests(stats))})
    for p in range(partitions):  # warm: metadata, connections, every partition's leader known
        producer.produce(topic, _VALUE, partition=p)
    assert producer.flush(120) == 0, "warm-up records not delivered"
    requests_before = _fresh_count(producer, counts)
    began = time.monotonic()
    for i in range(records):
        producer.produce(topic, _VALUE, _spread_key(workload, i))
        producer.poll(0)
    assert producer.flush(600) == 0, "records not delivered"
    took = time.monotonic() - began
    return records / took, records / max(1, _fresh_count(producer, counts) - requests_before)


def project_spread(bootstrap: str, topic: str, partitions: int, records: int,
                   workload: str) -> tuple[float, float | None]:
    """The same with the project's client over gRPC (its requests are not counted: it puts every ready partition
    of a broker in one request, as Kafka's Java producer does)."""
    producer = client.Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for p in range(partitions):
            producer.send(topic, _VALUE, partition=p)
        producer.flush(timeout=120)
        began = time.monotonic()
        futures = [producer.send(topic, _VALUE, _spread_key(workload, i)) for i in range(records)]
        producer.flush(timeout=600)
        took = time.monotonic() - began
        assert all(f.succeeded() for f in futures), "records not delivered"
        return records / took, None
    finally:
        producer.close()


def led_with_full_isr(zk: KafkaZkClient, tps: list[TopicPartition]) -> bool:
    states = zk.get_partition_states(tps)
    return len(states) == len(tps) and all(s.leader >= 0 and len(s.isr) == REPLICATION_FACTOR
                                           for s in states.values())


def measure_spread(wide: int, records: int, workloads: list[str]) -> dict[str, Figures]:
    """Per producer and workload: records/s on the narrow and the wide topic, and their ratio."""
    topics = {NARROW: f"spread-{NARROW}", wide: f"spread-{wide}"}
    results: dict[str, Figures] = {}
    with scratch_cluster("minibroker-spread-bench-", brokers=3, controllers=2, timeout=120) as (_, info):
        admin = AdminClient({"bootstrap.servers": info.kafka_bootstrap_servers,
                             "socket.timeout.ms": ADMIN_TIMEOUT_MS})
        create_topics(admin, [NewTopic(name, count, REPLICATION_FACTOR) for count, name in topics.items()])
        zk = KafkaZkClient.connect(info.zookeeper.connect)
        try:
            for count, name in topics.items():
                tps = [TopicPartition(name, p) for p in range(count)]
                wait_for(functools.partial(led_with_full_isr, zk, tps), f"{name} led with full ISRs")
        finally:
            zk.close()
        producers: dict[str, Callable[..., tuple[float, float | None]]] = {
            "confluent-kafka": functools.partial(confluent_spread, info.kafka_bootstrap_servers, records=records),
            "project client": functools.partial(project_spread, info.bootstrap_servers, records=records),
        }
        for workload in workloads:
            for name, produce in producers.items():
                print(f"  {name}, {workload}: {records} records on {NARROW} then {wide} partitions", flush=True)
                narrow_rate, narrow_per_request = produce(topics[NARROW], NARROW, workload=workload)
                wide_rate, wide_per_request = produce(topics[wide], wide, workload=workload)
                figures = {f"records/s on {NARROW}": narrow_rate, f"records/s on {wide}": wide_rate,
                           "ratio": wide_rate / narrow_rate}
                per_request = ""
                if narrow_per_request is not None and wide_per_request is not None:
                    figures |= {f"records/request on {NARROW}": narrow_per_request,
                                f"records/request on {wide}": wide_per_request}
                    per_request = f", {narrow_per_request:.1f} and {wide_per_request:.1f} records per Produce request"
                results[f"{name}, {workload}"] = figures
                # Printed now too: tearing down a cluster of 2,000 partitions takes minutes on a loaded machine.
                print(f"    {narrow_rate:.0f} and {wide_rate:.0f} records/s, ratio {wide_rate / narrow_rate:.2f}"
                      f"{per_request} (load average {os.getloadavg()[0]:.2f})", flush=True)
    return results


def spread_table(results: dict[str, Figures]) -> None:
    names = list(dict.fromkeys(name for figures in results.values() for name in figures))
    widths = {name: max(22, len(name) + 2) for name in names}
    print(f"\n{'producer, workload':28}" + "".join(f"{name:>{widths[name]}}" for name in names) + f"{'goal':>14}")
    for producer, figures in results.items():
        met = "met" if figures["ratio"] >= SPREAD_GOAL else "missed"
        print(f"{producer:28}" + "".join(f"{figures[n]:>{widths[n]}.2f}" if n in figures else f"{'-':>{widths[n]}}"
                                         for n in names) + f"{f'{SPREAD_GOAL} {met}':>14}")
    print("keyed is issue 27's case (records spread thin); keyless shows what the sticky partitioner makes of it")


# ---------------------------------------------------------------------- report

def table(results: dict[int, Figures], baseline: int) -> None:
    counts = list(results)
    names = list(dict.fromkeys(name for figures in results.values() for name in figures))
    print(f"\n{'figure':44}" + "".join(f"{f'N={n}':>12}" for n in counts)
          + "".join(f"{f'x{n}/{baseline}':>12}" for n in counts if n != baseline))
    for name in names:
        row = [results[n].get(name) for n in counts]
        base = results[baseline].get(name)
        cells = "".join(f"{v:>12.2f}" if v is not None else f"{'-':>12}" for v in row)
        ratios = "".join(f"{v / base:>12.1f}" if v is not None and base else f"{'-':>12}"
                         for n, v in zip(counts, row) if n != baseline)
        print(f"{name:44}{cells}{ratios}")


def trace_stalls(out_dir: Path) -> None:
    """Brokers started from here on import bench/stall_trace/sitecustomize.py, which writes their stalls."""
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["STALL_TRACE"] = str(out_dir.resolve() / "stalls")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "bench" / "stall_trace"), os.environ.get("PYTHONPATH")) if p)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", default="1000,3000,10000", help="comma-separated partition counts")
    parser.add_argument("--baseline", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--steps", default=",".join(STEPS), help="comma-separated, of: " + ",".join(STEPS))
    parser.add_argument("--topics", default="", help="comma-separated topic counts: the many-topics bench instead")
    parser.add_argument("--topic-batch", type=int, default=200)
    parser.add_argument("--spread", type=int, default=0,
                        help="partitions of the wide topic: the spread-thin bench instead")
    parser.add_argument("--spread-records", type=int, default=100_000)
    parser.add_argument("--spread-workloads", default=",".join(SPREAD_WORKLOADS),
                        help="comma-separated, of: " + ",".join(SPREAD_WORKLOADS))
    parser.add_argument("--trace-stalls", type=Path, default=None, metavar="DIR",
                        help="each broker writes DIR/stalls.<pid>: its loop's stretches out of select(), its GCs")
    args = parser.parse_args()
    if args.trace_stalls is not None:
        trace_stalls(args.trace_stalls)
    # SIGTERM (`timeout`, `kill`) ends the run through the clusters' teardown, as Ctrl-C does; by default it
    # killed this process alone and left the brokers, controllers and ZooKeeper running.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    args.steps = [s for s in args.steps.split(",") if s]
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps: {', '.join(sorted(unknown))}")
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (on {os.cpu_count()} CPUs)")
    results: dict[int, Figures] = {}
    if args.spread:
        workloads = [w for w in args.spread_workloads.split(",") if w]
        if set(workloads) - set(SPREAD_WORKLOADS):
            parser.error(f"unknown workloads: {args.spread_workloads}")
        spread_table(measure_spread(args.spread, args.spread_records, workloads))
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    if args.topics:
        counts = [args.baseline, *(int(n) for n in args.topics.split(","))]
        for n in counts:
            print(f"{n} one-partition topics, in batches of {args.topic_batch}", flush=True)
            results[n] = measure_topics(n, args.topic_batch)
    else:
        counts = [args.baseline, *(int(n) for n in args.partitions.split(","))]
        for n in counts:
            print(f"{n} partitions at RF={REPLICATION_FACTOR}", flush=True)
            results[n] = measure_partitions(n, args)
    table(results, args.baseline)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
