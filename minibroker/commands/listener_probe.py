"""Which protocol a --bootstrap-server address speaks, so a tool given the wrong listener says so in one line.

A broker has two kinds of listener: gRPC (minibroker's client and every tool but `acls`) and Apache Kafka's wire
protocol (Kafka clients, `acls --bootstrap-server` as kafka-acls.sh). A tool given the other kind got `UNAVAILABLE
... Socket closed` or waited a minute. Before it starts, the first address is probed, plainly (a TLS listener
answers neither probe and the tool goes on as before):

- gRPC: the HTTP/2 client preface is answered with a SETTINGS frame (RFC 9113, 3.4);
- Kafka: an ApiVersions v0 request is answered with its correlation id.

A mismatch is one line (client_options.bootstrap_servers raises it as a UsageError) naming the listener the tool
needs and, when the broker says (its `listeners` and `grpc.listener.names` through DescribeConfigs on the listener
that answered), where that listener is.
"""

from __future__ import annotations

import socket
import struct

from client.connection import parse_bootstrap_servers

KAFKA = "Kafka"
GRPC = "gRPC"
PROBE_TIMEOUT_S = 2.0

_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HTTP2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_HTTP2_SETTINGS_TYPE = 4
_API_VERSIONS_KEY = 18
_CORRELATION_ID = 0x6D62  # "mb"
_CLIENT_ID = b"minibroker-probe"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _exchange(address: str, request: bytes, answer_size: int, timeout: float) -> bytes:
    """Send `request`, read up to `answer_size` bytes of the answer; b"" when nothing comes (closed, refused,
    silent until `timeout`)."""
    try:
        with socket.create_connection(_split(address), timeout=timeout) as sock:
            sock.sendall(request)
            answer = b""
            while len(answer) < answer_size:
                chunk = sock.recv(answer_size - len(answer))
                if not chunk:
                    break
                answer += chunk
            return answer
    except OSError:
        return b""


def _speaks_grpc(address: str, timeout: float) -> bool:
    frame = _exchange(address, _HTTP2_PREFACE + _HTTP2_EMPTY_SETTINGS, 9, timeout)
    return len(frame) == 9 and frame[3] == _HTTP2_SETTINGS_TYPE


def _speaks_kafka(address: str, timeout: float) -> bool:
    header = struct.pack(">hhih", _API_VERSIONS_KEY, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    answer = _exchange(address, struct.pack(">i", len(header)) + header, 8, timeout)
    return len(answer) == 8 and struct.unpack(">ii", answer)[1] == _CORRELATION_ID


def listener_kind(address: str, timeout: float = PROBE_TIMEOUT_S, expected: str = GRPC) -> str | None:
    """GRPC, KAFKA, or None when neither answers (nothing listens, TLS, something else). The `expected` kind is
    asked first: a listener given to the tool that needs it is never sent the other protocol's probe (a Kafka
    listener logs an HTTP/2 preface as a frame of an absurd size)."""
    probes = {GRPC: _speaks_grpc, KAFKA: _speaks_kafka}
    for kind in (expected, *(k for k in probes if k != expected)):
        if probes[kind](address, timeout):
            return kind
    return None


def wrong_listener(servers: str, needed: str, tool: str) -> str | None:
    """What to tell the user when the first of `servers` is a listener of the other kind than `needed`."""
    address = parse_bootstrap_servers(servers)[0]
    kind = listener_kind(address, expected=needed)
    if kind is None or kind == needed:
        return None
    where = other_listener(address, kind, needed)
    return (f"{address} is a {kind} listener: minibroker {tool} needs a broker's {needed} listener"
            + (f", {where} on this broker" if where else "")
            + " (or --data-dir DIR of a cluster `minibroker cluster up` started)")


def other_listener(address: str, kind: str, needed: str) -> str | None:
    """The address of the `needed` listener of the broker whose `kind` listener answered at `address`, from its
    `listeners` and `grpc.listener.names` configs; None when it cannot be learned."""
    try:
        listeners, grpc_names = (_configs_over_kafka if kind == KAFKA else _configs_over_grpc)(address)
    except Exception:  # best effort: the one-line message stands without it
        return None
    for entry in listeners.split(","):
        name, sep, rest = entry.strip().partition("://")
        if not sep:
            continue
        if (name in grpc_names) == (needed == GRPC):
            host, _, port = rest.rpartition(":")
            return f"{host or _split(address)[0]}:{port}"
    return None


def _configs_over_kafka(address: str) -> tuple[str, set[str]]:
    """Through kafka-python 3's admin client (its describe_configs answers a dict; 2.x's raw answer, or no
    config_filter, fails here and leaves the address out of the message)."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=[address], client_id="minibroker-probe",
                             request_timeout_ms=int(PROBE_TIMEOUT_S * 1000))
    try:
        broker = _broker_at(address, [(b["broker_id"], f"{b['host']}:{b['port']}")
                                      for b in admin.describe_cluster()["brokers"]])
        keys = ["listeners", "advertised.listeners", "grpc.listener.names"]
        found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker), keys)],
                                       config_filter="All")["broker"][str(broker)]
    finally:
        admin.close()
    return _listeners({key: entry["value"] for key, entry in found.items()})


def _configs_over_grpc(address: str) -> tuple[str, set[str]]:
    from client import Admin, ConfigResource, ConfigResourceType

    with Admin(address, client_id="minibroker-probe", request_timeout_ms=int(PROBE_TIMEOUT_S * 1000),
               default_api_timeout_ms=int(PROBE_TIMEOUT_S * 1000)) as admin:
        broker = _broker_at(address, [(b.node_id, b.address) for b in admin.describe_cluster().brokers])
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
        values = {e.name: e.value for e in admin.describe_configs([resource])[resource]}
    return _listeners(values)


def _broker_at(address: str, brokers: list[tuple[int, str]]) -> int:
    return next((node for node, at in brokers if at == address), brokers[0][0])


def _listeners(values: dict[str, str | None]) -> tuple[str, set[str]]:
    listeners = values.get("advertised.listeners") or values.get("listeners") or ""
    return listeners, {n.strip() for n in (values.get("grpc.listener.names") or "").split(",") if n.strip()}
