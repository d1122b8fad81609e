"""A full disk under a real broker (Kafka's log dir failure handling), on real small file systems: broker 1 of three
has two log dirs, each a tmpfs mounted for the test. Producing acks=all (min.insync.replicas=2) fills the first; the
dir goes offline, its partition answers KAFKA_STORAGE_ERROR on both front doors, the controller moves leadership
away, and nothing acknowledged is lost. Filling the second (the broker's last dir) halts the broker. Once space is
freed it restarts, recovers both dirs and rejoins every ISR. Every wait has a deadline on a condition."""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka import KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError
from kafka.errors import KafkaStorageError as KafkaPythonStorageError
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v8.response import ProduceResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from common.record import ProducerRecord, build_batch, iter_batches
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.integration.conftest import StartBroker, StartController, WaitUntil
from tests.integration.failover.test_failover import BROKER_OVERRIDES, FAILOVER_DEADLINE_S, Cluster, in_sync
from tests.integration.kafka_wire import WireConnection, encode_request
from tests.integration.replication.test_leader_epochs import running_cluster
from zk.client import KafkaZkClient

pytestmark = pytest.mark.integration

FULL = TopicPartition("full-disk", 0)
SPARED = TopicPartition("spared-disk", 0)
ALL = (1, 2, 3)
RECORD_BYTES = 8192
# Small enough to fill in seconds, large enough for meta.properties, checkpoints and a few segments.
SMALL_DISK = "2m"
ROOMY_DISK = "64m"


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two tmpfs file systems; unmounted at teardown (lazily if a process still holds a file there, so a failed
    test cannot leave a mount behind)."""
    mounted = [tmp_path / "disk-a", tmp_path / "disk-b"]
    try:
        mount_tmpfs(mounted[0], SMALL_DISK)
        mount_tmpfs(mounted[1], ROOMY_DISK)
        yield mounted[0], mounted[1]
    finally:
        for path in mounted:
            if os.path.ismount(path) and subprocess.run(["umount", str(path)]).returncode != 0:
                subprocess.run(["umount", "-l", str(path)], check=True)


def values_in(partition_dir: Path) -> list[bytes]:
    """The record values stored in a replica's segments (the record id before the padding)."""
    return [
        r.value.rstrip(b".")
        for segment in sorted(partition_dir.glob("*.log"))
        for batch in iter_batches(segment.read_bytes())
        for r in batch.records
        if r.value is not None
    ]


def produce_until_refused(bootstrap: str, tp: TopicPartition, prefix: str, limit: int
                          ) -> tuple[list[bytes], KafkaPythonError | None]:
    """kafka-python, acks=all and no retries, one record at a time: (the acknowledged ids, the first error)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=0,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=20_000)
    acked: list[bytes] = []
    try:
        for i in range(limit):
            record_id = f"{prefix}{i:05d}".encode()
            try:
                producer.send(tp.topic, record_id.ljust(RECORD_BYTES, b"."), partition=tp.partition).get(timeout=60)
            except KafkaPythonError as e:
                return acked, e
            acked.append(record_id)
        return acked, None
    finally:
        producer.close(timeout=10)


def consume_all(bootstrap: str, tp: TopicPartition, expected: int) -> list[bytes]:
    """confluent-kafka from the earliest offset until `expected` records came (or a deadline)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().rstrip(b"."))
    finally:
        consumer.close()
    return values


def grpc_errors(cluster: Cluster, broker_id: int, tp: TopicPartition) -> tuple[int, int]:
    """(Produce, Fetch) error codes the broker's gRPC door gives for the partition."""
    produce = pb.ProduceRequest(acks=-1, timeout_ms=5_000)
    produce.topics.add(name=tp.topic).partitions.add(index=tp.partition,
                                                     records=build_batch([ProducerRecord(b"late")]))
    fetch = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
    fetch.topics.add(topic=tp.topic).partitions.add(partition=tp.partition, current_leader_epoch=-1, fetch_offset=0,
                                                    log_start_offset=-1, partition_max_bytes=1 << 20)
    client = cluster.client(broker_id)
    return (client.Produce(produce, timeout=15).responses[0].partitions[0].error_code,
            client.Fetch(fetch, timeout=15).responses[0].partitions[0].error_code)


