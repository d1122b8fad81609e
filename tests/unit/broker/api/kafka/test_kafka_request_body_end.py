"""A request body must end where its frame does, except for the APIs the table flags: librdkafka 2.16 ends its
AlterUserScramCredentials with a second empty tag section, which Kafka (which never checks) ignores."""

from __future__ import annotations

import io

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.serial import entity_writer

from broker.api.kafka.api_table import API_TABLE
from broker.api.kafka.protocol import RequestError, parse_body


def _body() -> bytes:
    out = io.BytesIO()
    entity_writer(AlterUserScramCredentialsRequest)(out, AlterUserScramCredentialsRequest(deletions=(),
                                                                                         upsertions=()))
    return out.getvalue()


def test_leftover_bytes_are_refused_unless_allowed() -> None:
    frame = _body() + b"\x00"
    with pytest.raises(RequestError, match="1 bytes after its end"):
        parse_body(AlterUserScramCredentialsRequest, frame, 0)
    assert parse_body(AlterUserScramCredentialsRequest, frame, 0, trailing_bytes_allowed=True) == \
        AlterUserScramCredentialsRequest(deletions=(), upsertions=())


def test_only_alter_user_scram_credentials_allows_them() -> None:
    assert [spec.name for spec in API_TABLE if spec.trailing_bytes_allowed] == ["AlterUserScramCredentials"]
