"""The group family's ACL checks, shared by both front doors (broker/api/group_operations.py): what reaches
the coordinator and what is refused, with Kafka's codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.api.group_operations import GroupOperations
from broker.coordinator.group.results import (
    DeleteOffsetsResult,
    GroupOverview,
    GroupSummary,
    ListGroupsResult,
    OffsetAndMetadata,
    OffsetFetchResult,
    PartitionOffset,
)
from common.security.acl import AccessControlEntry, AclOperation, PatternType, ResourcePattern, ResourceType
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.unit.broker.api.test_broker_authorization import ALICE, CLUSTER, allow, run, topic

Op = AclOperation
A0, B0 = TopicPartition("a", 0), TopicPartition("b", 0)


def group(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name, PatternType.LITERAL)


class Coordinator:
    """Records what reaches it; answers as a coordinator holding offsets of a-0 and b-0 in every group."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def heartbeat(self, group_id: str, *_: Any) -> ErrorCode:
        self.calls.append(("heartbeat", group_id))
        return ErrorCode.NONE

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                             offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        self.calls.append(("commit", sorted(offsets)))
        return dict.fromkeys(offsets, ErrorCode.NONE)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 instance_id: str | None, generation: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        self.calls.append(("txn_commit", sorted(offsets)))
        return dict.fromkeys(offsets, ErrorCode.NONE)

    async def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                            require_stable: bool = False) -> OffsetFetchResult:
        held = {A0: PartitionOffset(5), B0: PartitionOffset(7)}
        return OffsetFetchResult(ErrorCode.NONE, held if partitions is None else
                                 {tp: held.get(tp, PartitionOffset()) for tp in partitions})

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupSummary]:
        self.calls.append(("describe", list(group_ids)))
        return [GroupSummary(g, ErrorCode.NONE, "Stable") for g in group_ids]

    async def list_groups(self, states: set[str] | None = None) -> ListGroupsResult:
        return ListGroupsResult(ErrorCode.NONE, [GroupOverview(g, "consumer", "Stable") for g in ("g", "h")])

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        self.calls.append(("delete", list(group_ids)))
        return dict.fromkeys(group_ids, ErrorCode.NONE)

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> DeleteOffsetsResult:
        self.calls.append(("delete_offsets", list(partitions)))
        if group_id != "g":
            return DeleteOffsetsResult(ErrorCode.GROUP_ID_NOT_FOUND)
        return DeleteOffsetsResult(ErrorCode.NONE, dict.fromkeys(partitions, ErrorCode.NONE))


def groups_call(acls: dict[ResourcePattern, list[AccessControlEntry]] | None, name: str, *args: Any
                ) -> tuple[Any, list[tuple[str, Any]]]:
    coordinator = Coordinator()

    async def call(operations: Any, _: Any) -> Any:
        groups = GroupOperations(coordinator, operations)  # type: ignore[arg-type]
        return await getattr(groups, name)(ALICE, *args)

    answer, _ = run(acls, call)
    return answer, coordinator.calls


def commit(acls: dict[ResourcePattern, list[AccessControlEntry]] | None) -> tuple[Any, list[tuple[str, Any]]]:
    return groups_call(acls, "commit_offsets", "g", "m", None, 1, {A0: OffsetAndMetadata(1), B0: OffsetAndMetadata(2)})


def test_without_an_authorizer_everything_reaches_the_coordinator() -> None:
    assert commit(None) == ({A0: ErrorCode.NONE, B0: ErrorCode.NONE}, [("commit", [A0, B0])])
    assert groups_call(None, "heartbeat", "g", "m", None, 1) == (ErrorCode.NONE, [("heartbeat", "g")])


def test_a_member_needs_read_on_the_group() -> None:
    assert groups_call({group("g"): [allow(Op.DESCRIBE)]}, "heartbeat", "g", "m", None, 1) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    assert groups_call({group("g"): [allow(Op.READ)]}, "heartbeat", "g", "m", None, 1)[0] is ErrorCode.NONE


def test_a_commit_needs_read_on_the_group_and_commits_only_the_readable_topics() -> None:
    assert commit({topic("a"): [allow(Op.READ)]}) == (
        {A0: ErrorCode.GROUP_AUTHORIZATION_FAILED, B0: ErrorCode.GROUP_AUTHORIZATION_FAILED}, [])
    assert commit({group("g"): [allow(Op.READ)], topic("a"): [allow(Op.READ)], topic("b"): [allow(Op.WRITE)]}) == (
        {A0: ErrorCode.NONE, B0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}, [("commit", [A0])])


