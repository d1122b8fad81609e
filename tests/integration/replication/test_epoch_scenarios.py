"""Two review defects of issue 16 staged with real processes: brokers frozen (SIGSTOP) and thawed (SIGCONT) at the
right leader epoch, leadership moved with the controller's own tools (`minibroker leader-election`, a controlled
shutdown, a controller failover). Each test failed against the code before its fix (see the report of the
log-dir-failure branch) and passes with it. Every wait has a deadline on a condition, none is a fixed sleep.

- KAFKA-10706 (defect 1): a follower whose epoch cache ends with an epoch it led without writing asks the new
  leader, is told to truncate to its own log end, and, when truncating there left the cache alone, asked the same
  question for ever: it never rejoined the ISR.
- isNewLeaderEpoch (defect 3): a leader handed a later epoch directly (frozen through the epoch in between, when a
  follower truncated) kept the followers' positions from before, so its high watermark passed a record no
  follower held and an acks=all produce waiting for it was acknowledged.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from common.record import ProducerRecord, build_batch
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.conftest import StartBroker, StartController, WaitUntil
from tests.integration.failover.test_failover import BROKER_OVERRIDES, FAILOVER_DEADLINE_S, Cluster, in_sync
from tests.integration.replication.test_leader_epochs import encoded, produce_all, running_cluster
from zk.client import KafkaZkClient

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
# No leader-driven ISR shrink while a follower is frozen for a few seconds: the ISR changes only where the staging
# says (the controller's elections).
STEADY_ISR = {**BROKER_OVERRIDES, "replica.lag.time.max.ms": "60000"}


@pytest.fixture
def cluster(request: pytest.FixtureRequest, start_broker: StartBroker, start_controller: StartController,
            zk_client: KafkaZkClient) -> Iterator[Cluster]:
    """running_cluster, with {broker id: overrides} from the test's indirect parameter."""
    with running_cluster(start_broker, start_controller, zk_client, request.param) as c:
        yield c


def leader_election(zk_connect: str, election_type: str, tp: TopicPartition) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "leader-election", "--zookeeper", zk_connect, "--election-type",
         election_type, "--topic", tp.topic, "--partition", str(tp.partition)],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def registered(cluster: Cluster, broker_id: int) -> Callable[[], bool]:
    return lambda: any(b.id == broker_id for b in cluster.zk.get_all_brokers())


def gone(cluster: Cluster, broker_id: int) -> Callable[[], bool]:
    return lambda: not registered(cluster, broker_id)()


def led_by(cluster: Cluster, tp: TopicPartition, broker_id: int) -> Callable[[], bool]:
    return lambda: cluster.state(tp).leader == broker_id


# ------------------------------------------------------------------ defect 1: KAFKA-10706


@pytest.mark.parametrize("cluster", [{1: {**STEADY_ISR, "zookeeper.session.timeout.ms": "8000"}, 2: STEADY_ISR,
                                      3: STEADY_ISR}], indirect=True, ids=["x-session-8s"])
