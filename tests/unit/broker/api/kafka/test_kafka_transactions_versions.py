"""broker/api/kafka/transactions.py: PRODUCER_FENCED (KIP-588) reaches only clients whose request version knows it
(InitProducerId v4, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn v2); older ones get INVALID_PRODUCER_EPOCH, as
Kafka 2.8's KafkaApis maps it. Other errors pass unchanged."""

from __future__ import annotations

from broker.api.kafka.transactions import producer_fenced_for
from proto.errors import ErrorCode


def test_producer_fenced_becomes_invalid_producer_epoch_before_its_version() -> None:
    assert producer_fenced_for(ErrorCode.PRODUCER_FENCED, 3, 4) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert producer_fenced_for(ErrorCode.PRODUCER_FENCED, 4, 4) is ErrorCode.PRODUCER_FENCED
    assert producer_fenced_for(ErrorCode.PRODUCER_FENCED, 1, 2) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert producer_fenced_for(ErrorCode.PRODUCER_FENCED, 2, 2) is ErrorCode.PRODUCER_FENCED
    assert producer_fenced_for(ErrorCode.CONCURRENT_TRANSACTIONS, 0, 2) is ErrorCode.CONCURRENT_TRANSACTIONS
