"""How a cluster action proves it comes from inside the cluster.

Controller -> broker requests, broker -> broker replication traffic and the
broker -> controller ControlledShutdown carry the shared secret configured as
`cluster.credential` in gRPC metadata under this key, never in a message field,
so the secret stays out of request logs. A missing or wrong credential is
answered with CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a principal
without the ClusterAction ACL.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

# gRPC metadata keys must be lowercase ASCII; the x- prefix marks it as ours.
CLUSTER_CREDENTIAL_METADATA_KEY = "x-cluster-credential"


def cluster_credential_metadata(credential: str | None, tls: bool) -> tuple[tuple[str, str], ...]:
    """The metadata a cluster action's call carries: the credential on a plaintext connection, nothing on TLS
    (its certificate is the proof) or when none is configured."""
    return () if credential is None or tls else ((CLUSTER_CREDENTIAL_METADATA_KEY, credential),)


def carries_cluster_credential(metadata: Iterable[tuple[str, str | bytes]] | None, credential: bytes | None) -> bool:
    """Whether a call's metadata carries the cluster credential; any call does when none is configured.
    Compared in constant time, so the answer's timing does not leak the secret."""
    if credential is None:
        return True
    for key, value in metadata or ():
        if key == CLUSTER_CREDENTIAL_METADATA_KEY:
            given = value if isinstance(value, bytes) else value.encode()
            return hmac.compare_digest(given, credential)
    return False
