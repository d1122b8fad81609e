"""How a cluster action proves it comes from inside the cluster.

Controller -> broker requests, broker -> broker replication traffic and the
broker -> controller ControlledShutdown carry the shared secret configured as
`cluster.credential` in gRPC metadata under this key, never in a message field,
so the secret stays out of request logs. A missing or wrong credential is
answered with CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a principal
without the ClusterAction ACL.
"""

from __future__ import annotations

# gRPC metadata keys must be lowercase ASCII; the x- prefix marks it as ours.
CLUSTER_CREDENTIAL_METADATA_KEY = "x-cluster-credential"
