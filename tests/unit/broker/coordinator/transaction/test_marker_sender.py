"""broker/coordinator/transaction/marker_sender.py: the markers of this broker's own partitions are appended here,
through the server's own append (no gRPC call to its own listener); another broker's go to its inter-broker
listener, and one that is not alive is BROKER_NOT_AVAILABLE for the channel to retry."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from broker.coordinator.transaction.marker_sender import GrpcMarkerSender
from broker.coordinator.transaction.transaction_marker_channel import WritableTxnMarker
from common.grpc_tls import PLAINTEXT
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

A0 = TopicPartition("a", 0)
MARKER = WritableTxnMarker(1001, 0, True, 5, (A0,))


def test_this_brokers_markers_are_appended_here_and_others_go_to_their_listener() -> None:
    async def scenario() -> None:
        looked_up: list[int] = []

        def endpoint_for(broker: int) -> tuple[str, int] | None:
            looked_up.append(broker)
            return None  # no broker alive: a gRPC send fails before any call

        appended: list[list[WritableTxnMarker]] = []

        async def local(markers: Sequence[WritableTxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
            appended.append(list(markers))
            return [{A0: ErrorCode.NONE}]

        sender = GrpcMarkerSender(endpoint_for, PLAINTEXT, None, 30_000, local_broker_id=1)
        sender.bind_local(local)
        assert await sender.send(1, [MARKER]) == [{A0: ErrorCode.NONE}]
        assert appended == [[MARKER]] and looked_up == []
        with pytest.raises(KafkaError) as refused:
            await sender.send(2, [MARKER])
        assert refused.value.code is ErrorCode.BROKER_NOT_AVAILABLE and looked_up == [2]
        await sender.close()
    asyncio.run(scenario())
