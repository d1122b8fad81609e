"""A bare Kafka-protocol connection for tests that need to send what no client library would: requests are
encoded with kio (Kafka's JSON schemas), or given as raw bytes."""

from __future__ import annotations

import io
import socket
import ssl
import struct
import time
from typing import Any

from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32


def encode_request(body: Any, correlation_id: int, client_id: str = "wire-test") -> bytes:
    """A size-prefixed request frame for a kio request entity (header v2 for flexible versions)."""
    flexible = bool(type(body).__flexible__)
    header_type = RequestHeaderV2 if flexible else RequestHeaderV1
    out = io.BytesIO()
    entity_writer(header_type)(out, header_type(request_api_key=i16(type(body).__api_key__),
                                                request_api_version=i16(type(body).__version__),
                                                correlation_id=i32(correlation_id), client_id=client_id))
    entity_writer(type(body))(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def raw_request(api_key: int, version: int, correlation_id: int, rest: bytes = b"") -> bytes:
    """A frame with header v1's fixed fields (client id null) followed by `rest`."""
    payload = struct.pack(">hhih", api_key, version, correlation_id, -1) + rest
    return struct.pack(">i", len(payload)) + payload


def frames_from_schemas(api_keys: list[int]) -> st.SearchStrategy[bytes]:
    """Fuzz input: frames with a plausible header (served API keys and some that are not, any version and
    correlation id) and random bodies."""
    return st.builds(
        lambda key, version, correlation_id, body: raw_request(key, version, correlation_id, body),
        st.sampled_from([*sorted(api_keys), 999, -1]),
        st.integers(min_value=-1, max_value=14),
        st.integers(min_value=-(2**31), max_value=2**31 - 1),
        st.binary(max_size=300),
    )


RAW_BYTES = st.binary(min_size=1, max_size=400)


class WireConnection:
    """A connection to a Kafka listener; over TLS with `tls` (the handshake done before it returns)."""

    def __init__(self, address: str, timeout: float = 15.0, tls: ssl.SSLContext | None = None) -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.local_port = sock.getsockname()[1]
        self.sock: socket.socket = sock if tls is None else tls.wrap_socket(sock, server_hostname=host)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> tuple[int, bytes]:
        """(correlation id, the rest of the response)."""
        (size,) = struct.unpack(">i", self._read_exactly(4))
        payload = self._read_exactly(size)
        return struct.unpack_from(">i", payload)[0], payload[4:]

    def receive_body(self, response_type: type[Any]) -> tuple[int, Any]:
        """A response decoded as `response_type`; a flexible one's header carries an empty tagged-field
        section (except ApiVersions, whose header is always v0)."""
        correlation_id, rest = self.receive()
        start = 1 if response_type.__flexible__ and response_type.__api_key__ != 18 else 0
        body, _ = entity_reader(response_type)(rest, start)
        return correlation_id, body

    def closed_by_peer(self, timeout: float = 15.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within `timeout`; data read meanwhile is
        dropped."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                continue
            except ConnectionError:
                return True
        return False
