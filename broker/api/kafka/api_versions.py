"""ApiVersions 0-3 (KIP-35, KIP-511): the table of what this broker serves."""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.static.primitive import i16

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import ApiSpec, Reply, RequestHeader, build, encode, kio_error, millis
from proto.errors import ErrorCode


def supported_versions_reply(table: list[ApiSpec], error: ErrorCode, version: int) -> Reply:
    """The ApiVersions response of `version` (v0 when the client's version is too new: Kafka answers
    UNSUPPORTED_VERSION with a v0 body the client can always read). Its header is always v0 (KIP-511)."""
    if version == 0 or error is not ErrorCode.NONE:
        response: Any = ApiVersionsResponseV0(
            error_code=kio_error(error),
            api_keys=tuple(ApiVersionV0(api_key=i16(s.key), min_version=i16(s.min_version),
                                        max_version=i16(s.max_version)) for s in table))
    else:
        module = __import__(f"kio.schema.api_versions.v{version}.response", fromlist=["ApiVersionsResponse"])
        response = build(
            module.ApiVersionsResponse, error_code=kio_error(error), throttle_time=millis(0),
            api_keys=tuple(module.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
                           for s in table))
    reply = encode(response)
    reply.flexible = False
    return reply


def make_handler(table: list[ApiSpec]) -> Any:
    """The handler, encoding each version's answer once (the table is complete before the first request, and a
    reply is only read when sent): clients and probes ask on every connection, a liveness probe hundreds of
    times a second, and building the table's 42 entries through kio was most of an idle broker's event loop
    under such a probe (issue 27). Kafka 2.x kept its default ApiVersionsResponse built once too."""
    replies: dict[int, Reply] = {}

    async def handle_api_versions(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
        reply = replies.get(header.api_version)
        if reply is None:
            reply = replies[header.api_version] = supported_versions_reply(table, ErrorCode.NONE, header.api_version)
        return reply

    return handle_api_versions
