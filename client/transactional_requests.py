"""A transactional producer's calls to its coordinators over gRPC, each answer judged by
client/transaction_manager.py: FindCoordinator (key type 1), InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn to the transaction coordinator; FindCoordinator (key type 0) and TxnOffsetCommit to
the group's.

init_transactions(), send_offsets_to_transaction(), commit_transaction() and abort_transaction() run their calls
on the application's thread and block up to max_block_ms, retrying as Java's TransactionManager does (the
coordinator looked up again after NOT_COORDINATOR or a dead connection, the same one asked again after
COORDINATOR_LOAD_IN_PROGRESS or CONCURRENT_TRANSACTIONS); the I/O thread makes one AddPartitionsToTxn attempt
per pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from client.errors import KafkaTimeoutError
from client.metadata import Metadata
from client.structs import ConsumerGroupMetadata, OffsetAndMetadata
from client.transaction_manager import TransactionalState, TxnAction, classify_answer, partitions_outcome
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
Classify = Callable[[int], TxnAction]


class TransactionalRequests:
    def __init__(self, state: TransactionalState, metadata: Metadata, *, request_timeout_ms: int,
                 retry_backoff_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._metadata = metadata
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        # Per (key type, key), the coordinator's address once FindCoordinator named it.
        self._coordinators: dict[tuple[int, str], str] = {}

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # ------------------------------------------------------------------ the coordinator

    def _find_coordinator(self, key: tuple[int, str], timeout_ms: float) -> str:
        key_type, name = key
        response = self._metadata.call_any(lambda stub: stub.FindCoordinator,
                                           pb.FindCoordinatorRequest(key=name, key_type=key_type), timeout_ms)
        if response.error_code:
            raise error_for(response.error_code, response.error_message or "FindCoordinator")
        address = self._coordinators[key] = f"{response.host}:{response.port}"
        return address

    def _call_once(self, call: Callable[[str, float], int], timeout_ms: float, classify: Classify = classify_answer,
                   key_type: int = COORDINATOR_KEY_TRANSACTION, key: str | None = None
                   ) -> tuple[TxnAction, KafkaError | None]:
        """One attempt: find the coordinator of `key` (the transactional id unless given) if unknown, call it;
        a transport failure or an answer naming another coordinator forgets the one known."""
        coordinator = (key_type, self._state.transactional_id if key is None else key)
        error: KafkaError | None = None
        try:
            address = self._coordinators.get(coordinator) or self._find_coordinator(coordinator, timeout_ms)
            code = call(address, timeout_ms)
        except KafkaError as exc:
            code, error = exc.code, exc
        if error is None and code != ErrorCode.NONE:
            error = error_for(code, "coordinator")
        action = classify(code)
        if action is TxnAction.FIND_COORDINATOR:
            self._coordinators.pop(coordinator, None)
        return action, error

    def _call_until_done(self, what: str, call: Callable[[str, float], int], max_block_ms: float,
                         classify: Classify = classify_answer, key_type: int = COORDINATOR_KEY_TRANSACTION,
                         key: str | None = None) -> None:
        """Retry `call` until the coordinator answers for good or max_block_ms passes; an abortable or fatal
        answer moves the producer to ABORTABLE_ERROR or FATAL_ERROR and raises it."""
        deadline = self._now_ms() + max_block_ms
        last: KafkaError | None = None
        while (remaining := deadline - self._now_ms()) > 0:
            action, error = self._call_once(call, min(remaining, self._request_timeout_ms), classify, key_type, key)
            if action is TxnAction.DONE:
                return
            assert error is not None
            last = error
            if action in (TxnAction.FATAL, TxnAction.ABORTABLE):
                self._state.fail_transaction(error, fatal=action is TxnAction.FATAL)
                raise error
            # Retriable: the coordinator moved, is loading, or is still completing the previous transaction.
            time.sleep(min(self._retry_backoff_ms, max(deadline - self._now_ms(), 0)) / 1000)
        raise KafkaTimeoutError(f"{what} did not complete within {max_block_ms} ms; last error: {last}")

    # ------------------------------------------------------------------ the calls

    def init_producer_id(self, max_block_ms: float, bump_epoch: bool = False) -> None:
        """InitProducerId for the transactional id; `bump_epoch` sends the current id and epoch (KIP-360),
        so an epoch bump after an abort keeps the producer instead of fencing it."""
        state = self._state
        answer: list[pb.InitProducerIdResponse] = []
        request = pb.InitProducerIdRequest(transactional_id=state.transactional_id,
                                           transaction_timeout_ms=state.transaction_timeout_ms)
        if bump_epoch:
            request.producer_id, request.producer_epoch = state.producer_id, state.producer_epoch

        def call(address: str, timeout_ms: float) -> int:
            response = self._metadata.pool.get(address).call(lambda stub: stub.InitProducerId, request, timeout_ms)
            answer[:] = [response]
            return response.error_code

        self._call_until_done("InitProducerId", call, max_block_ms)
        state.init_done(answer[0].producer_id, answer[0].producer_epoch)

    def end_txn(self, commit: bool, max_block_ms: float) -> None:
        state = self._state
        request = pb.EndTxnRequest(transactional_id=state.transactional_id, producer_id=state.producer_id,
                                   producer_epoch=state.producer_epoch, committed=commit)

        def call(address: str, timeout_ms: float) -> int:
            return self._metadata.pool.get(address).call(lambda stub: stub.EndTxn, request, timeout_ms).error_code

        self._call_until_done("EndTxn", call, max_block_ms)

    def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata,
                     max_block_ms: float) -> None:
        """Java's sendOffsetsToTransaction: AddOffsetsToTxn puts the group's __consumer_offsets partition in the
        transaction (transaction coordinator), then TxnOffsetCommit writes the offsets there, pending until the
        transaction's marker (group coordinator)."""
        state = self._state
        add = pb.AddOffsetsToTxnRequest(transactional_id=state.transactional_id, producer_id=state.producer_id,
                                        producer_epoch=state.producer_epoch, group_id=group.group_id)

        def add_offsets(address: str, timeout_ms: float) -> int:
            return self._metadata.pool.get(address).call(lambda stub: stub.AddOffsetsToTxn, add,
                                                         timeout_ms).error_code

        offsets_classify = partial(classify_answer, offsets=True)
        self._call_until_done("AddOffsetsToTxn", add_offsets, max_block_ms, offsets_classify)
        state.offsets_added()
        commit = pb.TxnOffsetCommitRequest(
            transactional_id=state.transactional_id, group_id=group.group_id, producer_id=state.producer_id,
            producer_epoch=state.producer_epoch, generation_id=group.generation_id, member_id=group.member_id)
        if group.group_instance_id is not None:
            commit.group_instance_id = group.group_instance_id
        by_topic: dict[str, pb.OffsetCommitRequest.OffsetCommitRequestTopic] = {}
        for tp, offset in offsets.items():
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = commit.topics.add(name=tp.topic)
            topic.partitions.add(partition_index=tp.partition, committed_offset=offset.offset,
                                 committed_leader_epoch=offset.leader_epoch, committed_metadata=offset.metadata)

        def txn_offset_commit(address: str, timeout_ms: float) -> int:
            response = self._metadata.pool.get(address).call(lambda stub: stub.TxnOffsetCommit, commit, timeout_ms)
            errors = {TopicPartition(t.name, p.partition_index): p.error_code
                      for t in response.topics for p in t.partitions}
            return partitions_outcome(errors, offsets=True)[1]

        self._call_until_done("TxnOffsetCommit", txn_offset_commit, max_block_ms, offsets_classify,
                              COORDINATOR_KEY_GROUP, group.group_id)

    def add_partitions(self, partitions: Sequence[TopicPartition]) -> tuple[TxnAction, int]:
        """One AddPartitionsToTxn attempt (the I/O thread's), its action and error code: DONE puts them in the
        transaction; RETRY and FIND_COORDINATOR mean try again later; an abortable or fatal answer fails the
        transaction."""
        state = self._state
        request = pb.AddPartitionsToTxnRequest(transactional_id=state.transactional_id,
                                               producer_id=state.producer_id, producer_epoch=state.producer_epoch)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, indexes in by_topic.items():
            request.topics.add(name=topic, partitions=indexes)

        def call(address: str, timeout_ms: float) -> int:
            response = self._metadata.pool.get(address).call(lambda stub: stub.AddPartitionsToTxn, request,
                                                             timeout_ms)
            # The worst partition's code decides: an unknown topic is retried, a refused one is abortable.
            return partitions_outcome({TopicPartition(t.name, r.partition_index): r.error_code
                                       for t in response.results for r in t.results})[1]

        action, error = self._call_once(call, self._request_timeout_ms, partial(classify_answer, add_partitions=True))
        if action is TxnAction.DONE:
            state.partitions_added(partitions)
        if action in (TxnAction.ABORTABLE, TxnAction.FATAL):
            assert error is not None
            state.fail_transaction(error, fatal=action is TxnAction.FATAL)
        return action, ErrorCode.NONE if error is None else error.code
