"""ApiVersions answers (broker/api/kafka/api_versions.py): each version's reply encoded once, as it would be
built afresh."""

from __future__ import annotations

import asyncio

import pytest

from broker.api.kafka.api_table import API_TABLE
from broker.api.kafka.api_versions import make_handler, supported_versions_reply
from broker.api.kafka.protocol import API_VERSIONS_KEY, RequestHeader
from proto.errors import ErrorCode


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_each_version_is_encoded_once_and_answers_as_built_afresh(version: int) -> None:
    handle = make_handler(API_TABLE)
    header = RequestHeader(API_VERSIONS_KEY, version, 7, "probe")
    first = asyncio.run(handle(None, header, None))
    again = asyncio.run(handle(None, RequestHeader(API_VERSIONS_KEY, version, 8, "probe"), None))
    assert again is first  # a liveness probe asks hundreds of times a second
    fresh = supported_versions_reply(API_TABLE, ErrorCode.NONE, version)
    assert (first.parts, first.flexible) == (fresh.parts, fresh.flexible)
