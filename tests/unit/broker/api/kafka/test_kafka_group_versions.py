"""The group family on the Kafka listener (broker/api/kafka/groups.py), every served version: a member's whole
life (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
ListGroups, LeaveGroup, DeleteGroups) and a transactional producer's TxnOffsetCommit as kio-encoded requests
through the handlers onto a real GroupCoordinator, each response decoded with kio's reader for its version
(generated from Kafka's JSON schemas). Real clients use a few versions each
(tests/integration/groups/test_kafka_groups.py); this walks all of them."""

from __future__ import annotations

import asyncio
import importlib
import io
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from broker.api.group_operations import GroupOperations
from broker.api.kafka import groups
from broker.api.kafka.api_table import APIS
from broker.api.kafka.protocol import RequestHeader, build, millis
from common.security.authorizer import Session
from common.security.principal import ANONYMOUS
from proto.errors import ErrorCode
from tests.unit.broker.coordinator.group.test_group_coordinator import INITIAL_DELAY_MS, TOPIC_TP, Harness, group_here

KEYS = {"OffsetCommit": 8, "OffsetFetch": 9, "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12,
        "LeaveGroup": 13, "SyncGroup": 14, "DescribeGroups": 15, "ListGroups": 16, "DeleteGroups": 42,
        "OffsetDelete": 47, "TxnOffsetCommit": 28}
MODULES = {"OffsetCommit": "offset_commit", "OffsetFetch": "offset_fetch", "FindCoordinator": "find_coordinator",
           "JoinGroup": "join_group", "Heartbeat": "heartbeat", "LeaveGroup": "leave_group",
           "SyncGroup": "sync_group", "DescribeGroups": "describe_groups", "ListGroups": "list_groups",
           "DeleteGroups": "delete_groups", "OffsetDelete": "offset_delete", "TxnOffsetCommit": "txn_offset_commit"}
HANDLERS = {"OffsetCommit": groups.handle_offset_commit, "OffsetFetch": groups.handle_offset_fetch,
            "FindCoordinator": groups.handle_find_coordinator, "JoinGroup": groups.handle_join_group,
            "Heartbeat": groups.handle_heartbeat, "LeaveGroup": groups.handle_leave_group,
            "SyncGroup": groups.handle_sync_group, "DescribeGroups": groups.handle_describe_groups,
            "ListGroups": groups.handle_list_groups, "DeleteGroups": groups.handle_delete_groups,
            "OffsetDelete": groups.handle_offset_delete, "TxnOffsetCommit": groups.handle_txn_offset_commit}
# Flow n uses version n of each API, or the nearest one served: together the flows cover every served version.
FLOWS = range(max(APIS[key].max_version for key in KEYS.values()) + 1)


def served(api: str, flow: int) -> int:
    spec = APIS[KEYS[api]]
    return min(max(flow, spec.min_version), spec.max_version)


# No authorizer: every check passes (the checks themselves: tests/unit/broker/api/test_broker_group_authorization.py).
OPEN = SimpleNamespace(authorize=lambda *_, **__: True, authorized_topics=lambda _s, _o, topics, *_: set(topics),
                       authorize_cluster=lambda *_, **__: True)


class Wire:
    """Requests as a client's bytes would decode (kio, round-tripped) and the handler's answer decoded."""

    def __init__(self, harness: Harness, flow: int) -> None:
        self.harness = harness
        self.flow = flow
        self.context = SimpleNamespace(groups=GroupOperations(harness.coordinator, OPEN),  # type: ignore[arg-type]
                                       listener_name="PLAINTEXT", client_host="127.0.0.1",
                                       session=Session(ANONYMOUS, "127.0.0.1"))

    def module(self, api: str) -> Any:
        return importlib.import_module(f"kio.schema.{MODULES[api]}.v{served(api, self.flow)}.request")

    async def call(self, api: str, request: Any) -> Any:
        version = served(api, self.flow)
        out = io.BytesIO()
        entity_writer(type(request))(out, request)
        decoded, _ = entity_reader(type(request))(out.getvalue(), 0)
        header = RequestHeader(KEYS[api], version, 1, "client")
        reply = await HANDLERS[api](self.context, header, decoded)
        response, used = entity_reader(load_response_schema(KEYS[api], version))(b"".join(reply.parts), 0)
        assert used == sum(len(p) for p in reply.parts)
        return response


