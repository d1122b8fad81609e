"""Real broker processes over gRPC on loopback, with a real ZooKeeper.

The test plays the controller where it needs one (LeaderAndIsr and UpdateMetadata
sent with the cluster credential, as a controller would); one test runs the real
controller process instead. Every bad input must come back as a precise Kafka
error code, and the broker must keep serving after all of them.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from broker.config.kafka_config import KafkaConfig
from broker.log.files import CLEAN_SHUTDOWN_FILE, META_PROPERTIES, REPLICATION_OFFSET_CHECKPOINT
from broker.server.kafka_server import KafkaServer
from common.record import (
    CRC_POS,
    CompressionType,
    ProducerRecord,
    Record,
    build_batch,
    iter_batches,
)
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import CLUSTER_CREDENTIAL_METADATA_KEY
from proto.errors import ErrorCode
from proto.types import EndPoint
from zk.client import KafkaZkClient
from zk.server import free_port

if TYPE_CHECKING:
    # Fixture types only: at run time "conftest" could name another directory's conftest.
    from conftest import BrokerProcess, StartBroker, StartProcess, WaitUntil

pytestmark = pytest.mark.integration

# Same value as conftest.CLUSTER_CREDENTIAL (conftest is not importable by name at run time).
CREDENTIAL = "integration-cluster-secret"
AUTH = ((CLUSTER_CREDENTIAL_METADATA_KEY, CREDENTIAL),)
TOPIC = "orders"


# ------------------------------------------------------------------ a test acting as controller and client


@dataclass
class BrokerClient:
    """Stubs for one broker, and the controller requests a test sends it."""

    broker: BrokerProcess
    zk: KafkaZkClient
    channel: grpc.Channel
    controller_epoch: int = 1

    @property
    def client(self) -> pb_grpc.KafkaClientStub:
        return pb_grpc.KafkaClientStub(self.channel)

    @property
    def cluster(self) -> pb_grpc.KafkaClusterStub:
        return pb_grpc.KafkaClusterStub(self.channel)

    def broker_epoch(self) -> int:
        info = self.zk.get_broker(self.broker.broker_id)
        assert info is not None
        return info.epoch

    def create_topic(self, topic: str = TOPIC, partitions: int = 1, **configs: str) -> None:
        request = pb.CreateTopicsRequest(timeout_ms=0)
        request.topics.add(name=topic, num_partitions=partitions, replication_factor=1, configs=[
            pb.CreateTopicsRequest.CreateableTopicConfig(name=key.replace("_", "."), value=value)
            for key, value in configs.items()])
        assert self.client.CreateTopics(request).topics[0].error_code == ErrorCode.NONE

    def lead(self, topic: str = TOPIC, partitions: int = 1, leader_epoch: int = 0) -> None:
        """LeaderAndIsr making this broker leader of every partition, then UpdateMetadata, as a controller would."""
        me = self.broker.broker_id
        states = [pb.LeaderAndIsrPartitionState(topic_name=topic, partition_index=p,
                                                controller_epoch=self.controller_epoch, leader=me,
                                                leader_epoch=leader_epoch, isr=[me], zk_version=0, replicas=[me],
                                                is_new=True) for p in range(partitions)]
        response = self.cluster.LeaderAndIsr(pb.LeaderAndIsrRequest(
            controller_id=1000, controller_epoch=self.controller_epoch, broker_epoch=self.broker_epoch(),
            partition_states=states, live_leaders=[pb.LeaderAndIsrLiveLeader(broker_id=me, host_name="127.0.0.1",
                                                                             port=self.broker.port)]), metadata=AUTH)
        assert response.error_code == ErrorCode.NONE
        assert [e.error_code for e in response.partition_errors] == [ErrorCode.NONE] * partitions
        metadata = self.cluster.UpdateMetadata(pb.UpdateMetadataRequest(
            controller_id=1000, controller_epoch=self.controller_epoch, broker_epoch=self.broker_epoch(),
            partition_states=[pb.UpdateMetadataPartitionState(
                topic_name=topic, partition_index=p, controller_epoch=self.controller_epoch, leader=me,
                leader_epoch=leader_epoch, isr=[me], replicas=[me]) for p in range(partitions)],
            live_brokers=[pb.UpdateMetadataBroker(id=me, endpoints=[pb.UpdateMetadataEndpoint(
                host="127.0.0.1", port=self.broker.port, listener="GRPC")])]), metadata=AUTH)
        assert metadata.error_code == ErrorCode.NONE

    def produce(self, records: bytes, acks: int = -1, topic: str = TOPIC, partition: int = 0,
                timeout_ms: int = 5000) -> pb.ProduceResponse.PartitionProduceResponse:
        request = pb.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
        request.topics.add(name=topic).partitions.add(index=partition, records=records)
        response = self.client.Produce(request, timeout=30)
        if acks == 0 and not response.responses:
            return pb.ProduceResponse.PartitionProduceResponse(error_code=ErrorCode.NONE, base_offset=-1)
        return response.responses[0].partitions[0]

    def fetch(self, offset: int, topic: str = TOPIC, partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 1,
              replica_id: int = -1, metadata: tuple[tuple[str, str], ...] = ()) -> pb.FetchResponse:
        request = pb.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                  max_bytes=16 << 20)
        request.topics.add(topic=topic).partitions.add(partition=partition, fetch_offset=offset,
                                                       current_leader_epoch=-1, log_start_offset=-1,
                                                       partition_max_bytes=8 << 20)
        return self.client.Fetch(request, timeout=30, metadata=metadata)

    def read_all(self, topic: str = TOPIC, partition: int = 0) -> list[Record]:
        """Every record below the high watermark, fetch after fetch."""
        records: list[Record] = []
        offset = 0
        while True:
            data = self.fetch(offset, topic, partition).responses[0].partitions[0]
            assert data.error_code == ErrorCode.NONE
            got = [r for batch in iter_batches(data.records) for r in batch.records if r.offset >= offset]
            if not got:
                return records
            records += got
            offset = got[-1].offset + 1

    def health(self) -> int:
        return health_pb2_grpc.HealthStub(self.channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status


@pytest.fixture
def connect(zk_client: KafkaZkClient) -> Iterator[Callable[[BrokerProcess], BrokerClient]]:
    channels: list[grpc.Channel] = []

    def open_client(broker: BrokerProcess) -> BrokerClient:
        channel = grpc.insecure_channel(broker.address, options=[("grpc.max_receive_message_length", 64 << 20)])
        channels.append(channel)
        return BrokerClient(broker, zk_client, channel)

    yield open_client
    for channel in channels:
        channel.close()


def values(records: list[Record]) -> list[bytes | None]:
    return [r.value for r in records]


def batch(*texts: str, **kwargs: object) -> bytes:
    return build_batch([ProducerRecord(t.encode(), timestamp=1_000 + i) for i, t in enumerate(texts)],
                       **kwargs)  # type: ignore[arg-type]


def stop(broker: BrokerProcess, signum: int = signal.SIGTERM) -> int:
    broker.process.signal(signum)
    return broker.process.wait(30)


# ------------------------------------------------------------------ lifecycle


def test_registers_serves_and_shuts_down_cleanly(start_broker: StartBroker, connect: Callable[..., BrokerClient],
                                                 zk_client: KafkaZkClient) -> None:
    broker = start_broker(1)
    c = connect(broker)
    assert c.health() == health_pb2.HealthCheckResponse.SERVING
    info = zk_client.get_broker(1)
    assert info is not None and info.endpoints == (EndPoint("GRPC", "127.0.0.1", broker.port),
                                                   EndPoint("PLAINTEXT", "127.0.0.1", broker.kafka_port))
    assert info.epoch > 0
    assert "KafkaConfig values:" in broker.process.log() and "broker.id = 1" in broker.process.log()
    c.create_topic()
    c.lead()
    assert c.produce(batch("a", "b")).error_code == ErrorCode.NONE
    assert stop(broker) == 0
    assert zk_client.get_broker(1) is None  # the session, and the registration, closed at once
    assert (broker.log_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert (broker.log_dir / REPLICATION_OFFSET_CHECKPOINT).read_text().splitlines() == ["0", "1", f"{TOPIC} 0 2"]


def test_start_up_refusals(start_broker: StartBroker) -> None:
    # A bad value: exit 1 with the reason, before anything starts (a misspelt key only warns, as in Kafka:
    # tests/unit/broker/config/test_config.py and tests/integration/failover/test_cluster_restart.py cover that).
    bad_value = start_broker(4, {"min.insync.replicas": "two"}, wait=False)
    assert bad_value.process.wait() == 1
    assert "min.insync.replicas" in bad_value.process.log()

    # A log dir that belongs to another broker id.
    owned = start_broker(2, wait=False)
    owned.log_dir.mkdir(parents=True)
    (owned.log_dir / META_PROPERTIES).write_text("version=0\nbroker.id=7\n")
    assert owned.process.wait() == 1
    assert "belongs to broker.id 7" in owned.process.log()

    # A second live broker with the same id: refused before it opens a log, and the first one is untouched.
    first = start_broker(3)
    duplicate = start_broker(3, {"zookeeper.session.timeout.ms": "1000"}, wait=False)
    assert duplicate.process.wait() == 1
    assert "is another broker running with broker.id=3" in duplicate.process.log()
    assert "Loaded" not in duplicate.process.log()
    assert first.process.popen.poll() is None
    wait_serving = health_pb2_grpc.HealthStub(grpc.insecure_channel(first.address))
    assert wait_serving.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_re_registers_after_session_expiry(zk_connect: str, tmp_path: Path, zk_client: KafkaZkClient,
                                          expire_session: Callable[[KafkaZkClient], None],
                                          wait_until: WaitUntil) -> None:
    """In-process, to reach the broker's own ZooKeeper session and expire it from the server side."""
    port = free_port()
    server = KafkaServer(KafkaConfig.from_props({
        "broker.id": "1", "zookeeper.connect": zk_connect, "listeners": f"GRPC://127.0.0.1:{port}",
        "log.dirs": str(tmp_path / "logs"), "cluster.credential": CREDENTIAL, "zookeeper.session.timeout.ms": "3000",
    }))
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(server.run(handle_signals=False))
        except BaseException as e:
            failures.append(e)

    thread = threading.Thread(target=serve, name="broker")
    thread.start()
    try:
        wait_until(lambda: server.broker_epoch > 0 or failures, message="the broker to register")
        assert not failures
        first_epoch = server.broker_epoch
        assert server.zk_client is not None
        expire_session(server.zk_client)

        def re_registered() -> bool:
            info = zk_client.get_broker(1)
            return info is not None and info.epoch == server.broker_epoch > first_epoch

        wait_until(re_registered, message="the broker to register again")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stale = pb_grpc.KafkaClusterStub(channel).UpdateMetadata(
                pb.UpdateMetadataRequest(controller_epoch=1, broker_epoch=first_epoch), metadata=AUTH)
            assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    finally:
        server.request_shutdown()
        thread.join(30)
    assert not failures and not thread.is_alive()


