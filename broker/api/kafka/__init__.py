"""Apache Kafka's wire protocol on a broker's Kafka listeners: the second front door onto the same
ReplicaManager as the gRPC one (broker/api/operations.py holds what both call).

- protocol.py: request header parsing, response framing; api_table.py: the APIs and versions served (what
  ApiVersions advertises);
- context.py: what the handlers reach: the broker operations, the group and transaction coordinators, the
  listener, the session;
- connection.py: one client connection: frames in, pipelined requests, responses out in request order,
  Fetch record bytes with sendfile (os.pread writes under TLS); first the SASL exchange on a SASL listener;
- listener.py: the asyncio server of one listener, with Kafka's connection limits and, on SSL and SASL_SSL
  listeners, each connection's TLS handshake (and its certificate's principal);
- listener_security.py: what a listener's security protocol asks of each connection (TLS context, SASL
  mechanisms and users), built from its configs at start-up;
- sasl_authenticator.py: Kafka's SaslServerAuthenticator as a state machine (ApiVersions, SaslHandshake,
  SaslAuthenticate or raw v0 tokens; ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED);
- one module per API family: api_versions.py, metadata.py, produce.py, fetch.py, offsets.py, admin.py (topics,
  CreatePartitions, configs), partitions.py (DeleteRecords; ElectLeaders, forwarded to the controller process),
  log_dirs.py (DescribeLogDirs), producers.py (DescribeProducers, KIP-664), groups.py (FindCoordinator through
  DeleteGroups and OffsetDelete, onto broker/coordinator/group/), transactions.py (InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, KIP-664's DescribeTransactions and ListTransactions, onto
  broker/coordinator/transaction/), acls.py (DescribeAcls,
  CreateAcls, DeleteAcls), scram_credentials.py
  (DescribeUserScramCredentials, AlterUserScramCredentials, onto broker/admin/scram_admin.py), txn_markers.py
  (WriteTxnMarkers: a coordinator's markers, and KIP-664's administrative abort, with ClusterAction);
  metadata (v8) and groups (DescribeGroups v3+) answer, when asked, the principal's authorized operations (KIP-430)
  from BrokerOperations.authorized_operations.

Messages are decoded and encoded with kio (generated from Kafka's own JSON message schemas); the Fetch
response is framed by hand around the log's file slices, and record bytes are never re-encoded. A request body
must end where its frame does (Kafka does not check), except for an API flagged `trailing_bytes_allowed` in the
table because a real client sends more (librdkafka's AlterUserScramCredentials).
"""

import sys

# kio registers hypothesis strategies for its types whenever hypothesis imports, and hypothesis imports its
# plugins (trio's among them): ~0.4 s of CPU, seconds on a loaded machine, at every start of a broker where
# hypothesis is installed (the test suite's), for strategies a broker never uses. Hidden from kio's first
# import unless the process already has it (pytest's hypothesis plugin loads it first).
if "hypothesis" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` raises ImportError
    try:
        import kio.static.primitive  # noqa: F401
    finally:
        del sys.modules["hypothesis"]

