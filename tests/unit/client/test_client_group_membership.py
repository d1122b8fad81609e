"""A member's side of the group protocol (Kafka's AbstractCoordinator response handlers), with no I/O."""

from __future__ import annotations

import pytest

from client.errors import CommitFailedError
from client.group_membership import NO_GENERATION, Generation, GroupMembership, JoinedMember, MemberState, Next
from proto.errors import ErrorCode, KafkaError

MEMBERS = [JoinedMember("m-1", None, b"sub1"), JoinedMember("m-2", None, b"sub2")]


def joined(member_id: str = "m-1", leader: str = "m-1", generation: int = 1) -> GroupMembership:
    m = GroupMembership("g")
    m.start_join()
    assert m.on_join_response(ErrorCode.NONE, generation_id=generation, protocol_name="range", leader=leader,
                              member_id=member_id, members=MEMBERS if leader == member_id else []) is Next.SYNC
    return m


def stable(member_id: str = "m-1", leader: str = "m-1") -> GroupMembership:
    m = joined(member_id, leader)
    assert m.on_sync_response(ErrorCode.NONE) is Next.STABLE
    return m


def test_kip_394_first_join_gets_a_member_id_and_joins_again_with_it() -> None:
    m = GroupMembership("g")
    assert m.start_join() == ""
    assert m.on_join_response(ErrorCode.MEMBER_ID_REQUIRED, generation_id=-1, protocol_name=None, leader="",
                              member_id="m-1", members=[]) is Next.JOIN
    assert m.start_join() == "m-1" and m.state is MemberState.PREPARING_REBALANCE


def test_the_leader_gets_the_members_and_syncs_then_is_stable() -> None:
    m = joined()
    assert m.state is MemberState.COMPLETING_REBALANCE and m.is_leader() and m.members == MEMBERS
    assert m.generation == Generation(1, "m-1", "range")
    assert m.on_sync_response(ErrorCode.NONE) is Next.STABLE
    assert m.state is MemberState.STABLE and not m.rejoin_needed and m.members == []


def test_a_follower_is_not_the_leader_and_gets_no_members() -> None:
    m = joined("m-2", leader="m-1")
    assert not m.is_leader() and m.members == []


@pytest.mark.parametrize(("code", "expected"), [
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Next.JOIN_AFTER_BACKOFF),
    (ErrorCode.REBALANCE_IN_PROGRESS, Next.JOIN_AFTER_BACKOFF),
    (ErrorCode.NOT_COORDINATOR, Next.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, Next.FIND_COORDINATOR),
])
def test_retriable_join_errors(code: ErrorCode, expected: Next) -> None:
    m = GroupMembership("g")
    m.start_join()
    assert m.on_join_response(code, generation_id=-1, protocol_name=None, leader="", member_id="",
                              members=[]) is expected
    assert m.state is MemberState.UNJOINED


def test_unknown_member_id_on_join_forgets_the_member_id() -> None:
    m = stable()
    m.request_rejoin("test")
    assert m.start_join() == "m-1"
    assert m.on_join_response(ErrorCode.UNKNOWN_MEMBER_ID, generation_id=-1, protocol_name=None, leader="",
                              member_id="", members=[]) is Next.JOIN
    assert m.start_join() == "" and m.generation is NO_GENERATION and m.generation_lost


@pytest.mark.parametrize("code", [ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.INVALID_SESSION_TIMEOUT,
                                  ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_MAX_SIZE_REACHED,
                                  ErrorCode.FENCED_INSTANCE_ID])
def test_fatal_join_errors_are_raised(code: ErrorCode) -> None:
    m = GroupMembership("g")
    m.start_join()
    with pytest.raises(KafkaError) as caught:
        m.on_join_response(code, generation_id=-1, protocol_name=None, leader="", member_id="", members=[])
    assert caught.value.code == code


def test_a_join_answer_after_leaving_is_stale() -> None:
    m = GroupMembership("g")
    m.start_join()
    m.leave()
    assert m.on_join_response(ErrorCode.NONE, generation_id=3, protocol_name="range", leader="x", member_id="x",
                              members=[]) is Next.JOIN
    assert m.generation is NO_GENERATION


def test_sync_rebalance_in_progress_rejoins_keeping_the_member_id() -> None:
    m = joined()
    assert m.on_sync_response(ErrorCode.REBALANCE_IN_PROGRESS) is Next.JOIN
    assert m.rejoin_needed and m.start_join() == "m-1"


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION])
def test_sync_with_a_lost_generation_joins_afresh(code: ErrorCode) -> None:
    m = joined()
    assert m.on_sync_response(code) is Next.JOIN
    assert m.generation is NO_GENERATION and m.member_id == ""


def test_sync_not_coordinator_finds_the_coordinator() -> None:
    m = joined()
    assert m.on_sync_response(ErrorCode.NOT_COORDINATOR) is Next.FIND_COORDINATOR and m.rejoin_needed


def test_heartbeat_rebalance_in_progress_asks_a_stable_member_to_rejoin() -> None:
    m = stable()
    assert m.on_heartbeat_response(ErrorCode.NONE) is None
    assert m.on_heartbeat_response(ErrorCode.REBALANCE_IN_PROGRESS) is Next.JOIN
    assert m.rejoin_needed and m.state is MemberState.STABLE  # it still owns its partitions until it rejoins
    assert m.generation.generation_id == 1 and not m.generation_lost


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION])
def test_heartbeat_says_the_member_was_dropped_its_partitions_are_lost(code: ErrorCode) -> None:
    m = stable()
    assert m.on_heartbeat_response(code) is Next.JOIN
    assert m.state is MemberState.UNJOINED and m.generation is NO_GENERATION and m.generation_lost


def test_heartbeat_not_coordinator_looks_for_it() -> None:
    assert stable().on_heartbeat_response(ErrorCode.NOT_COORDINATOR) is Next.FIND_COORDINATOR


def test_leave_gives_the_member_id_once() -> None:
    m = stable()
    assert m.leave() == "m-1"
    assert m.leave() is None and m.state is MemberState.UNJOINED and m.rejoin_needed


def test_commit_errors_of_a_past_generation_are_commit_failed_and_reset_it() -> None:
    m = stable()
    error = m.on_commit_error(ErrorCode.ILLEGAL_GENERATION)
    assert isinstance(error, CommitFailedError) and m.generation is NO_GENERATION
    m2 = stable()
    assert isinstance(m2.on_commit_error(ErrorCode.REBALANCE_IN_PROGRESS), CommitFailedError)
    assert m2.rejoin_needed and m2.generation.generation_id == 1
    assert m2.on_commit_error(ErrorCode.OFFSET_METADATA_TOO_LARGE).code == ErrorCode.OFFSET_METADATA_TOO_LARGE


def test_a_member_leaving_while_joining_leaves_with_the_id_it_was_given() -> None:
    m = GroupMembership("g")
    m.start_join()
    m.on_join_response(ErrorCode.MEMBER_ID_REQUIRED, generation_id=-1, protocol_name=None, leader="",
                       member_id="m-9", members=[])
    m.start_join()
    assert m.leave() == "m-9" and not m.generation_lost


def test_leaving_a_generation_loses_its_partitions() -> None:
    m = stable()
    assert m.leave() == "m-1" and m.generation_lost