def kafka_door_errors(address: str, tp: TopicPartition) -> tuple[int, int]:
    """(Produce v8, Fetch v11) error codes the broker's Kafka listener gives for the partition."""
    produce = ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(TopicProduceData(name=TopicName(tp.topic), partition_data=(
            PartitionProduceData(index=i32(tp.partition), records=Records(build_batch([ProducerRecord(b"late")]))),)),))
    fetch = FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(0),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(tp.topic), partitions=(FetchPartition(
            partition=i32(tp.partition), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="")
    with WireConnection(address) as conn:
        conn.send(encode_request(produce, 1) + encode_request(fetch, 2))
        _, produced = conn.receive_body(ProduceResponse)
        _, fetched = conn.receive_body(FetchResponse)
    return produced.responses[0].partition_responses[0].error_code, fetched.responses[0].partitions[0].error_code


def leads_without(cluster: Cluster, tp: TopicPartition, broker_id: int) -> Callable[[], bool]:
    def moved() -> bool:
        state = cluster.zk.get_partition_state(tp)
        return state is not None and state.leader not in (broker_id, -1) and broker_id not in state.isr

    return moved


def test_a_full_log_dir_goes_offline_leadership_moves_and_the_broker_rejoins_after_a_restart(
    disks: tuple[Path, Path], start_broker: StartBroker, start_controller: StartController, zk_client: KafkaZkClient,
    wait_until: WaitUntil,
) -> None:
    disk_a, disk_b = disks
    broker_1 = {**BROKER_OVERRIDES, "log.dirs": f"{disk_a},{disk_b}"}
    with running_cluster(start_broker, start_controller, zk_client, {1: broker_1}) as cluster:
        # Each dir gets the next new log while they hold as many (Kafka's nextLogDirs): FULL on a, SPARED on b.
        for tp in (FULL, SPARED):
            cluster.create_topic(tp.topic, [[1, 2, 3]], {"min.insync.replicas": "2", "segment.bytes": "262144"})
            wait_until(lambda tp=tp: in_sync(cluster, tp, ALL), message=f"{tp} in sync")
        assert (disk_a / str(FULL)).is_dir() and (disk_b / str(SPARED)).is_dir()
        bootstrap = ",".join(b.kafka_address for b in cluster.brokers.values())

        # 1. Fill disk a through its leader, broker 1: the write that finds no space is refused with
        # KAFKA_STORAGE_ERROR, as Kafka's clients know it.
        acked, error = produce_until_refused(bootstrap, FULL, "a", limit=1000)
        assert isinstance(error, KafkaPythonStorageError), f"refused with {error!r} after {len(acked)} records"
        assert len(acked) > 50
        wait_until(leads_without(cluster, FULL, 1), timeout=FAILOVER_DEADLINE_S,
                   message="the controller moved leadership of the full dir's partition away from broker 1")
        assert in_sync(cluster, FULL, (2, 3))
        broker_log = cluster.brokers[1].process.log()
        assert "Stopping serving replicas in dir" in broker_log and str(disk_a) in broker_log
        assert "Handling log directory failure for brokers 1" in cluster.controller.log()
        assert cluster.brokers[1].process.popen.poll() is None, "a dir is left: the broker serves on"

        # Broker 1 keeps answering for the offline partition, on both front doors, with the storage error.
        storage_error = (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR)
        assert grpc_errors(cluster, 1, FULL) == storage_error
        assert kafka_door_errors(cluster.brokers[1].kafka_address, FULL) == storage_error
        # Its other dir is in service: it still leads SPARED, and ISR [2, 3] still takes acks=all writes for FULL.
        assert cluster.state(SPARED).leader == 1
        after, error = produce_until_refused(bootstrap, FULL, "b", limit=20)
        assert error is None
        spared_acked, error = produce_until_refused(bootstrap, SPARED, "s", limit=20)
        assert error is None

        full_acked = [*acked, *after]
        consumed = consume_all(",".join(cluster.brokers[b].kafka_address for b in (2, 3)), FULL, len(full_acked))
        # Every acknowledged record, in order; the refused one may be there too (written, then a later step
        # failed), never anything else.
        assert [v for v in consumed if v in set(full_acked)] == full_acked
        assert len(consumed) <= len(full_acked) + 1

        # 2. Fill disk b, broker 1's last dir: Kafka halts a broker with no log dir left.
        stat = os.statvfs(disk_b)
        (disk_b / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 256 * 1024))
        more, error = produce_until_refused(bootstrap, SPARED, "t", limit=1000)
        assert error is not None, "disk b never filled"
        assert cluster.brokers[1].process.wait(timeout=FAILOVER_DEADLINE_S) == 1
        assert "Shutdown broker because all log dirs in" in cluster.brokers[1].process.log()
        cluster.brokers.pop(1)
        wait_until(leads_without(cluster, SPARED, 1), timeout=FAILOVER_DEADLINE_S,
                   message="leadership of SPARED moved once broker 1's session expired")
        spared_acked += more

        # 3. Space freed, the broker restarts: both dirs recover (no clean-shutdown marker) and it rejoins the ISRs.
        (disk_b / "filler").unlink()
        subprocess.run(["mount", "-o", f"remount,size={ROOMY_DISK}", str(disk_a)], check=True)
        cluster.brokers[1] = start_broker(1, broker_1)
        for tp in (FULL, SPARED):
            wait_until(lambda tp=tp: in_sync(cluster, tp, ALL), timeout=60, message=f"broker 1 back in the ISR of {tp}")
        assert "was not shut down cleanly" in cluster.brokers[1].process.log()
        more_after, error = produce_until_refused(bootstrap, FULL, "c", limit=5)
        assert error is None
        full_acked += more_after
        leader = cluster.state(FULL).leader
        # In sync means at the leader's high watermark: broker 1's log holds every acknowledged record again.
        wait_until(lambda: values_in(disk_a / str(FULL)) == values_in(cluster.log_dir(leader) / str(FULL)),
                   message="broker 1's replica of FULL equal to the leader's")
        stored = values_in(disk_a / str(FULL))
        assert [v for v in stored if v in set(full_acked)] == full_acked
        spared_leader = cluster.state(SPARED).leader
        wait_until(lambda: values_in(disk_b / str(SPARED)) == values_in(cluster.log_dir(spared_leader) / str(SPARED)),
                   message="broker 1's replica of SPARED equal to the leader's")
        stored_spared = values_in(disk_b / str(SPARED))
        assert [v for v in stored_spared if v in set(spared_acked)] == spared_acked
