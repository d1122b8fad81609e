"""The leader over gRPC, as a fetcher thread calls it (Kafka 2.x's ReplicaFetcherBlockingSend), its fetches
in one fetch session (broker/fetcher/fetch_session_handler.py).

One channel per fetcher thread, synchronous calls (the thread has nothing
else to do while it waits), every call carrying the cluster credential (on plaintext; over TLS the
broker's certificate proves it) and
replica.socket.timeout.ms as its deadline. Closing the channel fails a call in
flight at once, which is how a fetcher blocked in a long poll is stopped.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from broker.fetcher.fetch_session_handler import SESSION_ERRORS, FetchSessionHandler
from broker.fetcher.protocol import (
    BrokerEndPoint,
    EpochEndOffset,
    EpochRequest,
    FetchPartitions,
    FetchRequestPartition,
    FetchResponsePartition,
    ReplicaFetcherConfig,
)
from common.grpc_tls import PLAINTEXT, GrpcSecurity
from common.limits import MESSAGE_SIZE_OPTIONS
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import cluster_credential_metadata
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

_READ_UNCOMMITTED = 0


class ReplicaFetcherBlockingSend:
    def __init__(self, source_broker: BrokerEndPoint, broker_id: int, credential: str | None,
                 config: ReplicaFetcherConfig, security: GrpcSecurity = PLAINTEXT) -> None:
        self._broker_id = broker_id
        self._leader_id = source_broker.id
        self._config = config
        self._session = FetchSessionHandler()  # one fetcher thread calls fetch(): no lock
        host = f"[{source_broker.host}]" if ":" in source_broker.host else source_broker.host
        # Kafka's ReplicaFetcherBlockingSend reconnects with no backoff of its own: the fetcher thread waits
        # replica.fetch.backoff.ms after a failure. gRPC's default (up to 120 s between attempts) would
        # leave a restarted leader's followers, and its way back into the ISR, waiting long after it serves.
        backoff_ms = max(config.fetch_backoff_ms, 1)
        # Over TLS (the inter-broker listener's stores) this broker's certificate is what proves it a replica.
        self._channel = security.channel(f"{host}:{source_broker.port}", options=[
            *MESSAGE_SIZE_OPTIONS,
            ("grpc.initial_reconnect_backoff_ms", backoff_ms),
            ("grpc.min_reconnect_backoff_ms", backoff_ms),
            ("grpc.max_reconnect_backoff_ms", backoff_ms),
        ])
        self._client = pb_grpc.KafkaClientStub(self._channel)
        self._cluster = pb_grpc.KafkaClusterStub(self._channel)
        self._metadata = cluster_credential_metadata(credential, security.tls)
        # The leader may hold the fetch for replica.fetch.wait.max.ms; the socket timeout bounds the rest.
        self._timeout_s = (config.socket_timeout_ms + config.fetch_wait_max_ms) / 1000

    def fetch(self, partitions: FetchPartitions) -> dict[TopicPartition, FetchResponsePartition]:
        """In the fetch session with this leader (KIP-227): only the partitions the leader answered come back;
        after a session error none do, and the next call is a full fetch."""
        config = self._config
        session = self._session.build(partitions)
        request = pb.FetchRequest(replica_id=self._broker_id, max_wait_ms=config.fetch_wait_max_ms,
                                  min_bytes=config.fetch_min_bytes, max_bytes=config.fetch_response_max_bytes,
                                  isolation_level=_READ_UNCOMMITTED, session_id=session.session_id,
                                  session_epoch=session.epoch)
        by_topic: dict[str, list[FetchRequestPartition]] = defaultdict(list)
        for p in session.partitions:
            by_topic[p.topic_partition.topic].append(p)
        for topic, topic_partitions in by_topic.items():
            request.topics.add(topic=topic, partitions=[
                pb.FetchRequest.FetchPartition(partition=p.topic_partition.partition,
                                               current_leader_epoch=p.current_leader_epoch,
                                               fetch_offset=p.fetch_offset, log_start_offset=p.log_start_offset,
                                               partition_max_bytes=p.max_bytes)
                for p in topic_partitions])
        forgotten: dict[str, list[int]] = defaultdict(list)
        for tp in session.forgotten:
            forgotten[tp.topic].append(tp.partition)
        for topic, indexes in forgotten.items():
            request.forgotten_topics_data.add(topic=topic, partitions=indexes)
        try:
            response = self._client.Fetch(request, timeout=self._timeout_s, metadata=self._metadata)
        except BaseException:
            self._session.handle_error()
            raise
        error = ErrorCode(response.error_code)
        answered = {
            TopicPartition(t.topic, p.partition_index): FetchResponsePartition(
                ErrorCode(p.error_code), p.high_watermark, p.log_start_offset, p.records)
            for t in response.responses for p in t.partitions
        }
        if not self._session.handle_response(error, response.session_id, answered):
            if error is not ErrorCode.NONE and error not in SESSION_ERRORS:
                raise KafkaError("replica fetch refused", error)
            logger.info("Fetch session %d with broker %d: %s; the next fetch is full", session.session_id,
                        self._leader_id, error.name)
            return {}
        return answered

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, EpochRequest]
                                 ) -> dict[TopicPartition, EpochEndOffset]:
        request = pb.OffsetsForLeaderEpochRequest(replica_id=self._broker_id)
        by_topic: dict[str, list[tuple[int, EpochRequest]]] = defaultdict(list)
        for tp, epochs in partitions.items():
            by_topic[tp.topic].append((tp.partition, epochs))
        for topic, entries in by_topic.items():
            request.topics.add(topic=topic, partitions=[
                pb.OffsetsForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=index, current_leader_epoch=e.current_leader_epoch, leader_epoch=e.leader_epoch)
                for index, e in entries])
        response = self._cluster.OffsetsForLeaderEpoch(request, timeout=self._config.socket_timeout_ms / 1000,
                                                       metadata=self._metadata)
        return {
            TopicPartition(t.topic, p.partition): EpochEndOffset(ErrorCode(p.error_code), p.leader_epoch,
                                                                 p.end_offset)
            for t in response.topics for p in t.partitions
        }

    def list_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        request = pb.ListOffsetsRequest(replica_id=self._broker_id, isolation_level=_READ_UNCOMMITTED)
        request.topics.add(name=tp.topic).partitions.add(partition_index=tp.partition,
                                                         current_leader_epoch=current_leader_epoch,
                                                         timestamp=timestamp)
        response = self._client.ListOffsets(request, timeout=self._config.socket_timeout_ms / 1000,
                                            metadata=self._metadata)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(f"ListOffsets for {tp} failed", ErrorCode(answer.error_code))
        return int(answer.offset)

    def close(self) -> None:
        self._channel.close()
