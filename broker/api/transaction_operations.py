"""What the Kafka door asks of the transaction coordinator, with Kafka 2.8's ACL checks in front (KafkaApis'
handleFindCoordinatorRequest, handleInitProducerIdRequest, handleAddPartitionToTxnRequest,
handleAddOffsetsToTxnRequest, handleEndTxnRequest):

  FindCoordinator (key type 1)   Describe on the TransactionalId; __transaction_state created on first need
  InitProducerId with an id      Write on the TransactionalId
  AddPartitionsToTxn             Write on the TransactionalId, then Write on each topic: a refused or unknown
                                 topic fails the whole request (the others OPERATION_NOT_ATTEMPTED)
  AddOffsetsToTxn                Write on the TransactionalId, then Read on the group; the group's
                                 __consumer_offsets partition joins the transaction
  EndTxn                         Write on the TransactionalId
  DescribeTransactions (KIP-664) Describe on each TransactionalId; only the partitions of topics the caller may
                                 Describe are shown
  ListTransactions (KIP-664)     only the ids the caller may Describe are listed (Kafka 3.0's KafkaApis)

A refused id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED. With no authorizer every check passes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from broker.api.operations import BrokerOperations
from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group.results import FindCoordinatorResult
from broker.coordinator.internal_topic import InternalTopic
from broker.coordinator.transaction.transaction_coordinator import (
    DescribedTransaction,
    InitProducerIdResult,
    TransactionCoordinator,
)
from broker.coordinator.transaction.transaction_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from broker.coordinator.transaction.transaction_state_manager import ListTransactionsResult
from common.security.acl import AclOperation, ResourceType
from common.security.authorizer import Session
from proto.errors import ErrorCode
from proto.types import TopicPartition

REFUSED_ID = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class TransactionOperations:
    def __init__(self, coordinator: TransactionCoordinator, operations: BrokerOperations,
                 metadata_cache: MetadataCache, state_topic: InternalTopic,
                 offsets_partition_for: Callable[[str], TopicPartition]) -> None:
        self.coordinator = coordinator
        self._operations = operations
        self._metadata_cache = metadata_cache
        self._state_topic = state_topic
        # The group's __consumer_offsets partition (the group coordinator's partitionFor).
        self._offsets_partition_for = offsets_partition_for

    def _id_allowed(self, session: Session, operation: AclOperation, transactional_id: str) -> bool:
        return self._operations.authorize(session, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)

    async def find_coordinator(self, session: Session, transactional_id: str,
                               listener_name: str) -> FindCoordinatorResult:
        """The leader of the id's __transaction_state partition as reached on `listener_name`; the topic is
        created on first need (COORDINATOR_NOT_AVAILABLE until it has a leader)."""
        if not self._id_allowed(session, AclOperation.DESCRIBE, transactional_id):
            return FindCoordinatorResult(REFUSED_ID)
        found = await self._state_topic.leader_node(self.coordinator.partition_for(transactional_id), listener_name)
        return FindCoordinatorResult(found) if isinstance(found, ErrorCode) else FindCoordinatorResult(
            ErrorCode.NONE, found)

    async def init_producer_id(self, session: Session, transactional_id: str, transaction_timeout_ms: int,
                               producer_id: int, producer_epoch: int) -> InitProducerIdResult:
        """`producer_id` / `producer_epoch`: KIP-360's current ones (v3+), or -1 / -1."""
        if not self._id_allowed(session, AclOperation.WRITE, transactional_id):
            return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, REFUSED_ID)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, ErrorCode.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        return await self.coordinator.handle_init_producer_id(transactional_id, transaction_timeout_ms, expected)

    async def add_partitions_to_txn(self, session: Session, transactional_id: str, producer_id: int,
                                    producer_epoch: int, partitions: Sequence[TopicPartition]
                                    ) -> dict[TopicPartition, ErrorCode]:
        if not self._id_allowed(session, AclOperation.WRITE, transactional_id):
            return dict.fromkeys(partitions, REFUSED_ID)
        writable = self._operations.authorized_topics(session, AclOperation.WRITE, (tp.topic for tp in partitions))
        refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic not in writable}
        unknown = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions
                   if tp not in refused and not self._metadata_cache.contains(tp)}
        if refused or unknown:
            return {**dict.fromkeys(partitions, ErrorCode.OPERATION_NOT_ATTEMPTED), **refused, **unknown}
        error = await self.coordinator.handle_add_partitions_to_transaction(transactional_id, producer_id,
                                                                            producer_epoch, partitions)
        return dict.fromkeys(partitions, error)

    async def add_offsets_to_txn(self, session: Session, transactional_id: str, producer_id: int,
                                 producer_epoch: int, group_id: str) -> ErrorCode:
        if not self._id_allowed(session, AclOperation.WRITE, transactional_id):
            return REFUSED_ID
        if not self._operations.authorize(session, AclOperation.READ, ResourceType.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        return await self.coordinator.handle_add_partitions_to_transaction(
            transactional_id, producer_id, producer_epoch, [self._offsets_partition_for(group_id)])

    async def end_txn(self, session: Session, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        if not self._id_allowed(session, AclOperation.WRITE, transactional_id):
            return REFUSED_ID
        return await self.coordinator.handle_end_transaction(transactional_id, producer_id, producer_epoch, commit)

    def describe_transactions(self, session: Session, transactional_ids: Sequence[str]) -> list[DescribedTransaction]:
        answers = []
        for transactional_id in transactional_ids:
            if not self._id_allowed(session, AclOperation.DESCRIBE, transactional_id):
                answers.append(DescribedTransaction(transactional_id, REFUSED_ID))
                continue
            found = self.coordinator.handle_describe_transactions(transactional_id)
            described = self._operations.authorized_topics(session, AclOperation.DESCRIBE,
                                                           {tp.topic for tp in found.topic_partitions})
            answers.append(replace(found, topic_partitions=tuple(
                tp for tp in found.topic_partitions if tp.topic in described)))
        return answers

    def list_transactions(self, session: Session, state_filters: Collection[str],
                          producer_id_filters: Collection[int]) -> ListTransactionsResult:
        found = self.coordinator.txn_manager.list_transaction_states(producer_id_filters, state_filters)
        return replace(found, transactions=[txn for txn in found.transactions
                                            if self._id_allowed(session, AclOperation.DESCRIBE, txn.transactional_id)])
