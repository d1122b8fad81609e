"""The APIs and versions this broker serves on its Kafka listeners, and nothing more (ApiVersions
advertises exactly API_TABLE).
librdkafka turns record batch v2 on only when Produce >= 3 and Fetch >= 4 are advertised, the idempotent
producer only with InitProducerId, and its group consumer only with the group family (FindCoordinator
through DeleteGroups)."""

from __future__ import annotations

from broker.api.kafka import (
    acls,
    admin,
    api_versions,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    partitions,
    produce,
    producers,
    scram_credentials,
    transactions,
    txn_markers,
)
from broker.api.kafka.protocol import API_VERSIONS_KEY, ApiSpec
from broker.api.kafka.sasl_authenticator import handle_sasl_authenticate, handle_sasl_handshake

API_TABLE: list[ApiSpec] = [
    ApiSpec(0, "Produce", 3, 8, produce.handle_produce),
    ApiSpec(1, "Fetch", 4, 11, fetch.handle_fetch),
    ApiSpec(2, "ListOffsets", 1, 7, offsets.handle_list_offsets),
    ApiSpec(3, "Metadata", 0, 8, metadata.handle_metadata),
    ApiSpec(8, "OffsetCommit", 2, 8, groups.handle_offset_commit),
    ApiSpec(9, "OffsetFetch", 1, 7, groups.handle_offset_fetch),
    ApiSpec(10, "FindCoordinator", 0, 3, groups.handle_find_coordinator),
    ApiSpec(11, "JoinGroup", 0, 7, groups.handle_join_group),
    ApiSpec(12, "Heartbeat", 0, 4, groups.handle_heartbeat),
    ApiSpec(13, "LeaveGroup", 0, 4, groups.handle_leave_group),
    ApiSpec(14, "SyncGroup", 0, 5, groups.handle_sync_group),
    ApiSpec(15, "DescribeGroups", 0, 5, groups.handle_describe_groups),
    ApiSpec(16, "ListGroups", 0, 4, groups.handle_list_groups),
    ApiSpec(17, "SaslHandshake", 0, 1, handle_sasl_handshake),
    ApiSpec(19, "CreateTopics", 2, 4, admin.handle_create_topics),
    ApiSpec(20, "DeleteTopics", 1, 3, admin.handle_delete_topics),
    ApiSpec(21, "DeleteRecords", 0, 2, partitions.handle_delete_records),
    ApiSpec(22, "InitProducerId", 0, 4, transactions.handle_init_producer_id),
    ApiSpec(23, "OffsetForLeaderEpoch", 2, 3, offsets.handle_offset_for_leader_epoch),
    ApiSpec(24, "AddPartitionsToTxn", 0, 3, transactions.handle_add_partitions_to_txn),
    ApiSpec(25, "AddOffsetsToTxn", 0, 3, transactions.handle_add_offsets_to_txn),
    ApiSpec(26, "EndTxn", 0, 3, transactions.handle_end_txn),
    # A coordinator's markers and KIP-664's abort; v1, the first flexible version.
    ApiSpec(27, "WriteTxnMarkers", 1, 1, txn_markers.handle_write_txn_markers),
    ApiSpec(28, "TxnOffsetCommit", 0, 3, groups.handle_txn_offset_commit),
    ApiSpec(29, "DescribeAcls", 1, 2, acls.handle_describe_acls),
    ApiSpec(30, "CreateAcls", 1, 2, acls.handle_create_acls),
    ApiSpec(31, "DeleteAcls", 1, 2, acls.handle_delete_acls),
    ApiSpec(32, "DescribeConfigs", 1, 3, admin.handle_describe_configs),
    ApiSpec(33, "AlterConfigs", 0, 1, admin.handle_alter_configs),
    ApiSpec(35, "DescribeLogDirs", 1, 4, log_dirs.handle_describe_log_dirs),
    ApiSpec(36, "SaslAuthenticate", 0, 2, handle_sasl_authenticate),
    ApiSpec(37, "CreatePartitions", 0, 3, admin.handle_create_partitions),
    ApiSpec(42, "DeleteGroups", 0, 2, groups.handle_delete_groups),
    ApiSpec(43, "ElectLeaders", 0, 2, partitions.handle_elect_leaders),
    ApiSpec(44, "IncrementalAlterConfigs", 0, 1, admin.handle_incremental_alter_configs),
    ApiSpec(47, "OffsetDelete", 0, 0, groups.handle_offset_delete),
    ApiSpec(50, "DescribeUserScramCredentials", 0, 0, scram_credentials.handle_describe_user_scram_credentials),
    ApiSpec(51, "AlterUserScramCredentials", 0, 0, scram_credentials.handle_alter_user_scram_credentials,
            trailing_bytes_allowed=True),
    ApiSpec(61, "DescribeProducers", 0, 0, producers.handle_describe_producers),
    ApiSpec(65, "DescribeTransactions", 0, 0, transactions.handle_describe_transactions),
    ApiSpec(66, "ListTransactions", 0, 0, transactions.handle_list_transactions),
]
API_TABLE.append(ApiSpec(API_VERSIONS_KEY, "ApiVersions", 0, 3, api_versions.make_handler(API_TABLE)))
API_TABLE.sort(key=lambda spec: spec.key)
APIS = {spec.key: spec for spec in API_TABLE}
