"""A transactional producer's and a transaction coordinator's requests to a partition leader's Kafka listener,
made with the project's codec, for the tests that need transactions before the project has a coordinator:
InitProducerId, Produce of transactional batches (the request carrying a transactional id, as a transactional
producer's does) and WriteTxnMarkers (a coordinator's markers, ClusterAction)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.init_producer_id.v1.request import InitProducerIdRequest
from kio.schema.init_producer_id.v1.response import InitProducerIdResponse
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v8.response import ProduceResponse
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import Records, i16, i32, i32Timedelta

from common.record import ProducerRecord, build_batch
from tests.integration.kafka_wire import WireConnection, encode_request


class TransactionWire:
    """Transactions on one partition, written to its leader at `address`: acks=all produces, markers with
    coordinator epoch 0 and producer epoch 0."""

    def __init__(self, address: str, topic: str, partition: int = 0,
                 transactional_id: str = "partition-side-test") -> None:
        self.conn = WireConnection(address)
        self.topic = topic
        self.partition = partition
        self.transactional_id = transactional_id
        self.correlation_id = 0
        self.sequences: dict[int, int] = {}

    def _call(self, request: Any, response_type: type[Any]) -> Any:
        self.correlation_id += 1
        self.conn.send(encode_request(request, self.correlation_id))
        correlation_id, body = self.conn.receive_body(response_type)
        assert correlation_id == self.correlation_id
        return body

    def init_producer_id(self) -> int:
        answer = self._call(InitProducerIdRequest(transactional_id=None, transaction_timeout=i32Timedelta.parse(
            datetime.timedelta(minutes=1))), InitProducerIdResponse)
        assert answer.error_code == 0 and answer.producer_epoch == 0
        self.sequences[answer.producer_id] = 0
        return int(answer.producer_id)

    def produce(self, values: list[bytes], producer_id: int | None = None) -> int:
        """acks=all; transactional when from `producer_id`; returns the base offset."""
        if producer_id is None:
            batch = build_batch([ProducerRecord(v) for v in values])
        else:
            batch = build_batch([ProducerRecord(v) for v in values], producer_id=producer_id, producer_epoch=0,
                                base_sequence=self.sequences[producer_id], is_transactional=True)
            self.sequences[producer_id] += len(values)
        answer = self._call(ProduceRequest(
            transactional_id=None if producer_id is None else TransactionalId(self.transactional_id), acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(TopicProduceData(name=TopicName(self.topic), partition_data=(
                PartitionProduceData(index=i32(self.partition), records=Records(batch)),)),)), ProduceResponse)
        [partition] = answer.responses[0].partition_responses
        assert partition.error_code == 0, partition
        return int(partition.base_offset)

    def write_marker(self, producer_id: int, commit: bool) -> None:
        answer = self._call(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=ProducerId(producer_id), producer_epoch=i16(0), transaction_result=commit,
            topics=(WritableTxnMarkerTopic(name=TopicName(self.topic), partition_indexes=(i32(self.partition),)),),
            coordinator_epoch=i32(0)),)), WriteTxnMarkersResponse)
        [marker] = answer.markers
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in marker.topics] == [
            (self.topic, [(self.partition, 0)])]

    def close(self) -> None:
        self.conn.close()