def transactional_id(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.TRANSACTIONAL_ID, name, PatternType.LITERAL)


def txn_commit(acls: dict[ResourcePattern, list[AccessControlEntry]] | None) -> tuple[Any, list[tuple[str, Any]]]:
    return groups_call(acls, "txn_commit_offsets", "t", "g", 4000, 0, "", None, -1,
                       {A0: OffsetAndMetadata(1), B0: OffsetAndMetadata(2)})


def test_a_txn_offset_commit_needs_write_on_the_transactional_id_read_on_the_group_and_the_topics() -> None:
    """KafkaApis.handleTxnOffsetCommitRequest's order: the TransactionalId, the group, then each topic."""
    group_and_topics = {group("g"): [allow(Op.READ)], topic("a"): [allow(Op.READ)], topic("b"): [allow(Op.WRITE)]}
    refused = dict.fromkeys([A0, B0], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert txn_commit(group_and_topics) == (refused, [])
    assert txn_commit({**group_and_topics, transactional_id("t"): [allow(Op.DESCRIBE)]}) == (refused, [])
    writer = {transactional_id("t"): [allow(Op.WRITE)]}
    assert txn_commit({**writer, topic("a"): [allow(Op.READ)]}) == (
        dict.fromkeys([A0, B0], ErrorCode.GROUP_AUTHORIZATION_FAILED), [])
    assert txn_commit({**writer, **group_and_topics}) == (
        {A0: ErrorCode.NONE, B0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}, [("txn_commit", [A0])])


def test_offset_fetch_hides_or_refuses_the_undescribable_topics() -> None:
    acls = {group("g"): [allow(Op.DESCRIBE)], topic("a"): [allow(Op.DESCRIBE)]}
    every, _ = groups_call(acls, "fetch_offsets", "g", None)
    assert every == OffsetFetchResult(ErrorCode.NONE, {A0: PartitionOffset(5)})
    named, _ = groups_call(acls, "fetch_offsets", "g", [A0, B0])
    assert named.offsets == {A0: PartitionOffset(5), B0: PartitionOffset(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    refused, _ = groups_call({topic("a"): [allow(Op.DESCRIBE)]}, "fetch_offsets", "g", None)
    assert refused == OffsetFetchResult(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def test_describe_list_and_delete_go_group_by_group() -> None:
    acls = {group("g"): [allow(Op.DESCRIBE), allow(Op.DELETE)]}
    described, calls = groups_call(acls, "describe_groups", ["g", "h"])
    assert [(s.group_id, s.error) for s in described] == [("g", ErrorCode.NONE),
                                                          ("h", ErrorCode.GROUP_AUTHORIZATION_FAILED)]
    assert calls == [("describe", ["g"])]
    listed, _ = groups_call(acls, "list_groups")
    assert [g.group_id for g in listed.groups] == ["g"]
    listed, _ = groups_call({CLUSTER: [allow(Op.DESCRIBE)]}, "list_groups")
    assert [g.group_id for g in listed.groups] == ["g", "h"]
    deleted, calls = groups_call(acls, "delete_groups", ["g", "h"])
    assert deleted == {"g": ErrorCode.NONE, "h": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert calls == [("delete", ["g"])]


def test_offset_delete_needs_delete_on_the_group_and_deletes_only_the_readable_topics() -> None:
    assert groups_call({group("g"): [allow(Op.READ)], topic("a"): [allow(Op.READ)]}, "delete_offsets", "g",
                       [A0, B0]) == (DeleteOffsetsResult(ErrorCode.GROUP_AUTHORIZATION_FAILED), [])
    acls = {group("g"): [allow(Op.DELETE)], group("h"): [allow(Op.DELETE)], topic("a"): [allow(Op.READ)],
            topic("b"): [allow(Op.DESCRIBE)]}
    assert groups_call(acls, "delete_offsets", "g", [A0, B0]) == (
        DeleteOffsetsResult(ErrorCode.NONE, {A0: ErrorCode.NONE, B0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}),
        [("delete_offsets", [A0])])
    # No readable topic still asks the coordinator, whose group error then stands alone.
    assert groups_call(acls, "delete_offsets", "h", [B0]) == (DeleteOffsetsResult(ErrorCode.GROUP_ID_NOT_FOUND),
                                                              [("delete_offsets", [])])
