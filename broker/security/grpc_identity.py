"""Who is asking on the gRPC door: the Session a gRPC call acts as.

Until the gRPC listener authenticates its clients (mutual TLS or authenticated metadata), every call acts as
ANONYMOUS, as a Kafka PLAINTEXT connection does; the client host is the peer's address. Cluster-internal calls
(LeaderAndIsr, UpdateMetadata, StopReplica, follower fetches, OffsetsForLeaderEpoch) are not decided here:
they prove themselves with the cluster credential (proto/auth.py).
"""

from __future__ import annotations

from typing import Any

from broker.security.authorizer import Session
from broker.security.principal import ANONYMOUS, KafkaPrincipal


def grpc_principal(context: Any) -> KafkaPrincipal:
    """The principal of a gRPC call (grpc.aio.ServicerContext); ANONYMOUS until the door authenticates."""
    return ANONYMOUS


def peer_host(peer: str) -> str:
    """The IP address in a gRPC peer string: "ipv4:127.0.0.1:5353" -> "127.0.0.1", "ipv6:[::1]:5353" -> "::1"."""
    kind, _, address = peer.partition(":")
    if kind == "ipv6":
        return address.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return address.rpartition(":")[0]
    return address or peer  # unix sockets and the like: as gRPC names them


def grpc_session(context: Any) -> Session:
    return Session(grpc_principal(context), peer_host(context.peer() or ""))
