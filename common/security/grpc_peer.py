"""What a gRPC server knows of its peer, on a broker's listener or the controller's: the client host of a
Session and the subject of a CA-verified client certificate (the TLS handshake already checked it)."""

from __future__ import annotations

from typing import Any

from cryptography import x509


def peer_host(peer: str) -> str:
    """The IP address in a gRPC peer string: "ipv4:127.0.0.1:5353" -> "127.0.0.1", "ipv6:[::1]:5353" -> "::1"."""
    kind, _, address = peer.partition(":")
    if kind == "ipv6":
        return address.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return address.rpartition(":")[0]
    return address or peer  # unix sockets and the like: as gRPC names them


def certificate_subject(context: Any) -> str | None:
    """The RFC 4514 subject of the peer's verified certificate (a grpc ServicerContext's auth context); None
    without one."""
    values = (context.auth_context() or {}).get("x509_pem_cert")
    if not values:
        return None
    return x509.load_pem_x509_certificate(values[0]).subject.rfc4514_string()