def test_sigkill_and_restart_recovers_the_log(start_broker: StartBroker, connect: Callable[..., BrokerClient],
                                              zk_client: KafkaZkClient) -> None:
    # The killed broker's registration outlives it by its session timeout: keep that short.
    broker = start_broker(1, {"zookeeper.session.timeout.ms": "2000"})
    c = connect(broker)
    c.create_topic()
    c.lead()
    for i in range(20):
        assert c.produce(batch(f"r{i}a", f"r{i}b"), acks=1).base_offset == 2 * i
    old_epoch = c.broker_epoch()
    assert stop(broker, signal.SIGKILL) == -signal.SIGKILL
    segment = broker.log_dir / f"{TOPIC}-0" / f"{0:020d}.log"
    with segment.open("ab") as f:
        f.write(batch("torn")[:30])  # the half-written batch a crash leaves
    # The old registration lives until its session expires; the restart waits it out.
    restarted = start_broker(1)
    c = connect(restarted)
    assert c.broker_epoch() > old_epoch
    assert "Found invalid messages in log segment" in restarted.process.log()
    c.controller_epoch = 2
    c.lead(leader_epoch=1)
    records = c.read_all()
    assert values(records) == [f"r{i}{s}".encode() for i in range(20) for s in "ab"]
    assert c.produce(batch("after")).base_offset == 40


