"""`dump-log` on a running broker's files never writes them (issue 18: it once trimmed an active index and
the broker died of SIGBUS when later appends reached past the new end of its mapping).

Two real brokers and the controller; a topic with RF 2 whose every batch gets an index entry. Every .log,
.index and .timeindex of both brokers is dumped, with the real command, while producers write; then, with
the producers stopped, the files' sizes and bytes are compared before and after another full dump; then
enough data is replicated to need index entries far past the first page, and both brokers must still
serve every record.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from common.record import ProducerRecord, build_batch
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBrokers, StartController, WaitUntil

pytestmark = pytest.mark.integration

TOPIC = "dumped"
PARTITIONS = 2
INDEX_BYTES = 10 * 1024 * 1024  # Kafka's log.index.size.max.bytes: an active index is preallocated to it
# An index entry for every batch: 700 batches need 5,600 bytes of index, more than one page.
OVERRIDES = {"log.index.interval.bytes": "1", "replica.fetch.wait.max.ms": "100"}
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def produce(stub: pb_grpc.KafkaClientStub, partition: int, value: str) -> int:
    request = pb.ProduceRequest(acks=-1, timeout_ms=10_000)
    request.topics.add(name=TOPIC).partitions.add(
        index=partition, records=build_batch([ProducerRecord(value.encode(), key=b"k")]))
    return int(stub.Produce(request, timeout=30).responses[0].partitions[0].error_code)


def high_watermark(stub: pb_grpc.KafkaClientStub, partition: int) -> int:
    """The partition's high watermark: how many records a consumer can read."""
    request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1)
    request.topics.add(topic=TOPIC).partitions.add(partition=partition, current_leader_epoch=-1, fetch_offset=0,
                                                   log_start_offset=-1, partition_max_bytes=1)
    response = stub.Fetch(request, timeout=30).responses[0].partitions[0]
    assert response.error_code == ErrorCode.NONE
    return int(response.high_watermark)


def segment_files(brokers: dict[int, BrokerProcess]) -> list[Path]:
    return sorted(p for broker in brokers.values() for p in broker.log_dir.glob(f"{TOPIC}-*/*")
                  if p.suffix in SEGMENT_SUFFIXES)


def dump(files: list[Path], *flags: str) -> None:
    """The real command on every file; it must succeed without a traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "minibroker.cli", "dump-log", "--files", ",".join(map(str, files)), *flags],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]


def states(files: list[Path]) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_size, p.read_bytes()) for p in files}


@pytest.fixture
def stubs(start_brokers: StartBrokers, start_controller: StartController,
          wait_until: WaitUntil) -> Iterator[tuple[dict[int, BrokerProcess], dict[int, pb_grpc.KafkaClientStub]]]:
    brokers = start_brokers((1, 2), OVERRIDES)
    start_controller()
    channels = {b: grpc.insecure_channel(broker.address) for b, broker in brokers.items()}
    try:
        stubs = {b: pb_grpc.KafkaClientStub(channel) for b, channel in channels.items()}
        request = pb.CreateTopicsRequest(timeout_ms=20_000)
        request.topics.add(name=TOPIC, num_partitions=PARTITIONS, replication_factor=2)
        result = stubs[1].CreateTopics(request, timeout=30).topics[0]
        assert result.error_code == ErrorCode.NONE, result.error_message
        yield brokers, stubs
    finally:
        for channel in channels.values():
            channel.close()


def leaders(zk: KafkaZkClient) -> dict[int, int]:
    found = {}
    for p in range(PARTITIONS):
        state = zk.get_partition_state(TopicPartition(TOPIC, p))
        assert state is not None
        found[p] = state.leader
    return found


def test_dump_of_every_file_of_live_brokers_writes_nothing(
        stubs: tuple[dict[int, BrokerProcess], dict[int, pb_grpc.KafkaClientStub]], zk_client: KafkaZkClient,
        wait_until: WaitUntil) -> None:
    brokers, clients = stubs
    wait_until(lambda: all(produce(clients[leader], p, "warm-up") == ErrorCode.NONE
                           for p, leader in leaders(zk_client).items()), message="a first acks=all produce")
    sent = {p: 1 for p in range(PARTITIONS)}
    errors: list[int] = []
    stop = threading.Event()

    def writer(partition: int) -> None:
        leader = leaders(zk_client)[partition]
        while not stop.is_set():
            code = produce(clients[leader], partition, f"p{partition}-{sent[partition]}")
            if code != ErrorCode.NONE:
                errors.append(code)
                return
            sent[partition] += 1

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(PARTITIONS)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):  # under load: every file, with and without the sanity check
            files = segment_files(brokers)
            assert len(files) == 2 * PARTITIONS * len(SEGMENT_SUFFIXES)
            dump(files, "--print-data-log")
            dump(files, "--index-sanity-check")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert errors == []
    # Quiet: every replica has every record, nothing moves; a dump must leave each byte as it was.
    wait_until(lambda: all(high_watermark(clients[b], p) == sent[p] for p, b in leaders(zk_client).items()),
               message="every record below the high watermark")
    files = segment_files(brokers)
    before = states(files)
    for path in files:
        if path.suffix != ".log":
            assert before[path][0] == INDEX_BYTES - INDEX_BYTES % (8 if path.suffix == ".index" else 12)
    dump(files, "--print-data-log")
    dump(files, "--index-sanity-check")
    assert states(files) == before
    # More data through both brokers' active indexes (leader appends, follower replicates): both survive.
    for p, leader in leaders(zk_client).items():
        for i in range(700):
            assert produce(clients[leader], p, f"after-{i}") == ErrorCode.NONE
        sent[p] += 700
    for broker in brokers.values():
        assert broker.process.popen.poll() is None, broker.process.log()[-3000:]
    wait_until(lambda: all(high_watermark(clients[b], p) == sent[p] for p, b in leaders(zk_client).items()),
               message="every record readable after the dumps")
    for path in files:
        if path.suffix != ".log":
            assert path.stat().st_size == before[path][0]
