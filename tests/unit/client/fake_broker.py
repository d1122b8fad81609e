"""An in-process, in-memory stand-in for one broker, so client tests run end to end in milliseconds.

It speaks the real gRPC contract and stores real RecordBatch bytes (offsets
patched in place, as a leader does), but has no log files, replication or
purgatory. Tests script failures with `fail_produce` / `fail_fetch`.
Integration tests against real brokers replace it (tests/integration).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict, deque
from concurrent import futures
from typing import Any

import grpc

from client.connection import channel_options
from common.record import parse_header, patch_base_offset_and_epoch, validate_batch
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.errors import ErrorCode
from proto.types import TopicPartition

NODE_ID = 1


class FakeBroker(pb_grpc.KafkaClientServicer):
    def __init__(self, default_partitions: int = 1) -> None:
        self.default_partitions = default_partitions
        self.topics: dict[str, int] = {}
        self.logs: dict[TopicPartition, list[bytes]] = defaultdict(list)
        self.next_offset: dict[TopicPartition, int] = defaultdict(int)
        # (producer id, partition) -> deque of (base sequence, base offset): the broker's last five batches.
        self.producer_batches: dict[tuple[int, TopicPartition], deque[tuple[int, int]]] = defaultdict(
            lambda: deque(maxlen=5))
        self.committed: dict[tuple[str, TopicPartition], int] = {}
        self.fail_produce: dict[TopicPartition, list[int]] = defaultdict(list)
        self.fail_fetch: dict[TopicPartition, list[int]] = defaultdict(list)
        self.produce_requests: list[pb.ProduceRequest] = []
        self.init_producer_id_error = 0  # e.g. CLUSTER_AUTHORIZATION_FAILED: a principal without IdempotentWrite
        # The transaction coordinator's script: per RPC name, error codes answered (first first) before NONE; and
        # every transactional call and transactional Produce in arrival order.
        self.txn_errors: dict[str, deque[int]] = defaultdict(deque)
        self.txn_calls: list[tuple[Any, ...]] = []
        self._producer_ids = itertools.count(1000)
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=channel_options(50, 1000))
        pb_grpc.add_KafkaClientServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(None)

    def create(self, topic: str, partitions: int) -> None:
        self.topics[topic] = partitions

    # ------------------------------------------------------------------ metadata and admin

    def Metadata(self, request: pb.MetadataRequest, context: Any) -> pb.MetadataResponse:
        response = pb.MetadataResponse(cluster_id="fake-cluster", controller_id=NODE_ID)
        response.brokers.add(node_id=NODE_ID, host="127.0.0.1", port=self.port)
        with self._lock:
            for name in request.topics or sorted(self.topics):
                if name not in self.topics and request.allow_auto_topic_creation:
                    self.topics[name] = self.default_partitions
                topic = response.topics.add(name=name)
                if name not in self.topics:
                    topic.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                for p in range(self.topics[name]):
                    topic.partitions.add(partition_index=p, leader_id=NODE_ID, leader_epoch=0,
                                         replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])
        return response

    def CreateTopics(self, request: pb.CreateTopicsRequest, context: Any) -> pb.CreateTopicsResponse:
        response = pb.CreateTopicsResponse()
        with self._lock:
            for topic in request.topics:
                result = response.topics.add(name=topic.name)
                if topic.name in self.topics:
                    result.error_code = ErrorCode.TOPIC_ALREADY_EXISTS
                    result.error_message = f"Topic '{topic.name}' already exists."
                elif not request.validate_only:
                    partitions = len(topic.assignments) or topic.num_partitions
                    self.topics[topic.name] = partitions if partitions > 0 else self.default_partitions
        return response

    def DeleteTopics(self, request: pb.DeleteTopicsRequest, context: Any) -> pb.DeleteTopicsResponse:
        response = pb.DeleteTopicsResponse()
        with self._lock:
            for name in request.topic_names:
                known = self.topics.pop(name, None) is not None
                code = ErrorCode.NONE if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                response.responses.add(name=name, error_code=code)
        return response

    def _txn_error(self, rpc: str, *call: Any) -> int:
        with self._lock:
            self.txn_calls.append((rpc, *call))
            return self.txn_errors[rpc].popleft() if self.txn_errors[rpc] else ErrorCode.NONE

    def InitProducerId(self, request: pb.InitProducerIdRequest, context: Any) -> pb.InitProducerIdResponse:
        if request.HasField("transactional_id"):
            error = self._txn_error("InitProducerId", request.producer_id if request.HasField("producer_id") else -1)
            if error:
                return pb.InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
            epoch = request.producer_epoch + 1 if request.HasField("producer_epoch") else 0
            return pb.InitProducerIdResponse(producer_id=request.producer_id or 4000, producer_epoch=epoch)
        if self.init_producer_id_error:
            return pb.InitProducerIdResponse(error_code=self.init_producer_id_error, producer_id=-1, producer_epoch=-1)
        return pb.InitProducerIdResponse(producer_id=next(self._producer_ids), producer_epoch=0)

    # ------------------------------------------------------------------ data

    def Produce(self, request: pb.ProduceRequest, context: Any) -> pb.ProduceResponse:
        response = pb.ProduceResponse()
        with self._lock:
            self.produce_requests.append(request)
            if request.HasField("transactional_id"):
                self.txn_calls += [("Produce", TopicPartition(t.name, p.index)) for t in request.topics
                                   for p in t.partitions]
            for topic in request.topics:
                out = response.responses.add(name=topic.name)
                for part in topic.partitions:
                    out.partitions.add(index=part.index, **self._append(TopicPartition(topic.name, part.index),
                                                                       part.records))
        return response

    def _append(self, tp: TopicPartition, records: bytes) -> dict[str, int]:
        if tp.topic not in self.topics or tp.partition >= self.topics[tp.topic]:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        if self.fail_produce[tp]:
            return {"error_code": self.fail_produce[tp].pop(0)}
        header = validate_batch(records)
        if header.producer_id >= 0:
            seen = self.producer_batches[header.producer_id, tp]
            for sequence, offset in seen:  # duplicates only: the fake does not check for gaps
                if sequence == header.base_sequence:
                    return {"error_code": ErrorCode.DUPLICATE_SEQUENCE_NUMBER, "base_offset": offset}
        batch = bytearray(records)
        base_offset = self.next_offset[tp]
        patch_base_offset_and_epoch(batch, 0, base_offset, 0)
        self.logs[tp].append(bytes(batch))
        self.next_offset[tp] = base_offset + header.record_count
        if header.producer_id >= 0:
            self.producer_batches[header.producer_id, tp].append((header.base_sequence, base_offset))
        return {"base_offset": base_offset, "log_append_time_ms": -1, "log_start_offset": 0}

    def Fetch(self, request: pb.FetchRequest, context: Any) -> pb.FetchResponse:
        response = pb.FetchResponse()
        with self._lock:
            for topic in request.topics:
                out = response.responses.add(topic=topic.topic)
                for part in topic.partitions:
                    tp = TopicPartition(topic.topic, part.partition)
                    data = out.partitions.add(partition_index=part.partition, high_watermark=self.next_offset[tp],
                                              last_stable_offset=self.next_offset[tp], log_start_offset=0)
                    if self.fail_fetch[tp]:
                        data.error_code = self.fail_fetch[tp].pop(0)
                    elif tp.topic not in self.topics:
                        data.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif part.fetch_offset > self.next_offset[tp]:
                        data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    else:
                        data.records = self._read(tp, part.fetch_offset, part.partition_max_bytes)
        return response

    def _read(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for batch in self.logs[tp]:
            if parse_header(batch).last_offset >= offset and (not out or len(out) + len(batch) <= max_bytes):
                out += batch
        return bytes(out)

    def ListOffsets(self, request: pb.ListOffsetsRequest, context: Any) -> pb.ListOffsetsResponse:
        response = pb.ListOffsetsResponse()
        with self._lock:
            for topic in request.topics:
                out = response.topics.add(name=topic.name)
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    offset = {-1: self.next_offset[tp], -2: 0}.get(part.timestamp, -1)
                    out.partitions.add(partition_index=part.partition_index, offset=offset, timestamp=-1)
        return response

    def FindCoordinator(self, request: pb.FindCoordinatorRequest, context: Any) -> pb.FindCoordinatorResponse:
        """The one broker coordinates every group (standalone commits only: no JoinGroup here) and every
        transactional id."""
        if request.key_type == 1:
            self._txn_error("FindCoordinator")
        return pb.FindCoordinatorResponse(node_id=NODE_ID, host="127.0.0.1", port=self.port)

    def AddPartitionsToTxn(self, request: pb.AddPartitionsToTxnRequest,
                           context: Any) -> pb.AddPartitionsToTxnResponse:
        partitions = sorted(TopicPartition(t.name, index) for t in request.topics for index in t.partitions)
        error = self._txn_error("AddPartitionsToTxn", request.producer_epoch, partitions)
        response = pb.AddPartitionsToTxnResponse()
        for t in request.topics:
            response.results.add(name=t.name, results=[
                pb.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=i, error_code=error)
                for i in t.partitions])
        return response

    def AddOffsetsToTxn(self, request: pb.AddOffsetsToTxnRequest, context: Any) -> pb.AddOffsetsToTxnResponse:
        return pb.AddOffsetsToTxnResponse(error_code=self._txn_error("AddOffsetsToTxn", request.group_id))

    def TxnOffsetCommit(self, request: pb.TxnOffsetCommitRequest, context: Any) -> pb.TxnOffsetCommitResponse:
        offsets = {TopicPartition(t.name, p.partition_index): p.committed_offset
                   for t in request.topics for p in t.partitions}
        error = self._txn_error("TxnOffsetCommit", request.group_id, request.generation_id, request.member_id,
                                offsets)
        response = pb.TxnOffsetCommitResponse()
        for t in request.topics:
            response.topics.add(name=t.name, partitions=[
                pb.OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                                      error_code=error)
                for p in t.partitions])
        return response

    def EndTxn(self, request: pb.EndTxnRequest, context: Any) -> pb.EndTxnResponse:
        return pb.EndTxnResponse(error_code=self._txn_error("EndTxn", request.producer_epoch, request.committed))

    def OffsetCommit(self, request: pb.OffsetCommitRequest, context: Any) -> pb.OffsetCommitResponse:
        response = pb.OffsetCommitResponse()
        with self._lock:
            for topic in request.topics:
                out = response.topics.add(name=topic.name)
                for part in topic.partitions:
                    self.committed[request.group_id, TopicPartition(topic.name, part.partition_index)] = \
                        part.committed_offset
                    out.partitions.add(partition_index=part.partition_index)
        return response

    def OffsetFetch(self, request: pb.OffsetFetchRequest, context: Any) -> pb.OffsetFetchResponse:
        response = pb.OffsetFetchResponse()
        with self._lock:
            for topic in request.topics:
                out = response.topics.add(name=topic.name)
                for p in topic.partition_indexes:
                    offset = self.committed.get((request.group_id, TopicPartition(topic.name, p)), -1)
                    out.partitions.add(partition_index=p, committed_offset=offset, committed_leader_epoch=-1)
        return response
