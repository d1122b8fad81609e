"""The request side of Kafka's protocol: which API versions this broker serves, the request header, and the
framing of a response (size, correlation id, body).

A version number promises semantics, not just an encoding: only the versions whose behaviour the handlers
implement are in API_TABLE, and ApiVersions advertises exactly that table.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from broker.log.file_slice import FileSlice
from proto.errors import ErrorCode

# api_key, api_version, correlation_id: the part of every request header that is the same in all versions.
HEADER_PREFIX = struct.Struct(">hhi")
SIZE = struct.Struct(">i")
CORRELATION = struct.Struct(">i")
API_VERSIONS_KEY = 18


class RequestError(Exception):
    """A request that gets no answer: the connection is closed and the reason logged (Kafka's
    InvalidRequestException in the network layer)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(slots=True)
class Reply:
    """A response body: encoded bytes and, for Fetch, the log's file slices to send as they are."""

    parts: list[bytes | FileSlice]
    flexible: bool  # response header v1 (tagged fields) rather than v0

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.parts)


class Handler(Protocol):
    def __call__(self, context: Any, header: RequestHeader, request: Any) -> Awaitable[Reply | None]: ...


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler = field(compare=False)
    # Kafka never checks that a request body ends where the frame does; we refuse leftover bytes, except for an
    # API a real client is known to send them with (librdkafka ends AlterUserScramCredentials with a second
    # empty tag section).
    trailing_bytes_allowed: bool = False


def encode(entity: Any) -> Reply:
    """A kio response entity as a reply; its flexibility decides the response header's version."""
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return Reply([out.getvalue()], bool(type(entity).__flexible__))


def build(cls: type[Any], **values: Any) -> Any:
    """`cls(**values)` keeping only the fields this version of the message has: one handler serves every
    version of its API, and a field a version lacks is simply not on the wire."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def kio_error(code: ErrorCode | int) -> KioErrorCode:
    return KioErrorCode(int(code))


def millis(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def to_millis(delta: datetime.timedelta) -> int:
    return int(delta / datetime.timedelta(milliseconds=1))


@functools.cache
def request_class(api_key: int, version: int) -> type[Any]:
    # Cached: kio resolves the class through importlib's name lookup, a cost paid on every request otherwise.
    return load_request_schema(api_key, version)


def parse_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """The request header (v1, or v2 for a flexible version) and where the body starts."""
    header_type = RequestHeaderV2 if flexible else RequestHeaderV1
    try:
        header: Any
        header, used = entity_reader(header_type)(frame, 0)
    except Exception as e:
        raise RequestError(f"malformed request header: {e}") from None
    return RequestHeader(header.request_api_key, header.request_api_version, header.correlation_id,
                         header.client_id), used


def parse_body(cls: type[Any], frame: bytes, start: int, trailing_bytes_allowed: bool = False) -> Any:
    try:
        body, used = entity_reader(cls)(frame, start)
    except Exception as e:
        raise RequestError(f"malformed {cls.__name__} v{cls.__version__}: {e}") from None
    if start + used != len(frame) and not trailing_bytes_allowed:
        raise RequestError(f"{cls.__name__} v{cls.__version__} has {len(frame) - start - used} bytes after its end")
    return body


def response_frame_header(correlation_id: int, reply: Reply) -> bytes:
    """Size, then response header v0 (correlation id) or v1 (plus empty tagged fields)."""
    header = CORRELATION.pack(correlation_id) + (b"\x00" if reply.flexible else b"")
    return SIZE.pack(len(header) + reply.size) + header






EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def datetime_of(ms: int) -> datetime.datetime:
    """A timestamp field kio types as a datetime, exact to the millisecond (-1 stays -1 on the wire)."""
    return EPOCH + datetime.timedelta(milliseconds=ms)


def datetime_or_none(ms: int) -> datetime.datetime | None:
    """A timestamp field kio types as a nullable datetime: -1 (none) is null on the wire."""
    return None if ms < 0 else datetime_of(ms)
