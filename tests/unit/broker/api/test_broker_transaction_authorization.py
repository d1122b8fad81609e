"""The transaction family's ACL checks (broker/api/transaction_operations.py, Kafka 2.8's KafkaApis): Describe on
the TransactionalId for FindCoordinator, Write on it for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn, Write on each topic added (a refused or unknown one fails the whole request, the rest
OPERATION_NOT_ATTEMPTED), Read on the group for AddOffsetsToTxn; KIP-664's Describe on each TransactionalId for
DescribeTransactions (and Describe on each topic shown) and ListTransactions (only the ids the caller may
Describe); what reaches the coordinator and what does not."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from inspect import isawaitable
from typing import Any

from broker.api.transaction_operations import TransactionOperations
from broker.coordinator.transaction.transaction_coordinator import DescribedTransaction, InitProducerIdResult
from broker.coordinator.transaction.transaction_metadata import TransactionState
from broker.coordinator.transaction.transaction_state_manager import ListedTransaction, ListTransactionsResult
from common.security.acl import AccessControlEntry, AclOperation, PatternType, ResourcePattern, ResourceType
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.api.test_broker_authorization import ALICE, TXN_ID, allow, run, topic

Op = AclOperation
A0, B0, X0 = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("x", 0)
OFFSETS_7 = TopicPartition("__consumer_offsets", 7)
Acls = dict[ResourcePattern, list[AccessControlEntry]] | None


def group(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name, PatternType.LITERAL)


class Coordinator:
    """Records what reaches it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.txn_manager = self

    def list_transaction_states(self, producer_ids: Collection[int], state_names: Collection[str]
                                ) -> ListTransactionsResult:
        self.calls.append(("list", (list(producer_ids), list(state_names))))
        return ListTransactionsResult(ErrorCode.NONE, [ListedTransaction("tx", 4000, TransactionState.ONGOING),
                                                       ListedTransaction("other", 4001, TransactionState.EMPTY)], [])

    def handle_describe_transactions(self, transactional_id: str) -> DescribedTransaction:
        self.calls.append(("describe", transactional_id))
        return DescribedTransaction(transactional_id, ErrorCode.NONE, TransactionState.ONGOING, 4000, 0, 60_000, 1,
                                    (A0, B0))

    def partition_for(self, transactional_id: str) -> int:
        return 0

    async def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                      expected: tuple[int, int] | None) -> InitProducerIdResult:
        self.calls.append(("init", (transactional_id, timeout_ms, expected)))
        return InitProducerIdResult(4000, 0, ErrorCode.NONE)

    async def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                                                   partitions: Sequence[TopicPartition]) -> ErrorCode:
        self.calls.append(("add", sorted(partitions)))
        return ErrorCode.NONE

    async def handle_end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                                     commit: bool) -> ErrorCode:
        self.calls.append(("end", commit))
        return ErrorCode.NONE


def txn_call(acls: Acls, name: str, *args: Any) -> tuple[Any, list[tuple[str, Any]]]:
    coordinator = Coordinator()

    async def call(operations: Any, _: Any) -> Any:
        transactions = TransactionOperations(coordinator, operations, operations.metadata_cache,  # type: ignore[arg-type]
                                             None, lambda group_id: OFFSETS_7)  # type: ignore[arg-type]
        answer = getattr(transactions, name)(ALICE, *args)
        return await answer if isawaitable(answer) else answer

    answer, _ = run(acls, call)
    return answer, coordinator.calls


def test_without_an_authorizer_everything_reaches_the_coordinator() -> None:
    assert txn_call(None, "add_partitions_to_txn", "tx", 1, 0, [A0, B0]) == (
        {A0: ErrorCode.NONE, B0: ErrorCode.NONE}, [("add", [A0, B0])])
    assert txn_call(None, "end_txn", "tx", 1, 0, True) == (ErrorCode.NONE, [("end", True)])


def test_init_producer_id_needs_write_on_the_transactional_id_and_passes_kip_360s_producer() -> None:
    refused, calls = txn_call({TXN_ID: [allow(Op.DESCRIBE)]}, "init_producer_id", "tx", 60_000, -1, -1)
    assert (refused.error, calls) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])
    answer, calls = txn_call({TXN_ID: [allow(Op.WRITE)]}, "init_producer_id", "tx", 60_000, 4000, 3)
    assert (answer.error, calls) == (ErrorCode.NONE, [("init", ("tx", 60_000, (4000, 3)))])
    # A producer id without an epoch (or the reverse) is no producer: INVALID_REQUEST, as Kafka.
    bad, calls = txn_call(None, "init_producer_id", "tx", 60_000, 4000, -1)
    assert (bad.error, calls) == (ErrorCode.INVALID_REQUEST, [])


