"""SASL authentication of a connection on a SASL_PLAINTEXT / SASL_SSL Kafka listener: Kafka's
SaslServerAuthenticator, as a state machine with no I/O (the connection feeds it frames and sends what it
answers).

Before authentication a client may only send ApiVersions (once) and SaslHandshake (v0-1) naming an enabled
mechanism; any other request is ILLEGAL_SASL_STATE ("Unexpected Kafka request of type Metadata during SASL
handshake.") and the connection is closed without an answer, as Kafka does. After a v1 handshake the tokens
come in SaslAuthenticate requests (v0-2) and go back in their responses; after a v0 handshake they are raw,
size-prefixed bytes (old clients). When the mechanism completes, the connection acts as User:<name>.

Failures are Kafka's: an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled list, wrong
credentials SASL_AUTHENTICATION_FAILED with Kafka's message; both are answered only after
connection.failed.authentication.delay.ms and the connection is then closed (`AuthenticationFailed.delayed`,
which the connection honours), which slows a password guesser down without holding a thread.
After authentication, SaslHandshake and SaslAuthenticate are answered ILLEGAL_SASL_STATE (no
re-authentication: connections.max.reauth.ms is not served).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from kio.index import load_response_schema

from broker.api.kafka.api_versions import supported_versions_reply
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import (
    API_VERSIONS_KEY,
    HEADER_PREFIX,
    SIZE,
    ApiSpec,
    Reply,
    RequestError,
    RequestHeader,
    build,
    encode,
    kio_error,
    millis,
    parse_body,
    parse_header,
    request_class,
    response_frame_header,
)
from broker.security.sasl import SaslAuthenticationError, ServerFactory
from proto.errors import ErrorCode

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class AuthenticationFailed(Exception):
    """The connection must close: `response` (if any) is its last frame, sent after Kafka's failed
    authentication delay when `delayed`."""

    def __init__(self, reason: str, code: ErrorCode, response: bytes | None = None, delayed: bool = True) -> None:
        super().__init__(reason)
        self.code = code
        self.response = response
        self.delayed = delayed


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = enum.auto()
    HANDSHAKE = enum.auto()
    AUTHENTICATE = enum.auto()  # with SaslAuthenticate requests (handshake v1)
    AUTHENTICATE_RAW = enum.auto()  # raw tokens (handshake v0)
    COMPLETE = enum.auto()


def _response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


def _frame(correlation_id: int, reply: Reply) -> bytes:
    parts = [p for p in reply.parts if isinstance(p, bytes)]  # these replies never carry file slices
    return response_frame_header(correlation_id, reply) + b"".join(parts)


class SaslAuthenticator:
    def __init__(self, mechanisms: Sequence[str], make_server: ServerFactory, api_table: list[ApiSpec]) -> None:
        self._mechanisms = tuple(mechanisms)
        self._make_server = make_server
        self._apis = {spec.key: spec for spec in api_table}
        self._api_table = api_table
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._server: Any = None
        self.mechanism: str | None = None
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def receive(self, frame: bytes) -> bytes | None:
        """The answer to one frame (None: nothing to send); AuthenticationFailed when the connection must close,
        RequestError (closed at once) for a frame that is not a request at all."""
        if self._state is _State.AUTHENTICATE_RAW:
            return self._raw_token(frame)
        if len(frame) < HEADER_PREFIX.size:
            raise RequestError(f"request of {len(frame)} bytes is shorter than a request header")
        api_key, version, correlation_id = HEADER_PREFIX.unpack_from(frame)
        spec = self._apis.get(api_key)
        name = spec.name if spec is not None else f"api key {api_key}"
        if self._state is _State.AUTHENTICATE:
            if api_key != SASL_AUTHENTICATE_KEY:
                raise AuthenticationFailed(f"Unexpected Kafka request of type {name} during SASL authentication.",
                                           ErrorCode.ILLEGAL_SASL_STATE)
            return self._authenticate(frame, version)
        if api_key == API_VERSIONS_KEY and self._state is _State.HANDSHAKE_OR_VERSIONS:
            return self._api_versions(frame, version, correlation_id)
        if api_key != SASL_HANDSHAKE_KEY:
            raise AuthenticationFailed(f"Unexpected Kafka request of type {name} during SASL handshake.",
                                       ErrorCode.ILLEGAL_SASL_STATE)
        return self._handshake(frame, version)

    def _request(self, frame: bytes, api_key: int, version: int) -> tuple[RequestHeader, Any]:
        spec = self._apis[api_key]
        if not spec.min_version <= version <= spec.max_version:
            raise RequestError(f"{spec.name} v{version} is not supported (versions {spec.min_version}-"
                               f"{spec.max_version})")
        cls = request_class(api_key, version)
        header, start = parse_header(frame, bool(cls.__flexible__))
        return header, parse_body(cls, frame, start)

    def _api_versions(self, frame: bytes, version: int, correlation_id: int) -> bytes:
        spec = self._apis[API_VERSIONS_KEY]
        if not spec.min_version <= version <= spec.max_version:
            # KIP-511, as on any connection: a v0 answer the client can read; the state stays.
            return _frame(correlation_id, supported_versions_reply(self._api_table, ErrorCode.UNSUPPORTED_VERSION, 0))
        header, _ = self._request(frame, API_VERSIONS_KEY, version)
        self._state = _State.HANDSHAKE
        return _frame(header.correlation_id, supported_versions_reply(self._api_table, ErrorCode.NONE, version))

    def _handshake(self, frame: bytes, version: int) -> bytes:
        header, request = self._request(frame, SASL_HANDSHAKE_KEY, version)
        response_class = _response_class(SASL_HANDSHAKE_KEY, version)
        if request.mechanism not in self._mechanisms:
            answer = _frame(header.correlation_id, encode(response_class(
                error_code=kio_error(ErrorCode.UNSUPPORTED_SASL_MECHANISM), mechanisms=self._mechanisms)))
            raise AuthenticationFailed(f"Unsupported SASL mechanism {request.mechanism}",
                                       ErrorCode.UNSUPPORTED_SASL_MECHANISM, answer)
        self.mechanism = request.mechanism
        self._server = self._make_server(request.mechanism)
        self._state = _State.AUTHENTICATE if version >= 1 else _State.AUTHENTICATE_RAW
        return _frame(header.correlation_id, encode(response_class(error_code=kio_error(ErrorCode.NONE),
                                                                   mechanisms=self._mechanisms)))

    def _authenticate(self, frame: bytes, version: int) -> bytes:
        header, request = self._request(frame, SASL_AUTHENTICATE_KEY, version)
        response_class = _response_class(SASL_AUTHENTICATE_KEY, version)
        try:
            token = self._server.evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as e:
            answer = _frame(header.correlation_id, encode(build(
                response_class, error_code=kio_error(ErrorCode.SASL_AUTHENTICATION_FAILED),
                error_message=e.client_message, auth_bytes=b"", session_lifetime=millis(0))))
            raise AuthenticationFailed(str(e), ErrorCode.SASL_AUTHENTICATION_FAILED, answer) from None
        self._maybe_complete()
        return _frame(header.correlation_id, encode(build(
            response_class, error_code=kio_error(ErrorCode.NONE), error_message=None, auth_bytes=token,
            session_lifetime=millis(0))))

    def _raw_token(self, frame: bytes) -> bytes:
        try:
            token = self._server.evaluate(frame)
        except SaslAuthenticationError as e:
            # Handshake v0 has no way to say why: the connection just closes (after the delay).
            raise AuthenticationFailed(str(e), ErrorCode.SASL_AUTHENTICATION_FAILED) from None
        self._maybe_complete()
        return SIZE.pack(len(token)) + token

    def _maybe_complete(self) -> None:
        if self._server.complete:
            self.authorization_id = self._server.authorization_id
            self._state = _State.COMPLETE


async def handle_sasl_handshake(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    """A SaslHandshake once the connection is authenticated, or on a listener without SASL (Kafka's
    KafkaApis.handleSaslHandshakeRequest)."""
    return encode(_response_class(SASL_HANDSHAKE_KEY, header.api_version)(
        error_code=kio_error(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=()))


async def handle_sasl_authenticate(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    return encode(build(
        _response_class(SASL_AUTHENTICATE_KEY, header.api_version),
        error_code=kio_error(ErrorCode.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate request received after successful authentication", auth_bytes=b"",
        session_lifetime=millis(0)))