# ------------------------------------------------------------------ produce and fetch


def test_produce_fetch_every_acks_and_codec(start_broker: StartBroker,
                                            connect: Callable[..., BrokerClient]) -> None:
    codecs = list(CompressionType)
    c = connect(start_broker(1))
    c.create_topic(partitions=len(codecs) + 1)
    c.lead(partitions=len(codecs) + 1)
    for partition, compression in enumerate(codecs, start=1):
        expected: list[bytes] = []
        for acks in (0, 1, -1):
            texts = [f"{compression.name}-{acks}-{i}" for i in range(50)]
            response = c.produce(batch(*texts, compression=compression), acks=acks, partition=partition)
            assert response.error_code == ErrorCode.NONE
            assert response.base_offset == (-1 if acks == 0 else len(expected))
            expected += [t.encode() for t in texts]
        assert values(c.read_all(partition=partition)) == expected
    assert c.read_all(partition=0) == []


def test_long_poll_is_completed_by_a_produce(start_broker: StartBroker,
                                             connect: Callable[..., BrokerClient]) -> None:
    c = connect(start_broker(1))
    c.create_topic()
    c.lead()
    answered: list[tuple[float, pb.FetchResponse]] = []
    began = time.monotonic()
    poll = threading.Thread(target=lambda: answered.append(
        (time.monotonic(), c.fetch(0, max_wait_ms=20_000, min_bytes=1))))
    poll.start()
    time.sleep(0.3)
    assert not answered
    c.produce(batch("wake", "up"), acks=1)
    poll.join(10)
    assert answered, "the long poll was not answered by the produce"
    at, response = answered[0]
    assert at - began < 5
    data = response.responses[0].partitions[0]
    assert data.high_watermark == 2
    assert [r.value for b in iter_batches(data.records) for r in b.records] == [b"wake", b"up"]