def test_add_partitions_needs_write_on_the_id_and_on_every_topic_else_nothing_is_added() -> None:
    assert txn_call({topic("a"): [allow(Op.WRITE)]}, "add_partitions_to_txn", "tx", 1, 0, [A0]) == (
        {A0: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}, [])
    assert txn_call({TXN_ID: [allow(Op.WRITE)], topic("a"): [allow(Op.WRITE)], topic("b"): [allow(Op.READ)]},
                    "add_partitions_to_txn", "tx", 1, 0, [A0, B0]) == (
        {A0: ErrorCode.OPERATION_NOT_ATTEMPTED, B0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}, [])
    # A topic the cluster does not have (x) fails it too.
    assert txn_call({TXN_ID: [allow(Op.WRITE)], topic("a"): [allow(Op.WRITE)], topic("x"): [allow(Op.WRITE)]},
                    "add_partitions_to_txn", "tx", 1, 0, [A0, X0]) == (
        {A0: ErrorCode.OPERATION_NOT_ATTEMPTED, X0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}, [])
    assert txn_call({TXN_ID: [allow(Op.WRITE)], topic("a"): [allow(Op.WRITE)]},
                    "add_partitions_to_txn", "tx", 1, 0, [A0]) == ({A0: ErrorCode.NONE}, [("add", [A0])])


def test_add_offsets_needs_write_on_the_id_and_read_on_the_group_and_adds_its_offsets_partition() -> None:
    assert txn_call({group("g"): [allow(Op.READ)]}, "add_offsets_to_txn", "tx", 1, 0, "g") == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])
    assert txn_call({TXN_ID: [allow(Op.WRITE)], group("g"): [allow(Op.DESCRIBE)]},
                    "add_offsets_to_txn", "tx", 1, 0, "g") == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    assert txn_call({TXN_ID: [allow(Op.WRITE)], group("g"): [allow(Op.READ)]},
                    "add_offsets_to_txn", "tx", 1, 0, "g") == (ErrorCode.NONE, [("add", [OFFSETS_7])])


def test_end_txn_needs_write_on_the_id_and_find_coordinator_describe() -> None:
    assert txn_call({TXN_ID: [allow(Op.DESCRIBE)]}, "end_txn", "tx", 1, 0, False) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])
    found, _ = txn_call({TXN_ID: [allow(Op.WRITE)]}, "find_coordinator", "other", "PLAINTEXT")
    assert found.error is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_describe_transactions_needs_describe_on_each_id_and_shows_only_described_topics() -> None:
    answers, calls = txn_call({TXN_ID: [allow(Op.DESCRIBE)], topic("a"): [allow(Op.DESCRIBE)]},
                              "describe_transactions", ["tx", "other"])
    assert [(a.transactional_id, a.error) for a in answers] == [
        ("tx", ErrorCode.NONE), ("other", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    assert (answers[0].topic_partitions, calls) == ((A0,), [("describe", "tx")])  # b is not described
    # Write on the id implies Describe on it, as in Kafka; no topic may be described, so no partition shows.
    written, _ = txn_call({TXN_ID: [allow(Op.WRITE)]}, "describe_transactions", ["tx"])
    assert (written[0].error, written[0].topic_partitions) == (ErrorCode.NONE, ())
    everything, _ = txn_call(None, "describe_transactions", ["tx"])
    assert everything[0].topic_partitions == (A0, B0)


def test_list_transactions_lists_only_the_ids_the_caller_may_describe() -> None:
    found, calls = txn_call({TXN_ID: [allow(Op.DESCRIBE)]}, "list_transactions", ["Ongoing"], [4000])
    assert (found.error, [t.transactional_id for t in found.transactions]) == (ErrorCode.NONE, ["tx"])
    assert calls == [("list", ([4000], ["Ongoing"]))]
    nothing, _ = txn_call({topic("a"): [allow(Op.DESCRIBE)]}, "list_transactions", [], [])
    assert nothing.transactions == []
    everything, _ = txn_call(None, "list_transactions", [], [])
    assert [t.transactional_id for t in everything.transactions] == ["tx", "other"]
