"""InitProducerId 0-1: a producer id for an idempotent producer (no transactions)."""

from __future__ import annotations

import importlib
from typing import Any

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis


async def handle_init_producer_id(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = importlib.import_module(f"kio.schema.init_producer_id.v{header.api_version}.response")
    error, producer_id, epoch = await context.operations.init_producer_id(context.session, request.transactional_id)
    return encode(build(schema.InitProducerIdResponse, throttle_time=millis(0), error_code=kio_error(error),
                        producer_id=producer_id, producer_epoch=epoch))
