"""Who is asking on the gRPC door: the Session a gRPC call acts as.

The listener's GrpcAuthenticator (broker/security/grpc_authentication.py) says who: a SASL user whose password
checked out, else the subject of a CA-verified client certificate, else ANONYMOUS (what every call on a
PLAINTEXT gRPC listener acts as, as on a Kafka PLAINTEXT connection); the client host is the peer's address.
Cluster-internal calls (LeaderAndIsr, UpdateMetadata, StopReplica, follower fetches, OffsetsForLeaderEpoch) are
not decided here: they prove themselves with a broker's or controller's certificate on a TLS listener, else with
the cluster credential (proto/auth.py).
"""

from __future__ import annotations

from typing import Any

from broker.security.grpc_authentication import GrpcAuthenticator
from common.security.authorizer import Session
from common.security.principal import ANONYMOUS, KafkaPrincipal


def grpc_principal(context: Any, authenticator: GrpcAuthenticator) -> KafkaPrincipal:
    """The principal of a gRPC call (grpc.aio.ServicerContext) on the listener `authenticator` guards. A call
    with a wrong password never gets here (the listener's interceptor refused it), so there is always one."""
    return authenticator.principal(context) or ANONYMOUS


def peer_host(peer: str) -> str:
    """The IP address in a gRPC peer string: "ipv4:127.0.0.1:5353" -> "127.0.0.1", "ipv6:[::1]:5353" -> "::1"."""
    kind, _, address = peer.partition(":")
    if kind == "ipv6":
        return address.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return address.rpartition(":")[0]
    return address or peer  # unix sockets and the like: as gRPC names them


def grpc_session(context: Any, authenticator: GrpcAuthenticator) -> Session:
    return Session(grpc_principal(context, authenticator), peer_host(context.peer() or ""))