def test_kafka_10706_a_follower_with_an_empty_epoch_at_its_log_end_rejoins_the_isr(
    cluster: Cluster, zk_connect: str, wait_until: WaitUntil
) -> None:
    """X (broker 1) leads an epoch and writes nothing in it, so its cache ends with (that epoch, its log end). The
    new leader Y (broker 2) holds an older epoch X never saw, so its answer names an epoch X does not have: X cuts
    back to the end of its own epoch below, which is its log end, and asks again (KIP-279). With the entry left in
    its cache, X asks the same question for ever; without it, X asks about the epoch below, agrees, and catches up.

    Epochs, with replicas [Y, X]: Y leads and both get m0..m2; X leads (Y frozen out); Y leads again by preferred
    election while X is frozen, and writes u at acks=1 (X never fetches it); X leads (Y frozen out), writes
    nothing; X is frozen out, Y comes back and is elected unclean (X's last epoch unknown to it); X comes back."""
    x, y = 1, 2
    tp = TopicPartition("kafka-10706", 0)
    cluster.create_topic(tp.topic, [[y, x]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, (x, y)), message="both replicas in sync")
    produce_all(cluster, tp, ["m0", "m1", "m2"])

    # X leads: Y frozen until its session expires, then back in sync as X's follower.
    cluster.brokers[y].process.signal(signal.SIGSTOP)
    wait_until(led_by(cluster, tp, x), timeout=FAILOVER_DEADLINE_S, message="X leads while Y is frozen")
    cluster.brokers[y].process.signal(signal.SIGCONT)
    wait_until(lambda: in_sync(cluster, tp, (x, y)), timeout=FAILOVER_DEADLINE_S, message="Y back in sync")

    # Y leads again (preferred election) while X is frozen, still registered and in the ISR; u reaches Y only.
    cluster.brokers[x].process.signal(signal.SIGSTOP)
    assert "Successfully completed leader election (PREFERRED)" in leader_election(zk_connect, "preferred", tp)
    assert cluster.state(tp).leader == y and in_sync(cluster, tp, (x, y))
    request = pb.ProduceRequest(acks=1, timeout_ms=5_000)
    request.topics.add(name=tp.topic).partitions.add(index=0, records=build_batch([ProducerRecord(b"u")]))
    assert cluster.client(y).Produce(request, timeout=15).responses[0].partitions[0].error_code == ErrorCode.NONE

    # X leads, from before u, and writes nothing: Y frozen until its session expires.
    cluster.brokers[y].process.signal(signal.SIGSTOP)
    cluster.brokers[x].process.signal(signal.SIGCONT)
    wait_until(led_by(cluster, tp, x), timeout=FAILOVER_DEADLINE_S, message="X leads, Y frozen out")
    x_epoch = cluster.state(tp).leader_epoch
    wait_until(lambda: f"starts at leader epoch {x_epoch} from offset 3" in cluster.brokers[x].process.log(),
               message="X took its epoch (its cache ends with it, at its log end)")

    # X frozen out (the partition goes offline: X was its last ISR member); Y thaws, re-registers, elected unclean.
    cluster.brokers[x].process.signal(signal.SIGSTOP)
    wait_until(gone(cluster, x), timeout=FAILOVER_DEADLINE_S, message="X's session expired")
    cluster.brokers[y].process.signal(signal.SIGCONT)
    wait_until(registered(cluster, y), timeout=FAILOVER_DEADLINE_S, message="Y registered again")
    wait_until(lambda: "Successfully completed leader election (UNCLEAN)" in leader_election(
        zk_connect, "unclean", tp), timeout=FAILOVER_DEADLINE_S, message="Y elected unclean")
    assert cluster.state(tp).leader == y

    # X thaws: it follows Y and must agree on where its log ends, then catch up into the ISR.
    cluster.brokers[x].process.signal(signal.SIGCONT)
    wait_until(lambda: in_sync(cluster, tp, (x, y)), timeout=FAILOVER_DEADLINE_S,
               message="X back in the ISR (before the fix it asked about its empty epoch for ever)")
    produce_all(cluster, tp, ["after"])  # acks=all with min.insync.replicas=2: both replicas have it
    assert cluster.stored_values(x, tp) == cluster.stored_values(y, tp) == encoded(["m0", "m1", "m2", "u", "after"])


# ------------------------------------------------------------------ defect 3: isNewLeaderEpoch


def high_watermark(cluster: Cluster, broker_id: int, tp: TopicPartition) -> int:
    fetch = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
    fetch.topics.add(topic=tp.topic).partitions.add(partition=tp.partition, current_leader_epoch=-1, fetch_offset=0,
                                                    log_start_offset=-1, partition_max_bytes=1 << 20)
    answer = cluster.client(broker_id).Fetch(fetch, timeout=15).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    return answer.high_watermark


@pytest.mark.parametrize("cluster", [{b: {**STEADY_ISR, "zookeeper.session.timeout.ms": "10000"} for b in (1, 2, 3)}],
                         indirect=True, ids=["long-sessions"])