def test_idempotent_producer_duplicates_and_gaps(start_broker: StartBroker,
                                                 connect: Callable[..., BrokerClient]) -> None:
    broker = start_broker(1)
    c = connect(broker)
    c.create_topic()
    c.lead()
    init = c.client.InitProducerId(pb.InitProducerIdRequest())
    assert init.error_code == ErrorCode.NONE and init.producer_epoch == 0
    second = c.client.InitProducerId(pb.InitProducerIdRequest())
    assert second.producer_id == init.producer_id + 1
    pid = init.producer_id

    def idempotent(seq: int, *texts: str) -> bytes:
        # Current timestamps: a producer whose last batch is older than producer.id.expiration.ms is
        # forgotten when the state is reloaded.
        return build_batch([ProducerRecord(t.encode()) for t in texts], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, now_ms=time.time_ns() // 1_000_000)

    c.produce(batch("plain"))
    first = idempotent(0, "a", "b", "c")
    assert c.produce(first).base_offset == 1
    assert c.produce(idempotent(3, "d")).base_offset == 4
    retry = c.produce(first)  # the retry of a batch already in the log
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 1)
    gap = c.produce(idempotent(10, "x"))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert values(c.read_all()) == [b"plain", b"a", b"b", b"c", b"d"]

    # After a restart the producer state is rebuilt: the last batch's retry is still recognised.
    assert stop(broker) == 0
    c = connect(start_broker(1))
    c.controller_epoch = 2
    c.lead(leader_epoch=1)
    again = c.produce(idempotent(3, "d"))
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 4)
    assert c.produce(idempotent(4, "e")).base_offset == 5
    assert c.produce(idempotent(10, "x")).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_an_idle_producer_is_forgotten_by_the_periodic_expiration_check(start_broker: StartBroker,
                                                                        connect: Callable[..., BrokerClient]) -> None:
    """Kafka's PeriodicProducerExpirationCheck: every producer.id.expiration.check.interval.ms the broker forgets
    producers idle longer than producer.id.expiration.ms (100k producer ids cost 102 MB and were never freed). A
    forgotten producer's retry is a new append, not a duplicate, as in Kafka."""
    c = connect(start_broker(1, {"producer.id.expiration.ms": "2000",
                                 "producer.id.expiration.check.interval.ms": "200"}))
    c.create_topic()
    c.lead()
    pid = c.client.InitProducerId(pb.InitProducerIdRequest()).producer_id
    first = build_batch([ProducerRecord(b"once")], producer_id=pid, producer_epoch=0, base_sequence=0,
                        now_ms=time.time_ns() // 1_000_000)
    assert c.produce(first).base_offset == 0
    assert c.produce(first).base_offset == 0  # known: the retry is answered as the duplicate it is
    deadline = time.monotonic() + 30
    while (retry := c.produce(first)).base_offset == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 1), "the idle producer was never forgotten"


