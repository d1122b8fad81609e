"""The SASL state machine of a Kafka connection (broker/api/kafka/sasl_authenticator.py), frame by frame:
Kafka's order of ApiVersions, SaslHandshake and SaslAuthenticate, v0 raw tokens, and its refusals."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader

from broker.api.kafka.api_table import API_TABLE
from broker.api.kafka.protocol import RequestError
from broker.api.kafka.sasl_authenticator import AuthenticationFailed, SaslAuthenticator
from broker.security.sasl import server_factory
from broker.security.scram import CredentialCache
from proto.errors import ErrorCode
from tests.integration.kafka_wire import encode_request, raw_request


def authenticator() -> SaslAuthenticator:
    return SaslAuthenticator(["PLAIN", "SCRAM-SHA-256"], server_factory({"bob": "pw"}, CredentialCache()), API_TABLE)


def api_versions(correlation_id: int = 1) -> bytes:
    return frame(ApiVersionsRequest(client_software_name="test", client_software_version="1"), correlation_id)


def frame(body: Any, correlation_id: int = 1) -> bytes:
    return encode_request(body, correlation_id)[4:]  # without the size: what the connection hands over


def decode(answer: bytes | None, response_type: type[Any]) -> Any:
    assert answer is not None
    (size, _correlation_id) = struct.unpack_from(">ii", answer)
    assert size == len(answer) - 4
    start = 8 + (1 if response_type.__flexible__ and response_type.__api_key__ != 18 else 0)
    return entity_reader(response_type)(answer, start)[0]


def test_api_versions_handshake_and_plain() -> None:
    auth = authenticator()
    versions = decode(auth.receive(api_versions()), ApiVersionsResponse)
    assert versions.error_code == 0 and {k.api_key for k in versions.api_keys} >= {17, 36}
    handshake = decode(auth.receive(frame(SaslHandshakeRequest(mechanism="PLAIN"))), SaslHandshakeResponse)
    assert handshake.error_code == 0 and list(handshake.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    done = decode(auth.receive(frame(SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw"))), SaslAuthenticateResponse)
    assert done.error_code == 0 and auth.complete and auth.authorization_id == "bob"


def test_handshake_v0_takes_raw_tokens() -> None:
    auth = authenticator()
    auth.receive(frame(SaslHandshakeRequestV0(mechanism="PLAIN")))
    assert auth.receive(b"\0bob\0pw") == b"\x00\x00\x00\x00"  # a size-prefixed empty token
    assert auth.complete
    auth = authenticator()
    auth.receive(frame(SaslHandshakeRequestV0(mechanism="PLAIN")))
    with pytest.raises(AuthenticationFailed) as caught:
        auth.receive(b"\0bob\0nope")
    assert caught.value.response is None and caught.value.delayed  # v0 cannot say why: closed after the delay


@pytest.mark.parametrize("versions_first", [False, True])
def test_requests_before_the_handshake_are_illegal(versions_first: bool) -> None:
    """A Metadata request, or a second ApiVersions, before the handshake: refused without an answer."""
    auth = authenticator()
    refused = raw_request(3, 8, 1, b"")[4:]
    if versions_first:
        auth.receive(api_versions())
        refused = api_versions(2)
    with pytest.raises(AuthenticationFailed) as caught:
        auth.receive(refused)
    assert caught.value.code is ErrorCode.ILLEGAL_SASL_STATE and caught.value.response is None
    assert "during SASL handshake" in str(caught.value)


def test_unsupported_mechanism_and_wrong_password_answer_then_close() -> None:
    with pytest.raises(AuthenticationFailed) as caught:
        authenticator().receive(frame(SaslHandshakeRequest(mechanism="GSSAPI")))
    assert caught.value.code is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    answer = decode(caught.value.response, SaslHandshakeResponse)
    assert answer.error_code == 33 and list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    auth = authenticator()
    auth.receive(frame(SaslHandshakeRequest(mechanism="PLAIN")))
    with pytest.raises(AuthenticationFailed) as caught:
        auth.receive(frame(SaslAuthenticateRequest(auth_bytes=b"\0bob\0nope"), 2))
    failed = decode(caught.value.response, SaslAuthenticateResponse)
    assert failed.error_code == 58 and failed.error_message == "Authentication failed: Invalid username or password"
    assert caught.value.delayed and not auth.complete


def test_only_sasl_authenticate_after_the_handshake() -> None:
    auth = authenticator()
    auth.receive(frame(SaslHandshakeRequest(mechanism="PLAIN")))
    with pytest.raises(AuthenticationFailed, match="Unexpected Kafka request of type Metadata during SASL auth"):
        auth.receive(raw_request(3, 8, 2, b"")[4:])


def test_garbage_is_a_request_error() -> None:
    for garbage in (b"\x00", raw_request(17, 1, 1, b"\xff\xff\xff")[4:], raw_request(17, 9, 1, b"")[4:]):
        with pytest.raises(RequestError):
            authenticator().receive(garbage)
