"""The producer's Sender, one pass at a time, against fake metadata and connections (no threads, no sleeps)."""

from __future__ import annotations

import pytest
from client_helpers import FakeFuture, FakeMetadata, cluster

from client.accumulator import RecordAccumulator
from client.errors import KafkaTimeoutError
from client.future import FutureRecordMetadata
from client.idempotence import TransactionManager
from client.sender import Sender
from common.record import CompressionType, validate_batch
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from tests.fakes import FakeMonotonic

TP = TopicPartition("t", 0)


class Harness:
    def __init__(self, *, idempotent: bool = False, acks: int = -1, retries: int = 10, max_in_flight: int = 5,
                 delivery_timeout_ms: int = 120_000) -> None:
        self.clock = FakeMonotonic()
        self.metadata = FakeMetadata(cluster({"t": 2}))
        self.txn = TransactionManager() if idempotent else None
        self.accumulator = RecordAccumulator(
            batch_size=16384, linger_ms=0, retry_backoff_ms=100, delivery_timeout_ms=delivery_timeout_ms,
            max_in_flight_per_partition=max_in_flight if idempotent else 1, clock=self.clock)
        self.sender = Sender(self.accumulator, self.metadata, acks=acks, retries=retries,  # type: ignore[arg-type]
                             compression=CompressionType.NONE, request_timeout_ms=30_000,
                             delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=100,
                             max_in_flight_requests_per_connection=5, max_request_size=1 << 20,
                             transaction_manager=self.txn, clock=self.clock)
        if idempotent:
            self.metadata.any_answers["InitProducerId"] = [pb.InitProducerIdResponse(producer_id=42, producer_epoch=3),
                                                           pb.InitProducerIdResponse(producer_id=43, producer_epoch=0)]
        self.connection = self.metadata.connection(1)

    def send(self, n: int = 1, tp: TopicPartition = TP) -> list[FutureRecordMetadata]:
        futures = []
        for i in range(n):
            future = self.accumulator.append(tp, 1_700_000_000_000 + i, None, b"value-%d" % i, (), -1, 7, -1)
            assert future is not None
            futures.append(future)
        return futures

    def run(self) -> float:
        return self.sender.run_once()

    def produce_calls(self) -> list[tuple[pb.ProduceRequest, FakeFuture]]:
        return [(request, future) for name, request, future in self.connection.calls if name == "Produce"]

    def answer(self, index: int, code: int = 0, base_offset: int = 0) -> None:
        request, future = self.produce_calls()[index]
        response = pb.ProduceResponse()
        for topic in request.topics:
            out = response.responses.add(name=topic.name)
            for part in topic.partitions:
                out.partitions.add(index=part.index, error_code=code, base_offset=base_offset,
                                   log_append_time_ms=-1, log_start_offset=0)
        future.settle(response)


def batch_bytes(request: pb.ProduceRequest) -> bytes:
    return request.topics[0].partitions[0].records


def test_success_completes_futures_with_offsets() -> None:
    h = Harness()
    futures = h.send(3)
    h.run()
    (request, _), = h.produce_calls()
    assert request.acks == -1 and request.timeout_ms == 30_000
    h.answer(0, base_offset=100)
    h.run()
    assert [f.get(0).offset for f in futures] == [100, 101, 102]
    assert futures[1].get(0).timestamp == 1_700_000_000_001


