"""A transactional producer's calls to its transaction coordinator: FindCoordinator (key type 1),
InitProducerId, AddPartitionsToTxn and EndTxn over gRPC, each answer judged by client/transaction_manager.py.

init_transactions(), commit_transaction() and abort_transaction() run their call on the application's thread
and block up to max_block_ms, retrying as Java's TransactionManager does (the coordinator looked up again
after NOT_COORDINATOR or a dead connection, the same one asked again after COORDINATOR_LOAD_IN_PROGRESS or
CONCURRENT_TRANSACTIONS); the I/O thread makes one AddPartitionsToTxn attempt per pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from client.errors import KafkaTimeoutError
from client.metadata import Metadata
from client.transaction_manager import TransactionalState, TxnAction, add_partitions_outcome, classify_answer
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode, KafkaError, error_for
from proto.types import TopicPartition

COORDINATOR_KEY_TRANSACTION = 1


class TransactionalRequests:
    def __init__(self, state: TransactionalState, metadata: Metadata, *, request_timeout_ms: int,
                 retry_backoff_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._metadata = metadata
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        self._coordinator: str | None = None  # its address, once FindCoordinator named it

    def _now_ms(self) -> float:
        return self._clock() * 1000

    # ------------------------------------------------------------------ the coordinator

    def _find_coordinator(self, timeout_ms: float) -> str:
        response = self._metadata.call_any(
            lambda stub: stub.FindCoordinator,
            pb.FindCoordinatorRequest(key=self._state.transactional_id, key_type=COORDINATOR_KEY_TRANSACTION),
            timeout_ms)
        if response.error_code:
            raise error_for(response.error_code, response.error_message or "FindCoordinator")
        self._coordinator = f"{response.host}:{response.port}"
        return self._coordinator

    def _call_once(self, call: Callable[[str, float], int], timeout_ms: float) -> tuple[TxnAction, KafkaError | None]:
        """One attempt: find the coordinator if unknown, call it; a transport failure or an answer naming
        another coordinator forgets the one known."""
        error: KafkaError | None = None
        try:
            address = self._coordinator or self._find_coordinator(timeout_ms)
            code = call(address, timeout_ms)
        except KafkaError as exc:
            code, error = exc.code, exc
        if error is None and code != ErrorCode.NONE:
            error = error_for(code, "transaction coordinator")
        action = classify_answer(code)
        if action is TxnAction.FIND_COORDINATOR or code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
            self._coordinator = None
        return action, error

    def _call_until_done(self, what: str, call: Callable[[str, float], int], max_block_ms: float) -> None:
        """Retry `call` until the coordinator answers for good or max_block_ms passes; a fatal answer moves
        the producer to FATAL_ERROR and raises it."""
        deadline = self._now_ms() + max_block_ms
        last: KafkaError | None = None
        while (remaining := deadline - self._now_ms()) > 0:
            action, error = self._call_once(call, min(remaining, self._request_timeout_ms))
            if action is TxnAction.DONE:
                return
            assert error is not None
            last = error
            if action in (TxnAction.FATAL, TxnAction.ABORTABLE):
                self._state.fail_transaction(error, fatal=True)
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

    def add_partitions(self, partitions: Sequence[TopicPartition]) -> TxnAction:
        """One AddPartitionsToTxn attempt (the I/O thread's): DONE puts them in the transaction; RETRY and
        FIND_COORDINATOR mean try again next pass; an abortable or fatal answer fails the transaction."""
        state = self._state
        request = pb.AddPartitionsToTxnRequest(transactional_id=state.transactional_id,
                                               producer_id=state.producer_id, producer_epoch=state.producer_epoch)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, indexes in by_topic.items():
            request.topics.add(name=topic, partitions=indexes)
        errors: dict[TopicPartition, int] = {}

        def call(address: str, timeout_ms: float) -> int:
            response = self._metadata.pool.get(address).call(lambda stub: stub.AddPartitionsToTxn, request,
                                                             timeout_ms)
            errors.update({TopicPartition(t.name, r.partition_index): r.error_code
                           for t in response.results for r in t.results})
            action, code = add_partitions_outcome(errors)
            return code if action is not TxnAction.DONE else ErrorCode.NONE

        action, error = self._call_once(call, self._request_timeout_ms)
        if action is TxnAction.DONE:
            state.partitions_added(partitions)
        elif errors and error is not None:
            # The partition-level answer decides: an unknown topic is retried, a refused one is abortable.
            action, _ = add_partitions_outcome(errors)
        if action in (TxnAction.ABORTABLE, TxnAction.FATAL):
            assert error is not None
            state.fail_transaction(error, fatal=action is TxnAction.FATAL)
        return action
