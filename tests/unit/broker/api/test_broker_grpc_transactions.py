"""The gRPC door's transaction RPCs (broker/api/grpc_apis.py): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
InitProducerId with a transactional id carry the request to the same TransactionOperations the Kafka door uses
and its answers back unchanged, per partition for AddPartitionsToTxn (the ACL checks themselves:
test_broker_transaction_authorization.py; both doors against a real cluster: test_client_transactions.py,
test_kafka_transactions.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from broker.api.grpc_apis import KafkaApis
from broker.coordinator.transaction.transaction_coordinator import InitProducerIdResult
from common.security.authorizer import Session
from common.security.principal import ANONYMOUS
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition

SESSION = Session(ANONYMOUS, "")


class Transactions:
    """TransactionOperations' calls as the door makes them, each answered as told."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    async def init_producer_id(self, session: Session, *args: Any) -> Any:
        self.calls.append(("init", session, *args))
        return self.answer

    async def add_partitions_to_txn(self, session: Session, transactional_id: str, producer_id: int,
                                    producer_epoch: int, partitions: Sequence[TopicPartition]) -> Any:
        self.calls.append(("add", session, transactional_id, producer_id, producer_epoch, list(partitions)))
        return self.answer

    async def add_offsets_to_txn(self, session: Session, *args: Any) -> Any:
        self.calls.append(("offsets", session, *args))
        return self.answer

    async def end_txn(self, session: Session, *args: Any) -> Any:
        self.calls.append(("end", session, *args))
        return self.answer


def door(answer: Any) -> tuple[KafkaApis, Transactions]:
    apis = KafkaApis.__new__(KafkaApis)
    apis._transactions = transactions = Transactions(answer)  # type: ignore[assignment]
    apis._session = lambda _: SESSION  # type: ignore[method-assign]
    return apis, transactions


def test_add_partitions_to_txn_answers_each_partition_with_the_operations_code() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    apis, transactions = door({a0: ErrorCode.OPERATION_NOT_ATTEMPTED, a1: ErrorCode.OPERATION_NOT_ATTEMPTED,
                               b0: ErrorCode.TOPIC_AUTHORIZATION_FAILED})
    request = pb.AddPartitionsToTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=2, topics=[
        pb.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="a", partitions=[0, 1]),
        pb.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="b", partitions=[0])])
    answer = asyncio.run(apis.AddPartitionsToTxn(request, None))  # type: ignore[arg-type]
    assert transactions.calls == [("add", SESSION, "tx", 7, 2, [a0, a1, b0])]
    assert {(t.name, r.partition_index): r.error_code for t in answer.results for r in t.results} == {
        ("a", 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("a", 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("b", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_end_txn_and_add_offsets_pass_producer_fenced_as_it_is() -> None:
    """The gRPC door speaks the newest versions: PRODUCER_FENCED is not mapped to INVALID_PRODUCER_EPOCH."""
    apis, transactions = door(ErrorCode.PRODUCER_FENCED)
    ended = asyncio.run(apis.EndTxn(pb.EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=2,
                                                     committed=True), None))  # type: ignore[arg-type]
    added = asyncio.run(apis.AddOffsetsToTxn(pb.AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=2, group_id="g"), None))  # type: ignore[arg-type]
    assert (ended.error_code, added.error_code) == (ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED)
    assert transactions.calls == [("end", SESSION, "tx", 7, 2, True), ("offsets", SESSION, "tx", 7, 2, "g")]


def test_init_producer_id_passes_kip_360s_current_producer_or_none() -> None:
    apis, transactions = door(InitProducerIdResult(7, 3, ErrorCode.NONE))
    bump = pb.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000, producer_id=7,
                                    producer_epoch=2)
    answer = asyncio.run(apis.InitProducerId(bump, None))  # type: ignore[arg-type]
    first = pb.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000)
    asyncio.run(apis.InitProducerId(first, None))  # type: ignore[arg-type]
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.NONE, 7, 3)
    assert transactions.calls == [("init", SESSION, "tx", 1000, 7, 2), ("init", SESSION, "tx", 1000, -1, -1)]


class Groups:
    """GroupOperations' txn_commit_offsets as the door calls it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def txn_commit_offsets(self, session: Session, *args: Any) -> Any:
        self.calls.append(("txn_commit", session, *args))
        return dict.fromkeys(args[-1], ErrorCode.ILLEGAL_GENERATION)


def test_txn_offset_commit_carries_the_producer_and_the_generation_to_the_group_operations() -> None:
    apis, _ = door(None)
    apis._groups = groups = Groups()  # type: ignore[assignment]
    topic = pb.OffsetCommitRequest.OffsetCommitRequestTopic(name="in", partitions=[
        pb.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])
    answer = asyncio.run(apis.TxnOffsetCommit(pb.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=7, producer_epoch=2, generation_id=3, member_id="m",
        topics=[topic]), None))  # type: ignore[arg-type]
    [(name, session, *args)] = groups.calls
    assert (name, session, args[:7]) == ("txn_commit", SESSION, ["tx", "g", 7, 2, "m", None, 3])
    assert args[7][TopicPartition("in", 0)].offset == 5
    assert [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        ("in", 0, ErrorCode.ILLEGAL_GENERATION)]