def test_list_offsets_and_offsets_for_leader_epoch(start_broker: StartBroker,
                                                   connect: Callable[..., BrokerClient]) -> None:
    c = connect(start_broker(1))
    c.create_topic()
    c.lead(leader_epoch=4)
    c.produce(build_batch([ProducerRecord(b"x", timestamp=1000 + i) for i in range(3)]))
    c.produce(build_batch([ProducerRecord(b"y", timestamp=9000 + i) for i in range(3)]))

    def list_offset(timestamp: int) -> tuple[int, int, int]:
        request = pb.ListOffsetsRequest(replica_id=-1)
        request.topics.add(name=TOPIC).partitions.add(partition_index=0, timestamp=timestamp, current_leader_epoch=-1)
        p = c.client.ListOffsets(request).topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert list_offset(-2) == (ErrorCode.NONE, 0, -1)
    assert list_offset(-1) == (ErrorCode.NONE, 6, -1)
    assert list_offset(9001) == (ErrorCode.NONE, 4, 9001)
    assert list_offset(50_000) == (ErrorCode.NONE, -1, -1)
    assert list_offset(-7)[0] == ErrorCode.INVALID_REQUEST

    request = pb.OffsetsForLeaderEpochRequest(replica_id=2)
    request.topics.add(topic=TOPIC).partitions.add(partition=0, current_leader_epoch=-1, leader_epoch=4)
    answer = c.cluster.OffsetsForLeaderEpoch(request, metadata=AUTH).topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, 4, 6)
    refused = c.cluster.OffsetsForLeaderEpoch(request).topics[0].partitions[0]
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # A consumer's (KIP-320) needs no cluster action: Describe on the topic, which everyone has here.
    request.replica_id = -1
    consumer = c.cluster.OffsetsForLeaderEpoch(request).topics[0].partitions[0]
    assert (consumer.error_code, consumer.leader_epoch, consumer.end_offset) == (ErrorCode.NONE, 4, 6)


# ------------------------------------------------------------------ bad input


