"""Who is asking on the gRPC door: the Session a gRPC call acts as.

The listener's GrpcAuthenticator (broker/security/grpc_authentication.py) says who: a SASL user whose password
checked out, else the subject of a CA-verified client certificate, else ANONYMOUS (what every call on a
PLAINTEXT gRPC listener acts as, as on a Kafka PLAINTEXT connection); the client host is the peer's address.
Cluster-internal calls (LeaderAndIsr, UpdateMetadata, StopReplica, follower fetches, OffsetsForLeaderEpoch) need
CLUSTER_ACTION on the cluster for this principal, or the cluster credential on a plaintext listener
(common/security/cluster_action.py).
"""

from __future__ import annotations

from typing import Any

from broker.security.grpc_authentication import GrpcAuthenticator
from common.security.authorizer import Session
from common.security.grpc_peer import peer_host
from common.security.principal import ANONYMOUS, KafkaPrincipal


def grpc_principal(context: Any, authenticator: GrpcAuthenticator) -> KafkaPrincipal:
    """The principal of a gRPC call (grpc.aio.ServicerContext) on the listener `authenticator` guards. A call
    with a wrong password never gets here (the listener's interceptor refused it), so there is always one."""
    return authenticator.principal(context) or ANONYMOUS


def grpc_session(context: Any, authenticator: GrpcAuthenticator) -> Session:
    return Session(grpc_principal(context, authenticator), peer_host(context.peer() or ""))