def test_a_leader_handed_a_later_epoch_directly_does_not_count_positions_from_its_earlier_epoch(
    cluster: Cluster, start_broker: StartBroker, start_controller: StartController, zk_connect: str,
    wait_until: WaitUntil,
) -> None:
    """A (broker 1) leads; r reaches A and C (broker 3) but not B (broker 2), so its acks=all produce waits (d, at
    acks=1 just before, answers any fetch of B's parked at A, so r cannot ride on it). A is
    frozen; B leads the next epoch (preferred election) and C truncates r away; B shuts down, so A, still in the
    ISR, is elected for the epoch after. A never hears of B's epoch: its controller requests queue behind one the
    frozen A cannot answer, and that controller is killed; the new one hands A the later epoch only. With C frozen
    too, A must not count C's position from before (which held r): its high watermark stays below r and r's
    produce waits until C fetched r again."""
    a, b, c = 1, 2, 3
    tp = TopicPartition("skipped-epoch", 0)
    cluster.create_topic(tp.topic, [[b, a, c]], {"min.insync.replicas": "2"})
    wait_until(lambda: in_sync(cluster, tp, (a, b, c)), message="all three in sync")
    # A leads: B leaves in a controlled shutdown and comes back as a follower.
    cluster.brokers[b].process.signal(signal.SIGTERM)
    assert cluster.brokers[b].process.wait() == 0
    assert cluster.state(tp).leader == a
    cluster.brokers[b] = start_broker(b, {**STEADY_ISR, "zookeeper.session.timeout.ms": "10000"})
    wait_until(lambda: in_sync(cluster, tp, (a, b, c)), timeout=FAILOVER_DEADLINE_S, message="B back in sync")
    produce_all(cluster, tp, ["m0", "m1", "m2"])
    a_epoch = cluster.state(tp).leader_epoch

    # r reaches A and C only: its acks=all produce waits for B, in A's purgatory. d (acks=1) goes first and answers
    # whatever fetch of B's was parked at A, so nothing of B's is left at A for r to answer.
    cluster.brokers[b].process.signal(signal.SIGSTOP)
    d = pb.ProduceRequest(acks=1, timeout_ms=5_000)
    d.topics.add(name=tp.topic).partitions.add(index=0, records=build_batch([ProducerRecord(b"d")]))
    assert cluster.client(a).Produce(d, timeout=15).responses[0].partitions[0].error_code == ErrorCode.NONE
    answers: list[int] = []
    request = pb.ProduceRequest(acks=-1, timeout_ms=90_000)
    request.topics.add(name=tp.topic).partitions.add(index=0, records=build_batch([ProducerRecord(b"r")]))
    producing = threading.Thread(target=lambda: answers.append(
        cluster.client(a).Produce(request, timeout=120).responses[0].partitions[0].error_code))
    producing.start()
    wait_until(lambda: cluster.stored_values(c, tp) == encoded(["m0", "m1", "m2", "d", "r"]), message="C fetched r")

    # A frozen; the controller's next request to A (for a new topic A hosts) waits for an answer that cannot come,
    # and everything it sends A later queues behind it.
    cluster.brokers[a].process.signal(signal.SIGSTOP)
    blocker = TopicPartition("blocker", 0)
    create = pb.CreateTopicsRequest(timeout_ms=20_000)
    create.topics.add(name=blocker.topic, num_partitions=-1, replication_factor=-1).assignments.add(
        partition_index=0, broker_ids=[a])
    assert cluster.client(c).CreateTopics(create, timeout=30).topics[0].error_code == ErrorCode.NONE
    wait_until(lambda: cluster.zk.get_partition_state(blocker) is not None, message="the blocker's state written")

    # B thaws and leads the next epoch: C follows it and truncates r away.
    cluster.brokers[b].process.signal(signal.SIGCONT)
    assert "Successfully completed leader election (PREFERRED)" in leader_election(
        zk_connect, "preferred", tp)
    wait_until(lambda: cluster.stored_values(c, tp) == encoded(["m0", "m1", "m2", "d"]), message="C truncated r")

    # B shuts down: the controller elects A (frozen, registered, in the ISR) for the epoch after B's.
    cluster.brokers[b].process.signal(signal.SIGTERM)
    wait_until(led_by(cluster, tp, a), timeout=FAILOVER_DEADLINE_S, message="A elected while frozen")
    new_epoch = cluster.state(tp).leader_epoch
    assert new_epoch >= a_epoch + 2, "B's epoch lies in between"
    assert cluster.brokers[b].process.wait() == 0
    cluster.brokers.pop(b)

    # C frozen, so nothing it fetches can move A's high watermark; the controller replaced: its queue to A is lost.
    cluster.brokers[c].process.signal(signal.SIGSTOP)
    cluster.controller.signal(signal.SIGKILL)
    cluster.controller.wait()
    cluster.controller = start_controller(1001)
    wait_until(lambda: "successfully elected as the controller" in cluster.controller.log(),
               timeout=FAILOVER_DEADLINE_S, message="the new controller")

    cluster.brokers[a].process.signal(signal.SIGCONT)
    took_over = f"starts at leader epoch {new_epoch} from offset 5"
    wait_until(lambda: took_over in cluster.brokers[a].process.log(), timeout=FAILOVER_DEADLINE_S,
               message="A leads its new epoch")
    assert f"{took_over} with high watermark 3 ISR [{a}, {c}]. Previous leader epoch was {a_epoch}." in \
        cluster.brokers[a].process.log(), "A went from its own epoch to the later one directly"
    # Only A holds r: the high watermark (3: B never fetched past m2) must not pass it, nor r be acknowledged.
    assert high_watermark(cluster, a, tp) == 3
    assert not answers, f"r acknowledged with only its leader holding it: {answers}"

    cluster.brokers[c].process.signal(signal.SIGCONT)
    producing.join(timeout=60)
    assert answers == [ErrorCode.NONE], "acknowledged once C fetched r"
    assert cluster.stored_values(c, tp) == encoded(["m0", "m1", "m2", "d", "r"])