def test_every_bad_input_gets_its_error_code(start_broker: StartBroker, connect: Callable[..., BrokerClient],
                                             zk_client: KafkaZkClient) -> None:
    broker = start_broker(1, {"message.max.bytes": "20000", "auto.create.topics.enable": "false"})
    c = connect(broker)
    c.create_topic()
    c.lead()
    good = batch("ok")
    assert c.produce(good).error_code == ErrorCode.NONE

    def produce_error(records: bytes, **kwargs: object) -> int:
        return c.produce(records, **kwargs).error_code  # type: ignore[arg-type]

    damaged = bytearray(good)
    damaged[CRC_POS] ^= 0xFF
    assert produce_error(good, topic="nope") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce_error(good, partition=7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce_error(good, partition=-1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce_error(bytes(damaged)) == ErrorCode.CORRUPT_MESSAGE
    assert produce_error(b"garbage" * 20) == ErrorCode.CORRUPT_MESSAGE
    assert produce_error(b"") == ErrorCode.INVALID_RECORD
    assert produce_error(batch("x" * 30_000)) == ErrorCode.MESSAGE_TOO_LARGE
    assert produce_error(good, acks=2) == ErrorCode.INVALID_REQUIRED_ACKS
    # The topic's min.insync.replicas beats the broker's 1: one in-sync replica is not enough for acks=all.
    # Refused at creation (larger than the replication factor), but an alteration can still get there.
    c.create_topic("strict")
    c.zk.set_topic_config("strict", {"min.insync.replicas": "2"})
    c.lead("strict")
    assert produce_error(good, topic="strict") == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_error(good, topic="strict", acks=1) == ErrorCode.NONE
    twice = pb.ProduceRequest(acks=1, timeout_ms=1000)
    topic = twice.topics.add(name=TOPIC)
    topic.partitions.add(index=0, records=good)
    topic.partitions.add(index=0, records=good)
    assert {p.error_code for p in c.client.Produce(twice).responses[0].partitions} == {ErrorCode.INVALID_REQUEST}

    out_of_range = c.fetch(99).responses[0].partitions[0]
    assert (out_of_range.error_code, out_of_range.log_start_offset, out_of_range.high_watermark) == (
        ErrorCode.OFFSET_OUT_OF_RANGE, 0, 1)
    assert c.fetch(0, topic="nope").responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    replica_fetch = c.fetch(0, replica_id=2)
    assert replica_fetch.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert replica_fetch.responses[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert c.fetch(0, replica_id=2, metadata=AUTH).responses[0].partitions[0].records

    metadata = c.client.Metadata(pb.MetadataRequest(topics=["nope", "bad/name", TOPIC],
                                                    allow_auto_topic_creation=True))
    assert [t.error_code for t in metadata.topics] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.NONE]
    assert zk_client.get_topic_assignment("nope") is None  # auto-creation is off on this broker

    # Controller requests: no credential, a stale controller epoch, an older broker epoch.
    me = broker.broker_id
    follower_state = pb.LeaderAndIsrPartitionState(topic_name=TOPIC, partition_index=0, controller_epoch=5,
                                                   leader=2, leader_epoch=9, isr=[2, me], replicas=[2, me])

    def leader_and_isr(controller_epoch: int, broker_epoch: int, metadata: tuple[tuple[str, str], ...] = AUTH
                       ) -> pb.LeaderAndIsrResponse:
        return c.cluster.LeaderAndIsr(pb.LeaderAndIsrRequest(
            controller_id=1000, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
            partition_states=[follower_state]), metadata=metadata)

    unauthorised = leader_and_isr(5, c.broker_epoch(), metadata=())
    assert unauthorised.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [e.error_code for e in unauthorised.partition_errors] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    wrong = leader_and_isr(5, c.broker_epoch(), metadata=((CLUSTER_CREDENTIAL_METADATA_KEY, "guess"),))
    assert wrong.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert leader_and_isr(0, c.broker_epoch()).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert leader_and_isr(5, c.broker_epoch() - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert c.cluster.UpdateMetadata(pb.UpdateMetadataRequest(controller_epoch=5)).error_code == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    stop_replica = pb.StopReplicaRequest(controller_epoch=5, broker_epoch=-1, delete_partitions=True,
                                         partitions=[pb.TopicPartition(topic_name=TOPIC, partition_index=0)])
    assert c.cluster.StopReplica(stop_replica).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # None of them changed anything: still the leader, log intact.
    assert c.produce(batch("still", "leader")).base_offset == 1
    assert values(c.read_all()) == [b"ok", b"still", b"leader"]

    stale = pb.LeaderAndIsrPartitionState(topic_name=TOPIC, partition_index=0, controller_epoch=1, leader=me,
                                          leader_epoch=0, isr=[me], replicas=[me])
    answer = c.cluster.LeaderAndIsr(pb.LeaderAndIsrRequest(controller_id=1000, controller_epoch=1, broker_epoch=-1,
                                                           partition_states=[stale]), metadata=AUTH)
    assert [e.error_code for e in answer.partition_errors] == [ErrorCode.STALE_CONTROLLER_EPOCH]
    assert c.health() == health_pb2.HealthCheckResponse.SERVING
    assert broker.process.popen.poll() is None


def test_admin_apis(start_broker: StartBroker, connect: Callable[..., BrokerClient],
                    zk_client: KafkaZkClient) -> None:
    c = connect(start_broker(1, {"num.partitions": "3"}))

    def create(**topic: object) -> pb.CreateTopicsResponse.CreatableTopicResult:
        request = pb.CreateTopicsRequest(timeout_ms=0)
        request.topics.add(**topic)  # type: ignore[arg-type]
        return c.client.CreateTopics(request).topics[0]

    created = create(name="defaults", num_partitions=-1, replication_factor=-1,
                     configs=[pb.CreateTopicsRequest.CreateableTopicConfig(name="retention.ms", value="60000")])
    assert (created.error_code, created.num_partitions, created.replication_factor) == (ErrorCode.NONE, 3, 1)
    assert zk_client.get_topic_config("defaults") == {"retention.ms": "60000"}
    assert create(name="defaults", num_partitions=1, replication_factor=1).error_code == \
        ErrorCode.TOPIC_ALREADY_EXISTS
    assert create(name="big", num_partitions=1, replication_factor=3).error_code == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert create(name="none", num_partitions=0, replication_factor=1).error_code == ErrorCode.INVALID_PARTITIONS
    assert create(name="cfg", num_partitions=1, replication_factor=1, configs=[
        pb.CreateTopicsRequest.CreateableTopicConfig(name="retention.ms", value="later")]).error_code == \
        ErrorCode.INVALID_CONFIG
    assert create(name="bad", assignments=[pb.CreateTopicsRequest.CreatableReplicaAssignment(
        partition_index=0, broker_ids=[1, 1])], num_partitions=-1, replication_factor=-1).error_code == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT

    # Auto-creation: LEADER_NOT_AVAILABLE until a controller elects a leader.
    metadata = c.client.Metadata(pb.MetadataRequest(topics=["auto"], allow_auto_topic_creation=True))
    assert metadata.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assignment = zk_client.get_topic_assignment("auto")
    assert assignment is not None and len(assignment.partitions) == 3

    deleted = c.client.DeleteTopics(pb.DeleteTopicsRequest(topic_names=["defaults", "unknown"]))
    assert [r.error_code for r in deleted.responses] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert zk_client.get_topic_deletions() == {"defaults"}

    # A transactional id belongs to the leader of its __transaction_state partition: none here yet. Its
    # transaction timeout is checked first (0 is none).
    assert c.client.InitProducerId(pb.InitProducerIdRequest(transactional_id="tx")).error_code == \
        ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert c.client.InitProducerId(pb.InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000)).error_code == ErrorCode.NOT_COORDINATOR


def test_with_the_real_controller(start_broker: StartBroker, connect: Callable[..., BrokerClient],
                                  processes: StartProcess, zk_connect: str, wait_until: WaitUntil) -> None:
    """CreateTopics waits for the controller's leaders; committed offsets are answered by the group's coordinator
    only."""
    two_brokers = {"offsets.topic.replication.factor": "2", "offsets.topic.num.partitions": "2"}
    brokers = [start_broker(1, two_brokers), start_broker(2, two_brokers)]
    processes("controller", [sys.executable, "-m", "controller.main", "--zookeeper", zk_connect,
                             "--controller-id", "1000", "--override", f"cluster.credential={CREDENTIAL}",
                             "--override", "zookeeper.session.timeout.ms=3000"])
    c1, c2 = (connect(b) for b in brokers)
    request = pb.CreateTopicsRequest(timeout_ms=20_000)
    request.topics.add(name="events", num_partitions=4, replication_factor=1)
    result = c1.client.CreateTopics(request, timeout=30).topics[0]
    assert result.error_code == ErrorCode.NONE, result.error_message
    metadata = c1.client.Metadata(pb.MetadataRequest(topics=["events"]))
    assert metadata.controller_id == 1000 and {b.node_id for b in metadata.brokers} == {1, 2}
    leaders = {p.partition_index: p.leader_id for p in metadata.topics[0].partitions}
    assert sorted(leaders) == [0, 1, 2, 3] and set(leaders.values()) <= {1, 2}
    for partition, leader in leaders.items():
        client = c1 if leader == 1 else c2
        # Broker 1's metadata may run ahead of broker 2's LeaderAndIsr (the controller sends each its own, and a
        # broker applies them off its event loop): as in Kafka, the leader answers UNKNOWN_TOPIC_OR_PARTITION, a
        # retriable error, until it has applied it.
        answers: list[pb.ProduceResponse] = []

        def produced(client: BrokerClient = client, partition: int = partition,
                     answers: list[pb.ProduceResponse] = answers) -> bool:
            answers.append(client.produce(batch(f"p{partition}"), topic="events", partition=partition))
            return answers[-1].error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        wait_until(produced, message=f"events-{partition}'s leader to apply its LeaderAndIsr")
        assert answers[-1].base_offset == 0
        assert values(client.read_all("events", partition)) == [f"p{partition}".encode()]

    # Committed offsets live with the group's coordinator, the leader of its __consumer_offsets partition (made
    # on the first FindCoordinator: COORDINATOR_NOT_AVAILABLE until it has leaders).
    def find() -> pb.FindCoordinatorResponse:
        return c1.client.FindCoordinator(pb.FindCoordinatorRequest(key="g"))

    wait_until(lambda: find().error_code == ErrorCode.NONE, message="the group's coordinator")
    found = find()
    coordinator, other = (c1, c2) if found.node_id == 1 else (c2, c1)
    assert found.port == (brokers[0] if found.node_id == 1 else brokers[1]).port
    commit = pb.OffsetCommitRequest(group_id="g", generation_id=-1)
    commit.topics.add(name="events").partitions.add(partition_index=1, committed_offset=42,
                                                    committed_metadata="meta")
    commit.topics.add(name="unknown").partitions.add(partition_index=0, committed_offset=1)

    def commit_errors() -> list[int]:
        return [t.partitions[0].error_code for t in coordinator.client.OffsetCommit(commit).topics]

    # The new leader of the group's partition loads it first (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    wait_until(lambda: commit_errors() != [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 2, message="the group loaded")
    assert commit_errors() == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    fetch = pb.OffsetFetchRequest(group_id="g")
    fetch.topics.add(name="events", partition_indexes=[1, 2])
    offsets = coordinator.client.OffsetFetch(fetch)
    assert offsets.error_code == ErrorCode.NONE
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in offsets.topics[0].partitions] == [
        (1, 42, "meta"), (2, -1, "")]
    everything = coordinator.client.OffsetFetch(pb.OffsetFetchRequest(group_id="g"))
    assert [(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions] == [
        ("events", 1, 42)]
    assert other.client.OffsetFetch(fetch).error_code == ErrorCode.NOT_COORDINATOR
    assert [p.error_code for t in other.client.OffsetCommit(commit).topics for p in t.partitions] == [
        ErrorCode.NOT_COORDINATOR] * 2
    # A commit naming a generation is a member's: the group has none (Kafka's UNKNOWN_MEMBER_ID).
    member_commit = pb.OffsetCommitRequest(group_id="g", generation_id=3, member_id="m-1")
    member_commit.topics.add(name="events").partitions.add(partition_index=1, committed_offset=50)
    assert [p.error_code for t in coordinator.client.OffsetCommit(member_commit).topics for p in t.partitions] == [
        ErrorCode.UNKNOWN_MEMBER_ID]
