"""The gRPC door's group RPCs: bad requests get Kafka's error codes before the coordinator sees them, and the
member's client host is shown as Kafka shows it. (The coordinator itself:
tests/unit/broker/coordinator/group/test_group_coordinator.py; both doors against a real cluster:
tests/integration/groups/test_client_consumer_groups.py, test_kafka_groups.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.api.group_operations import GroupOperations
from broker.api.grpc_group_apis import GroupApis, client_host
from broker.config.metadata_cache import Node
from broker.coordinator.group.results import FindCoordinatorResult
from common.security.authorizer import Session
from common.security.principal import ANONYMOUS
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode


class Peer:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer


class Untouched:
    """A coordinator no call may reach: the door refuses the request itself."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the coordinator's {name} was called")


def door() -> GroupApis:
    apis = GroupApis()
    apis._groups = GroupOperations(Untouched(), None)  # type: ignore[arg-type]
    apis._session = lambda _: Session(ANONYMOUS, "")  # type: ignore[method-assign]
    apis._listener_name = "GRPC"
    return apis


@pytest.mark.parametrize(("peer", "host"), [("ipv4:127.0.0.1:51234", "/127.0.0.1"),
                                            ("ipv6:[::1]:51234", "/::1"), ("", "/")])
def test_the_client_host_is_kafkas_inet_address_text(peer: str, host: str) -> None:
    assert client_host(Peer(peer)) == host  # type: ignore[arg-type]


class Transactions:
    """The transaction side of FindCoordinator: the ids it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def find_coordinator(self, session: Session, key: str, listener_name: str) -> FindCoordinatorResult:
        self.asked.append((key, listener_name))
        return FindCoordinatorResult(ErrorCode.NONE, Node(2, "b2", 9092))


def test_a_transactional_id_goes_to_the_transaction_coordinator_and_an_unknown_key_type_is_invalid() -> None:
    """Key type 1 is the transaction coordinator's (broker/api/transaction_operations.py); Kafka's
    InvalidRequestException for a coordinator type it does not know."""
    apis = door()
    apis._transactions = transactions = Transactions()  # type: ignore[assignment]
    answer = asyncio.run(apis.FindCoordinator(pb.FindCoordinatorRequest(key="tx", key_type=1), None))  # type: ignore[arg-type]
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (ErrorCode.NONE, 2, "b2", 9092)
    assert transactions.asked == [("tx", "GRPC")]
    unknown = asyncio.run(door().FindCoordinator(pb.FindCoordinatorRequest(key="x", key_type=7), None))  # type: ignore[arg-type]
    assert (unknown.error_code, unknown.node_id) == (ErrorCode.INVALID_REQUEST, -1)


def test_a_leader_assigning_a_member_twice_is_invalid() -> None:
    request = pb.SyncGroupRequest(group_id="g", generation_id=1, member_id="a")
    request.assignments.add(member_id="a", assignment=b"1")
    request.assignments.add(member_id="a", assignment=b"2")
    assert asyncio.run(door().SyncGroup(request, None)).error_code == ErrorCode.INVALID_REQUEST  # type: ignore[arg-type]


def test_leaving_without_members_is_invalid() -> None:
    answer = asyncio.run(door().LeaveGroup(pb.LeaveGroupRequest(group_id="g"), None))  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.INVALID_REQUEST


def test_a_commit_naming_a_partition_twice_is_invalid_for_each() -> None:
    request = pb.OffsetCommitRequest(group_id="g", generation_id=-1)
    topic = request.topics.add(name="t")
    topic.partitions.add(partition_index=0, committed_offset=1)
    topic.partitions.add(partition_index=0, committed_offset=2)
    answer = asyncio.run(door().OffsetCommit(request, None))  # type: ignore[arg-type]
    assert [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        ("t", 0, ErrorCode.INVALID_REQUEST), ("t", 0, ErrorCode.INVALID_REQUEST)]