def test_not_leader_refreshes_metadata_and_retries_after_backoff() -> None:
    h = Harness()
    futures = h.send(2)
    h.run()
    h.answer(0, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.run() == pytest.approx(100)  # nothing to do until retry_backoff_ms has passed
    assert h.metadata.updates_requested == 1 and len(h.produce_calls()) == 1 and not futures[0].done()
    h.clock.advance(100)
    h.run()
    assert len(h.produce_calls()) == 2
    h.answer(1, base_offset=7)
    h.run()
    assert [f.get(0).offset for f in futures] == [7, 8]


def test_a_new_leader_found_by_the_pass_s_metadata_refresh_gets_the_batch_in_that_pass() -> None:
    """The refresh and the ready check see the same leaders: a batch whose leader moved is not left waiting for its
    delivery timeout."""
    h = Harness()
    futures = h.send(1)
    h.run()
    h.answer(0, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    h.run()
    moved = cluster({"t": 2}, leaders={("t", 0): 2})

    def refresh(timeout_ms: float | None = None) -> bool:
        h.metadata.cluster = moved
        return True

    h.metadata.time_to_next_update = lambda now_ms: 0.0  # type: ignore[method-assign]
    h.metadata.maybe_refresh = refresh  # type: ignore[method-assign]
    h.clock.advance(100)
    h.run()
    (future,) = [f for name, _, f in h.metadata.connection(2).calls if name == "Produce"]
    response = pb.ProduceResponse()
    response.responses.add(name="t").partitions.add(index=0, base_offset=5, log_append_time_ms=-1)
    future.settle(response)
    h.run()
    assert futures[0].get(0).offset == 5


def test_transport_failure_is_retried_like_a_network_exception() -> None:
    h = Harness()
    futures = h.send(1)
    h.run()
    h.produce_calls()[0][1].settle(error=KafkaError("gone", ErrorCode.NETWORK_EXCEPTION))
    h.run()
    assert h.metadata.updates_requested == 1
    h.clock.advance(100)
    h.run()
    h.answer(1, base_offset=3)
    h.run()
    assert futures[0].get(0).offset == 3


def test_non_retriable_error_fails_the_futures() -> None:
    h = Harness()
    futures = h.send(2)
    h.run()
    h.answer(0, code=ErrorCode.INVALID_RECORD)
    h.run()
    for future in futures:
        assert future.failed()
        with pytest.raises(KafkaError) as err:
            future.get(0)
        assert err.value.code == ErrorCode.INVALID_RECORD
    assert len(h.produce_calls()) == 1


def test_retries_exhausted_fail_with_the_last_error() -> None:
    h = Harness(retries=1)
    futures = h.send(1)
    h.run()
    h.answer(0, code=ErrorCode.NOT_ENOUGH_REPLICAS)
    h.run()
    h.clock.advance(100)
    h.run()
    h.answer(1, code=ErrorCode.NOT_ENOUGH_REPLICAS)
    h.run()
    assert futures[0].exception(0).code == ErrorCode.NOT_ENOUGH_REPLICAS  # type: ignore[union-attr]


def test_batches_past_delivery_timeout_fail_with_a_timeout() -> None:
    h = Harness(delivery_timeout_ms=30_000)
    h.metadata.cluster = cluster({})  # no leader: the batch cannot go anywhere
    futures = h.send(1)
    h.run()
    h.clock.advance(30_000)
    h.run()
    assert isinstance(futures[0].exception(0), KafkaTimeoutError)


@pytest.mark.parametrize("answer", [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT])
def test_a_batch_expiring_between_retries_reports_the_last_error(answer: ErrorCode) -> None:
    """min.insync.replicas above the replication factor: every attempt is answered NOT_ENOUGH_REPLICAS; when the
    delivery timeout ends the retries, that is what the caller learns (Kafka reports the last error seen). A
    batch whose last attempt timed out fails as a timeout."""
    h = Harness(delivery_timeout_ms=30_000)
    futures = h.send(1)
    h.run()
    for attempt in range(3):
        h.clock.advance(100)
        h.run()
        h.answer(attempt, code=answer)
        h.run()  # back in the queue for its retry backoff
    h.clock.advance(30_000)
    h.run()
    error = futures[0].exception(0)
    assert isinstance(error, KafkaError) and error.code == answer
    assert isinstance(error, KafkaTimeoutError) == (answer == ErrorCode.REQUEST_TIMED_OUT)
    assert "has passed since batch creation" in str(error)


def test_acks_zero_completes_on_send_with_offset_minus_one() -> None:
    h = Harness(acks=0)
    futures = h.send(2)
    h.run()
    assert [f.get(0).offset for f in futures] == [-1, -1]
    h.answer(0, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    h.run()
    h.clock.advance(1000)
    h.run()
    assert len(h.produce_calls()) == 1  # acks=0 never retries: nothing says the send failed


def test_one_request_per_broker_with_one_batch_per_partition() -> None:
    h = Harness()
    h.metadata.cluster = cluster({"t": 3}, leaders={("t", 0): 1, ("t", 1): 1, ("t", 2): 2})
    for p in range(3):
        h.send(2, TopicPartition("t", p))
    h.run()
    by_node = {address: [call for call in conn.calls if call[0] == "Produce"]
               for address, conn in h.metadata.pool.connections.items()}
    assert {a: len(calls) for a, calls in by_node.items()} == {"127.0.0.1:9001": 1, "127.0.0.1:9002": 1}
    request = by_node["127.0.0.1:9001"][0][1]
    assert sorted(p.index for t in request.topics for p in t.partitions) == [0, 1]


def test_producer_metrics_count_the_produce_requests_and_their_bytes() -> None:
    """request-total and outgoing-byte-total: their ratio is the request size the brokers' CPU per MB follows."""
    h = Harness()
    h.metadata.cluster = cluster({"t": 3}, leaders={("t", 0): 1, ("t", 1): 1, ("t", 2): 2})
    assert h.sender.metrics.snapshot() == {"request-total": 0.0, "outgoing-byte-total": 0.0}
    for p in range(3):
        h.send(2, TopicPartition("t", p))
    h.run()
    requests = [call[1] for conn in h.metadata.pool.connections.values() for call in conn.calls
                if call[0] == "Produce"]
    assert len(requests) == 2
    assert h.sender.metrics.snapshot() == {"request-total": 2.0,
                                           "outgoing-byte-total": float(sum(r.ByteSize() for r in requests))}


# ---------------------------------------------------------------------- idempotence


def test_idempotent_producer_gets_a_producer_id_and_numbers_batches() -> None:
    h = Harness(idempotent=True)
    h.send(3)
    h.run()
    first = validate_batch(batch_bytes(h.produce_calls()[0][0]))
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (42, 3, 0)
    h.send(2)
    h.run()
    second = validate_batch(batch_bytes(h.produce_calls()[1][0]))
    assert (second.producer_id, second.base_sequence, second.record_count) == (42, 3, 2)


def test_idempotent_retry_resends_the_same_bytes() -> None:
    h = Harness(idempotent=True)
    futures = h.send(4)
    h.run()
    h.answer(0, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    h.run()
    h.clock.advance(100)
    h.run()
    first, second = (batch_bytes(request) for request, _ in h.produce_calls())
    assert first == second  # same sequence, same CRC: the broker can recognise a duplicate
    h.answer(1, code=ErrorCode.DUPLICATE_SEQUENCE_NUMBER, base_offset=50)
    h.run()
    assert [f.get(0).offset for f in futures] == [50, 51, 52, 53]


def test_out_of_order_behind_an_unresolved_batch_is_retried_in_order() -> None:
    h = Harness(idempotent=True)
    a = h.send(2)
    h.run()
    b = h.send(2)
    h.run()
    assert len(h.produce_calls()) == 2  # two batches of one partition in flight
    h.answer(1, code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # `b` overtook `a` on the way
    h.run()
    assert not b[0].done()
    h.answer(0, base_offset=0)
    h.run()
    h.clock.advance(100)
    h.run()
    resent = h.produce_calls()[2][0]
    assert validate_batch(batch_bytes(resent)).base_sequence == 2
    h.answer(2, base_offset=2)
    h.run()
    assert [f.get(0).offset for f in a + b] == [0, 1, 2, 3]


def test_out_of_order_is_retried_when_the_earlier_batch_was_unacknowledged_at_send_time() -> None:
    # gRPC may deliver concurrent calls out of order: `b` reached the broker before `a`, and was refused,
    # but `a`'s success is processed first. `b` is the next sequence by then, yet its gap is not real.
    h = Harness(idempotent=True)
    a = h.send(2)
    h.run()
    b = h.send(2)
    h.run()
    h.answer(0, base_offset=0)
    h.answer(1, code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    h.run()
    assert not b[0].done() and [name for name, _ in h.metadata.any_calls] == ["InitProducerId"]  # no reset
    h.clock.advance(100)
    h.run()
    h.answer(2, base_offset=2)
    h.run()
    assert [f.get(0).offset for f in a + b] == [0, 1, 2, 3]


def test_out_of_order_for_the_next_expected_batch_fails_and_resets_the_producer_id() -> None:
    h = Harness(idempotent=True)
    futures = h.send(1)
    h.run()
    h.answer(0, code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    h.run()
    assert futures[0].exception(0).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # type: ignore[union-attr]
    later = h.send(1)
    h.run()
    assert [name for name, _ in h.metadata.any_calls] == ["InitProducerId", "InitProducerId"]
    fresh = validate_batch(batch_bytes(h.produce_calls()[1][0]))
    assert (fresh.producer_id, fresh.base_sequence) == (43, 0)
    h.answer(1, base_offset=9)
    h.run()
    assert later[0].get(0).offset == 9


def test_producer_id_reset_restarts_rejected_retries_and_fails_uncertain_ones() -> None:
    h = Harness(idempotent=True)
    h.metadata.cluster = cluster({"t": 2}, leaders={("t", 0): 1, ("t", 1): 1})
    doomed = h.send(1, TopicPartition("t", 0))
    rejected = h.send(1, TopicPartition("t", 1))
    h.run()
    h.send(1, TopicPartition("t", 0))
    uncertain = h.send(1, TopicPartition("t", 0))
    h.run()  # a second batch of t-0 in flight (sequence 1)
    (_request_a, future_a), (_request_b, future_b) = h.produce_calls()
    response = pb.ProduceResponse()
    topic = response.responses.add(name="t")
    topic.partitions.add(index=0, error_code=ErrorCode.INVALID_RECORD)  # fatal: sequence 0 of t-0 is lost
    topic.partitions.add(index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)  # not appended: retried
    future_a.settle(response)
    future_b.settle(error=KafkaError("lost", ErrorCode.REQUEST_TIMED_OUT))  # t-0 seq 1: appended or not?
    h.run()
    h.clock.advance(100)
    h.run()
    assert doomed[0].exception(0).code == ErrorCode.INVALID_RECORD  # type: ignore[union-attr]
    assert uncertain[0].exception(0).code == ErrorCode.INVALID_RECORD  # type: ignore[union-attr]
    resent = validate_batch(batch_bytes(h.produce_calls()[2][0]))
    assert (resent.producer_id, resent.base_sequence) == (43, 0)
    h.answer(2, base_offset=4)
    h.run()
    assert rejected[0].get(0).offset == 4


def test_send_callbacks_run_per_record_with_its_future_before_add_callback_ones() -> None:
    h = Harness()
    seen: list[tuple[str, int]] = []
    futures = []
    for _ in range(3):
        future = h.accumulator.append(TP, 1_700_000_000_000, None, b"v", (), -1, 1, -1,
                                      callback=lambda f: seen.append(("send", f.get(0).offset)))
        assert future is not None
        futures.append(future)
    futures[0].add_done_callback(lambda f: seen.append(("added", f.get(0).offset)))
    h.run()
    assert seen == []
    h.answer(0, base_offset=10)
    h.run()
    assert seen == [("send", 10), ("send", 11), ("send", 12), ("added", 10)]


def test_acknowledged_futures_settle_after_the_next_batch_is_sent() -> None:
    h = Harness()
    first = h.send(2)
    h.run()
    second = h.send(1)  # waits: one batch per partition in flight
    order: list[str] = []
    first[0].add_done_callback(lambda _: order.append(f"settled with {len(h.produce_calls())} requests sent"))
    h.answer(0, base_offset=0)
    h.run()
    # The second batch left in the same pass, before the first one's callbacks ran.
    assert order == ["settled with 2 requests sent"]
    assert [f.get(0).offset for f in first] == [0, 1] and not second[0].done()


def test_a_callback_that_raises_does_not_stop_the_others() -> None:
    h = Harness()
    seen: list[int] = []

    def bad(_: FutureRecordMetadata) -> None:
        raise RuntimeError("user bug")

    h.accumulator.append(TP, 1, None, b"v", (), -1, 1, -1, callback=bad)
    h.accumulator.append(TP, 1, None, b"v", (), -1, 1, -1, callback=lambda f: seen.append(f.get(0).offset))
    h.run()
    h.answer(0, base_offset=5)
    h.run()
    assert seen == [6]
