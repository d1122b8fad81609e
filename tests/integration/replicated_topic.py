"""One partition replicated on three real brokers and a controller, reached over gRPC: what the replication and
live-config tests share (the cluster, the fast replication settings, an acks=all produce)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import grpc

from common.record import ProducerRecord, build_batch
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import BrokerProcess, StartBrokers, StartController, WaitUntil

BROKER_IDS = (1, 2, 3)
# Followers that fetch, time out and fall out of the ISR within seconds, so a test sees each rule act quickly.
FAST_REPLICATION = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.socket.timeout.ms": "3000",
}


@dataclass
class ReplicatedTopic:
    brokers: dict[int, BrokerProcess]
    zk: KafkaZkClient
    channels: dict[int, grpc.Channel]
    topic: str

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, 0)

    def client(self, broker_id: int) -> pb_grpc.KafkaClientStub:
        return pb_grpc.KafkaClientStub(self.channels[broker_id])

    def isr(self) -> tuple[int, ...]:
        state = self.zk.get_partition_state(self.tp)
        assert state is not None
        return tuple(sorted(state.isr))

    def leader(self) -> int:
        state = self.zk.get_partition_state(self.tp)
        assert state is not None
        return state.leader

    def followers(self) -> list[int]:
        return [b for b in BROKER_IDS if b != self.leader()]

    def produce(self, *values: str, timeout_ms: int = 10_000, pad_to: int = 0,
                timestamp_ms: int | None = 1_000) -> pb.ProduceResponse.PartitionProduceResponse:
        """One acks=all batch to the leader; `timestamp_ms=None` stamps the records now (for retention)."""
        request = pb.ProduceRequest(acks=-1, timeout_ms=timeout_ms)
        timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        records = build_batch([ProducerRecord(v.encode().ljust(pad_to, b"x"), timestamp=timestamp) for v in values])
        request.topics.add(name=self.topic).partitions.add(index=0, records=records)
        return self.client(self.leader()).Produce(request, timeout=30).responses[0].partitions[0]


T = TypeVar("T", bound=ReplicatedTopic)


@contextmanager
def replicated_topic(kind: type[T], start_brokers: StartBrokers, start_controller: StartController,
                     zk: KafkaZkClient, wait_until: WaitUntil, topic: str, min_insync_replicas: int,
                     broker_overrides: Mapping[str, str]) -> Iterator[T]:
    """Brokers 1-3 and a controller; `topic` with RF 3, in sync, after a first acks=all produce went through.
    `kind` is the test's ReplicatedTopic subclass (its own helpers on top)."""
    brokers = start_brokers(BROKER_IDS, dict(broker_overrides))
    start_controller()
    channels = {b: grpc.insecure_channel(broker.address) for b, broker in brokers.items()}
    cluster = kind(brokers, zk, channels, topic)
    try:
        request = pb.CreateTopicsRequest(timeout_ms=20_000)
        request.topics.add(name=topic, num_partitions=1, replication_factor=3, configs=[
            pb.CreateTopicsRequest.CreateableTopicConfig(name="min.insync.replicas", value=str(min_insync_replicas))])
        result = cluster.client(1).CreateTopics(request, timeout=30).topics[0]
        assert result.error_code == ErrorCode.NONE, result.error_message
        # Every broker knows the leader (UpdateMetadata) and the followers fetch: acks=all can complete.
        wait_until(lambda: cluster.produce("warm-up").error_code == ErrorCode.NONE, message="a first acks=all produce")
        yield cluster
    finally:
        for channel in channels.values():
            channel.close()