async def member_life(wire: Wire, group: str) -> None:
    h = wire.harness
    m = wire.module
    found = await wire.call("FindCoordinator", build(m("FindCoordinator").FindCoordinatorRequest, key=group,
                                                     key_type=0))
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, 1, 9001)

    def join_request(member_id: str) -> Any:
        mod = m("JoinGroup")
        return build(mod.JoinGroupRequest, group_id=group, session_timeout=millis(10_000),
                     rebalance_timeout=millis(60_000), member_id=member_id, group_instance_id=None,
                     protocol_type="consumer", protocols=(build(mod.JoinGroupRequestProtocol, name="range",
                                                                metadata=b"subscription"),))

    member_id = ""
    if served("JoinGroup", wire.flow) >= 4:
        required = await wire.call("JoinGroup", join_request(""))
        assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
        member_id = required.member_id
    joining = asyncio.ensure_future(wire.call("JoinGroup", join_request(member_id)))
    await h.advance(INITIAL_DELAY_MS)
    joined = joining.result()
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (ErrorCode.NONE, 1, "range")
    member_id = joined.member_id
    assert joined.leader == member_id and [x.metadata for x in joined.members] == [b"subscription"]

    mod = m("SyncGroup")
    synced = await wire.call("SyncGroup", build(
        mod.SyncGroupRequest, group_id=group, generation_id=1, member_id=member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=(build(mod.SyncGroupRequestAssignment, member_id=member_id, assignment=b"assignment"),)))
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"assignment")

    beat = await wire.call("Heartbeat", build(m("Heartbeat").HeartbeatRequest, group_id=group, generation_id=1,
                                              member_id=member_id, group_instance_id=None))
    assert beat.error_code == ErrorCode.NONE

    mod = m("OffsetCommit")
    committed = await wire.call("OffsetCommit", build(
        mod.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=1, member_id=member_id,
        group_instance_id=None, retention_time=millis(-1),
        topics=(build(mod.OffsetCommitRequestTopic, name=TOPIC_TP.topic, partitions=(
            build(mod.OffsetCommitRequestPartition, partition_index=0, committed_offset=5, committed_leader_epoch=2,
                  committed_metadata="meta"),
            build(mod.OffsetCommitRequestPartition, partition_index=9, committed_offset=1, committed_leader_epoch=-1,
                  committed_metadata=None))),)))
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, ErrorCode.NONE), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    mod = m("OffsetFetch")
    fetched = await wire.call("OffsetFetch", build(
        mod.OffsetFetchRequest, group_id=group, require_stable=False,
        topics=(build(mod.OffsetFetchRequestTopic, name=TOPIC_TP.topic, partition_indexes=(0, 1)),)))
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
        (0, 5, "meta"), (1, -1, "")]
    if served("OffsetFetch", wire.flow) >= 5:  # the epoch travels in OffsetCommit v6+, back in OffsetFetch v5+
        assert fetched.topics[0].partitions[0].committed_leader_epoch == (
            2 if served("OffsetCommit", wire.flow) >= 6 else -1)

    mod = m("OffsetDelete")
    partitions = tuple(build(mod.OffsetDeleteRequestPartition, partition_index=i) for i in (0, 9))
    deleted = await wire.call("OffsetDelete", build(mod.OffsetDeleteRequest, group_id=group, topics=(
        build(mod.OffsetDeleteRequestTopic, name=TOPIC_TP.topic, partitions=partitions),)))
    # The member's subscription is no ConsumerProtocol bytes: Kafka takes it as subscribed to every topic.
    assert deleted.error_code == ErrorCode.NONE and [(p.partition_index, p.error_code)
                                                     for p in deleted.topics[0].partitions] == [
        (0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    described = await wire.call("DescribeGroups", build(m("DescribeGroups").DescribeGroupsRequest, groups=(group,),
                                                        include_authorized_operations=False))
    [summary] = described.groups
    assert (summary.error_code, summary.group_state, summary.protocol_data) == (ErrorCode.NONE, "Stable", "range")
    assert [(x.member_id, x.client_id, x.client_host, x.member_assignment) for x in summary.members] == [
        (member_id, "client", "/127.0.0.1", b"assignment")]

    listed = await wire.call("ListGroups", build(m("ListGroups").ListGroupsRequest, states_filter=("Stable",)))
    assert (listed.error_code, [g.group_id for g in listed.groups]) == (ErrorCode.NONE, [group])

    mod = m("LeaveGroup")
    left = await wire.call("LeaveGroup", build(
        mod.LeaveGroupRequest, group_id=group, member_id=member_id,
        members=(build(mod.MemberIdentity, member_id=member_id, group_instance_id=None),)
        if hasattr(mod, "MemberIdentity") else ()))
    assert left.error_code == ErrorCode.NONE

    deleted = await wire.call("DeleteGroups", build(m("DeleteGroups").DeleteGroupsRequest,
                                                    groups_names=(group, group_here("never"))))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (group, ErrorCode.NONE), (group_here("never"), ErrorCode.GROUP_ID_NOT_FOUND)]


@pytest.mark.parametrize("flow", FLOWS)
def test_every_served_version_of_the_group_family(flow: int) -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        await member_life(Wire(h, flow), group_here(f"flow-{flow}"))

    asyncio.run(scenario())


@pytest.mark.parametrize("version", range(APIS[KEYS["OffsetFetch"]].min_version,
                                          APIS[KEYS["OffsetFetch"]].max_version + 1))
def test_offset_fetch_errors_where_each_version_has_them(version: int) -> None:
    async def scenario() -> None:
        wire = Wire(Harness(), version)  # leads no offsets partition: NOT_COORDINATOR
        mod = wire.module("OffsetFetch")
        fetched = await wire.call("OffsetFetch", build(
            mod.OffsetFetchRequest, group_id="g", require_stable=False,
            topics=(build(mod.OffsetFetchRequestTopic, name="orders", partition_indexes=(0,)),)))
        if version < 2:  # no group-level error before v2: the partitions carry it
            assert [p.error_code for p in fetched.topics[0].partitions] == [ErrorCode.NOT_COORDINATOR]
        else:
            assert (fetched.error_code, fetched.topics) == (ErrorCode.NOT_COORDINATOR, ())

    asyncio.run(scenario())


async def txn_offset_commit(wire: Wire, group: str) -> list[tuple[int, int]]:
    mod = wire.module("TxnOffsetCommit")
    committed = await wire.call("TxnOffsetCommit", build(
        mod.TxnOffsetCommitRequest, transactional_id="t", group_id=group, producer_id=4000, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=(build(mod.TxnOffsetCommitRequestTopic, name=TOPIC_TP.topic, partitions=(
            build(mod.TxnOffsetCommitRequestPartition, partition_index=0, committed_offset=5,
                  committed_leader_epoch=2, committed_metadata="meta"),
            build(mod.TxnOffsetCommitRequestPartition, partition_index=9, committed_offset=1,
                  committed_leader_epoch=-1, committed_metadata=None))),)))
    return [(p.partition_index, p.error_code) for p in committed.topics[0].partitions]


async def stable_offset(wire: Wire, group: str) -> tuple[int, int, int]:
    """(offset, leader epoch, error) of orders-0 from OffsetFetch v7 with require_stable."""
    wire = Wire(wire.harness, 7)
    mod = wire.module("OffsetFetch")
    fetched = await wire.call("OffsetFetch", build(
        mod.OffsetFetchRequest, group_id=group, require_stable=True,
        topics=(build(mod.OffsetFetchRequestTopic, name=TOPIC_TP.topic, partition_indexes=(0,)),)))
    [p] = fetched.topics[0].partitions
    return p.committed_offset, p.committed_leader_epoch, p.error_code


@pytest.mark.parametrize("version", range(APIS[KEYS["TxnOffsetCommit"]].min_version,
                                          APIS[KEYS["TxnOffsetCommit"]].max_version + 1))
def test_every_served_version_of_txn_offset_commit(version: int) -> None:
    """Pending until the marker (OffsetFetch v7 require_stable: UNSTABLE_OFFSET_COMMIT), then committed with the
    leader epoch v2+ carries."""
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        group = group_here(f"txn-{version}")
        wire = Wire(h, version)
        assert await txn_offset_commit(wire, group) == [(0, ErrorCode.NONE), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert await stable_offset(wire, group) == (-1, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        h.coordinator.handle_txn_completion(4000, [h.coordinator.partition_for(group)], True)
        assert await stable_offset(wire, group) == (5, 2 if version >= 2 else -1, ErrorCode.NONE)

    asyncio.run(scenario())


@pytest.mark.parametrize("version", range(APIS[KEYS["TxnOffsetCommit"]].min_version,
                                          APIS[KEYS["TxnOffsetCommit"]].max_version + 1))
def test_txn_offset_commit_v0_v1_hear_coordinator_not_available_for_a_load_in_progress(version: int) -> None:
    """Kafka's KafkaApis: clients before KAFKA-7296 (TxnOffsetCommit v0-v1) crash on COORDINATOR_LOAD_IN_PROGRESS."""
    async def scenario() -> None:
        h = Harness()
        group = group_here(f"loading-{version}")
        h.manager.begin_loading(h.coordinator.partition_for(group), 0)
        expected = ErrorCode.COORDINATOR_NOT_AVAILABLE if version < 2 else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await txn_offset_commit(Wire(h, version), group) == [(0, expected), (9, expected)]

    asyncio.run(scenario())
