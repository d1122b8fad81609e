"""Who may act for the cluster on a gRPC listener, a broker's or the controller's: Kafka's CLUSTER_ACTION on the
Cluster resource (KafkaApis asks it before LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown,
OffsetsForLeaderEpoch and a Fetch or ListOffsets that claims to come from a follower), with what a gRPC call
carries besides its principal:

- a plaintext listener with a `cluster.credential`: the credential in the call's metadata (proto/auth.py) is the
  proof. Its principal would be ANONYMOUS, which no secure cluster can grant CLUSTER_ACTION to without granting
  it to everyone;
- otherwise, with an authorizer: the authorizer decides for the call's principal (the brokers' and controllers'
  certificate principals get it through `super.users` or a CLUSTER_ACTION ACL), a denial logged by it with the
  principal and the operation, as Kafka's authorizer logger does;
- without an authorizer (Kafka: every request is allowed): on TLS a CA-verified client certificate, on plaintext
  anyone.
"""

from __future__ import annotations

from common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from common.security.authorizer import AclAuthorizer, Session


def authorize_cluster_action(authorizer: AclAuthorizer | None, session: Session, *, tls: bool,
                             verified_certificate: bool, carries_credential: bool | None) -> bool:
    """`carries_credential`: whether the call carries the cluster credential; None when none is configured."""
    if not tls and carries_credential is not None:
        return carries_credential
    if authorizer is not None:
        return authorizer.authorize(session, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    return verified_certificate or not tls
