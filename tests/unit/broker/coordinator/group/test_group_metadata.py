"""broker/coordinator/group/group_metadata.py: Kafka's group state machine (validPreviousStates), protocol
selection by vote, and which offsets expire."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from broker.coordinator.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    IllegalStateTransition,
    MemberMetadata,
    subscription_topics,
)
from broker.coordinator.group.results import OffsetAndMetadata
from proto.types import TopicPartition

E, PR, CR, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                   GroupState.STABLE, GroupState.DEAD)
ALLOWED = {(E, PR), (PR, CR), (PR, E), (CR, S), (CR, PR), (S, PR)} | {(s, D) for s in GroupState}


def member(member_id: str, *protocols: str) -> MemberMetadata:
    return MemberMetadata(member_id, None, "client", "host", 60_000, 10_000, "consumer",
                          [(p, p.encode()) for p in protocols])


@pytest.mark.parametrize("source", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_only_kafkas_transitions_are_allowed(source: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", state=source)
    if (source, target) in ALLOWED:
        group.transition_to(target, 5)
        assert (group.state, group.current_state_timestamp) == (target, 5)
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target, 5)
        assert group.state is source


def test_the_protocol_is_chosen_by_vote_among_the_common_ones() -> None:
    group = GroupMetadata("g")
    group.add(member("a", "roundrobin", "range", "sticky"))
    group.add(member("b", "range", "roundrobin"))
    group.add(member("c", "range", "roundrobin"))
    # Common: range, roundrobin. Votes: a -> roundrobin, b and c -> range.
    assert group.select_protocol() == "range"
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_the_next_generation_of_an_empty_group_is_empty() -> None:
    group = GroupMetadata("g", state=PR)
    group.init_next_generation(7)
    assert (group.state, group.generation_id, group.protocol_name) == (E, 1, None)
    group.add(member("a", "range"), callback=lambda result: None)
    group.transition_to(PR, 8)
    assert group.has_all_members_joined()
    group.init_next_generation(9)
    assert (group.state, group.generation_id, group.protocol_name, group.leader_id) == (CR, 2, "range", "a")


def test_removing_the_leader_hands_leadership_on() -> None:
    group = GroupMetadata("g")
    group.add(member("a", "range"))
    group.add(member("b", "range"))
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def committed(offset: int, commit_timestamp: int, expire: int = -1) -> CommitRecordMetadataAndOffset:
    return CommitRecordMetadataAndOffset(offset, OffsetAndMetadata(offset, -1, "", commit_timestamp, expire))


def test_offsets_expire_after_the_group_emptied_or_at_their_expire_timestamp() -> None:
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    group = GroupMetadata("g", protocol_type="consumer", current_state_timestamp=1000)
    group.offsets = {tp0: committed(1, 0), tp1: committed(2, 0, expire=5000)}
    # An Empty consumer group: retention counts from when it emptied (1000), not from the commits (0).
    assert group.remove_expired_offsets(now_ms=1500, retention_ms=1000) == []
    assert group.remove_expired_offsets(now_ms=2000, retention_ms=1000) == [tp0]
    assert group.remove_expired_offsets(now_ms=4999, retention_ms=10**9) == []
    assert group.remove_expired_offsets(now_ms=5000, retention_ms=10**9) == [tp1]


def test_offsets_of_a_group_with_members_and_no_known_subscriptions_do_not_expire() -> None:
    group = GroupMetadata("g", state=S, protocol_type="connect", current_state_timestamp=0)
    group.offsets = {TopicPartition("t", 0): committed(1, 0)}
    assert group.remove_expired_offsets(now_ms=10**12, retention_ms=1) == []


def test_a_later_record_wins_over_an_earlier_one() -> None:
    tp = TopicPartition("t", 0)
    group = GroupMetadata("g")
    # Two commits whose appends completed out of order: the record further in the log is the committed one.
    group.on_offset_commit_append(tp, CommitRecordMetadataAndOffset(10, OffsetAndMetadata(5)))
    group.on_offset_commit_append(tp, CommitRecordMetadataAndOffset(9, OffsetAndMetadata(4)))
    assert group.offset(tp) == OffsetAndMetadata(5)


def subscription(version: int, *topics: str) -> bytes:
    """A consumer's subscription as kafka-python encodes it (ConsumerProtocolSubscription)."""
    return bytes(ConsumerProtocolSubscription(version, list(topics), b"").encode())


@pytest.mark.parametrize("version", [0, 1, 3])
def test_subscription_topics_from_a_real_clients_subscription(version: int) -> None:
    assert subscription_topics(subscription(version, "orders", "events")) == ["orders", "events"]
    assert subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00") is None  # cut short


def test_a_consumer_group_with_members_expires_offsets_of_topics_nobody_subscribes_to() -> None:
    """KIP-496: a Stable consumer group keeps its subscribed topics' offsets; the others expire."""
    group = GroupMetadata("g", state=PR)
    group.add(MemberMetadata("a", None, "client", "host", 60_000, 10_000, "consumer",
                             [("range", subscription(0, "orders"))]), callback=lambda result: None)
    group.init_next_generation(0)
    assert group.subscribed_topics == {"orders"}
    kept, dropped = TopicPartition("orders", 0), TopicPartition("old-topic", 0)
    group.offsets = {kept: committed(1, 0), dropped: committed(2, 0)}
    assert group.remove_expired_offsets(now_ms=999, retention_ms=1000) == []
    assert group.remove_expired_offsets(now_ms=1000, retention_ms=1000) == [dropped]
    assert list(group.offsets) == [kept]
