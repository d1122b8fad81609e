"""Cost of the Kafka wire codec (kio) on the Produce path, per request/response.

Builds a Produce v8 request of a typical librdkafka shape (one topic, N partitions,
one RecordBatch v2 of `--records` 100-byte records each), then times in one run:

- decode: request header v1 + ProduceRequest v8 body with kio's native reader;
- encode: ProduceResponse v8 for the same partitions with kio's writer;
- baseline: building the record batches themselves with broker/log/record.py
  (what a producer pays anyway), so the codec's share is visible.

    .venv/bin/python bench/kafka_codec_bench.py [--partitions 6] [--records 100] [--iterations 20000]
"""

from __future__ import annotations

import argparse
import datetime
import io
import time

from kio.schema.errors import ErrorCode
from kio.schema.produce.v8 import ProduceRequest, ProduceResponse
from kio.schema.produce.v8.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v8.response import PartitionProduceResponse, TopicProduceResponse
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from common.record import ProducerRecord, build_batch


def _request_bytes(partitions: int, records: int) -> bytes:
    batch = build_batch([ProducerRecord(b"x" * 100, b"k") for _ in range(records)])
    body = ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=30_000)),
        topic_data=(TopicProduceData(name=TopicName("bench"), partition_data=tuple(
            PartitionProduceData(index=i32(p), records=Records(batch)) for p in range(partitions))),),
    )
    out = io.BytesIO()
    entity_writer(RequestHeader)(out, RequestHeader(request_api_key=i16(0), request_api_version=i16(8),
                                                    correlation_id=i32(7), client_id="bench"))
    entity_writer(ProduceRequest)(out, body)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=20_000)
    args = parser.parse_args()
    frame = _request_bytes(args.partitions, args.records)
    read_header, read_body = entity_reader(RequestHeader), entity_reader(ProduceRequest)
    write_response = entity_writer(ProduceResponse)

    start = time.perf_counter()
    for _ in range(args.iterations):
        _, used = read_header(frame, 0)
        request, _ = read_body(frame, used)
    decode = (time.perf_counter() - start) / args.iterations

    start = time.perf_counter()
    for _ in range(args.iterations):
        response = ProduceResponse(responses=tuple(
            TopicProduceResponse(name=t.name, partition_responses=tuple(
                PartitionProduceResponse(index=p.index, error_code=ErrorCode.none, base_offset=i64(0),
                                         log_append_time=None, log_start_offset=i64(0), record_errors=(),
                                         error_message=None)
                for p in t.partition_data)) for t in request.topic_data),
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)))
        out = io.BytesIO()
        write_response(out, response)
    encode = (time.perf_counter() - start) / args.iterations

    build_iters = max(1, args.iterations // 20)
    start = time.perf_counter()
    for _ in range(build_iters):
        for _ in range(args.partitions):
            build_batch([ProducerRecord(b"x" * 100, b"k") for _ in range(args.records)])
    build = (time.perf_counter() - start) / build_iters

    print(f"Produce v8 request: {len(frame)} bytes, {args.partitions} partitions x {args.records} records of 100 B")
    print(f"decode (header + body, kio native reader): {decode * 1e6:8.1f} us/request")
    print(f"encode (response, kio writer):             {encode * 1e6:8.1f} us/response")
    print(f"baseline: building those batches:         {build * 1e6:8.1f} us/request")
    per_record = (decode + encode) / (args.partitions * args.records)
    print(f"codec cost per record: {per_record * 1e9:.0f} ns (= {1 / per_record:,.0f} records/s of one core)")


if __name__ == "__main__":
    main()
