"""broker/coordinator/group: the GroupCoordinator's rules (Kafka 2.x's GroupCoordinatorTest, in spirit) on a
hand-driven clock and timer, with __consumer_offsets as a log in memory, so a second coordinator can load
what the first one wrote (immigration)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from broker.config.metadata_cache import MetadataCache
from broker.coordinator.group import records
from broker.coordinator.group.delayed_heartbeat import DelayedHeartbeat
from broker.coordinator.group.delayed_join import DelayedJoin
from broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.group.group_metadata_manager import (
    GROUP_METADATA_TOPIC_NAME,
    GroupMetadataManager,
    LoadedPartition,
    OffsetsConfig,
    partition_for,
    read_partition_log,
)
from broker.coordinator.group.results import (
    DeleteOffsetsResult,
    JoinGroupResult,
    MemberIdentity,
    OffsetAndMetadata,
    SyncGroupResult,
)
from broker.purgatory.purgatory import DelayedOperationPurgatory
from broker.replication.delayed_produce import ProducePartitionResponse
from common.record import ControlRecordType, ProducerRecord, build_batch, build_end_txn_marker, iter_batches
from proto.errors import ErrorCode
from proto.types import TopicPartition
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import MockTimer, live_broker, metadata_state
from tests.unit.broker.coordinator.group.test_group_metadata import subscription

T = TypeVar("T")
NUM_PARTITIONS = 4
GROUP = "group"
PARTITION = partition_for(GROUP, NUM_PARTITIONS)
TOPIC_TP = TopicPartition("orders", 0)
SESSION_MS = 10_000
REBALANCE_MS = 60_000
INITIAL_DELAY_MS = 3_000
RETENTION_MS = 60_000
PROTOCOLS = [("range", b"range-metadata"), ("roundrobin", b"rr-metadata")]


class MemoryLog:
    """__consumer_offsets in memory: appended batches get offsets; a reader returns whole batches."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None

    async def append(self, tp: TopicPartition, batch: bytes) -> ProducePartitionResponse:
        assert tp.topic == GROUP_METADATA_TOPIC_NAME
        if self.fail_with is not None:
            return ProducePartitionResponse(self.fail_with)
        base = self.next_offset.get(tp.partition, 0)
        [appended] = iter_batches(batch)
        header = appended.header
        records = [ProducerRecord(r.value, r.key, r.timestamp) for r in appended.records]
        self.batches.setdefault(tp.partition, []).append(build_batch(
            records, base_offset=base, producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, is_transactional=header.is_transactional,
            is_control=header.is_control))
        self.next_offset[tp.partition] = base + len(records)
        return ProducePartitionResponse(ErrorCode.NONE, base)

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction coordinator's COMMIT or ABORT marker, as WriteTxnMarkers appends it."""
        base = self.next_offset.get(partition, 0)
        self.batches.setdefault(partition, []).append(build_end_txn_marker(
            producer_id, 0, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 0, 0, base_offset=base))
        self.next_offset[partition] = base + 1

    def records(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for data in self.batches.get(partition, []) for b in iter_batches(data)
                for r in b.records]

    def read_log(self, tp: TopicPartition, buffer_size: int) -> LoadedPartition:
        batches = self.batches.get(tp.partition, [])

        def reader(offset: int, max_bytes: int) -> bytes:
            return b"".join(data for data in batches
                            if next(iter_batches(data)).header.next_offset > offset)

        return read_partition_log(reader, 0, self.next_offset.get(tp.partition, 0), buffer_size)


class Harness:
    def __init__(self, log: MemoryLog | None = None, clock: FakeClock | None = None, max_size: int = 1000) -> None:
        self.clock = clock or FakeClock()
        self.timer = MockTimer(self.clock)
        self.log = log or MemoryLog()
        self.cache = cache = MetadataCache(1)
        cache.update_metadata(1, [(TOPIC_TP, metadata_state()), (TopicPartition("orders", 1), metadata_state()),
                                  (TopicPartition(GROUP_METADATA_TOPIC_NAME, PARTITION), metadata_state())],
                              [live_broker(1)])
        self.manager = GroupMetadataManager(
            1, OffsetsConfig(NUM_PARTITIONS, RETENTION_MS, metadata_max_bytes=10, load_buffer_size=1 << 20),
            self.log.append, self.clock, self.log.read_log)
        self.heartbeats: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory("Heartbeat",
                                                                                                  self.timer)
        self.joins: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory("Rebalance", self.timer)

        async def topic_exists() -> ErrorCode:
            return ErrorCode.NONE

        self.coordinator = GroupCoordinator(
            1, GroupConfig(min_session_timeout_ms=6_000, max_session_timeout_ms=300_000,
                           initial_rebalance_delay_ms=INITIAL_DELAY_MS, max_size=max_size),
            self.manager, self.heartbeats, self.joins, cache, topic_exists, self.clock)
        self.coordinator.startup()

    async def own_partition(self) -> None:
        self.coordinator.on_election(PARTITION, 0)
        while self.manager.is_loading():
            await asyncio.sleep(0.001)  # the load reads the log in a worker thread

    async def advance(self, ms: int) -> None:
        await settle()  # requests already sent reach the coordinator first
        self.timer.advance(ms)
        await settle()

    async def initial_delays(self, members: int) -> None:
        """What a new group of `members` members who all join at once waits: InitialDelayedJoin waits once
        more whenever a member arrived during its delay, so a second member means a second delay."""
        for _ in range(1 if members == 1 else 2):
            await self.advance(INITIAL_DELAY_MS)

    def join(self, member_id: str = "", instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, session_ms: int = SESSION_MS,
             v4: bool = False) -> asyncio.Task[JoinGroupResult]:
        return asyncio.ensure_future(self.coordinator.join_group(
            GROUP, member_id, instance, v4, "client", "/127.0.0.1", REBALANCE_MS, session_ms, "consumer",
            PROTOCOLS if protocols is None else protocols))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> asyncio.Task[SyncGroupResult]:
        return asyncio.ensure_future(self.coordinator.sync_group(GROUP, generation, member_id, instance, "consumer",
                                                                 None, assignments or {}))

    async def stable_group(self, members: int = 1) -> list[JoinGroupResult]:
        """`members` members joined and synced; their join answers, the leader's first."""
        joins = [self.join() for _ in range(members)]
        await self.initial_delays(members)
        results = [j.result() for j in joins]
        leader = next(r for r in results if r.leader_id == r.member_id)
        syncs = [self.sync(r.member_id, r.generation_id,
                           {m.member_id: m.member_id.encode() for m in leader.members} if r is leader else None)
                 for r in results]
        await settle()
        assert all(s.result().error is ErrorCode.NONE for s in syncs)
        return sorted(results, key=lambda r: r is not leader)


def group_here(prefix: str) -> str:
    """A group id of the partition the tests' coordinator leads."""
    return next(g for i in range(100) if partition_for(g := f"{prefix}-{i}", NUM_PARTITIONS) == PARTITION)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


def commit(h: Harness, member_id: str, generation: int, offset: int, metadata: str = "",
           tp: TopicPartition = TOPIC_TP) -> Awaitable[dict[TopicPartition, ErrorCode]]:
    return h.coordinator.commit_offsets(GROUP, member_id, None, generation,
                                        {tp: OffsetAndMetadata(offset, 3, metadata, h.clock.now)})


# ------------------------------------------------------------------ partitionFor


def test_partition_for_is_javas_string_hash_code_with_kafkas_abs() -> None:
    # The hash codes are Java 17's String.hashCode of each id (javac'd one-liner), the partition Kafka's
    # Utils.abs(hash) % 50.
    assert partition_for("test", 50) == 3556498 % 50 == 48
    assert partition_for("Aa", 50) == partition_for("BB", 50) == 2112 % 50  # a Java hash collision
    assert partition_for("console-consumer", 50) == 648006740 % 50 == 40  # hashCode -648006740
    assert partition_for("héllo", 50) == 103094734 % 50 == 34  # UTF-16 code units, as Java hashes
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0, not to a negative.
    assert partition_for("polygenelubricants", 50) == 0


# ------------------------------------------------------------------ membership


def test_one_member_joins_after_the_initial_delay_and_syncs() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        first = await h.join(v4=True)
        # KIP-394: JoinGroup v4+ first hands out the member id.
        assert first.error is ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
        joining = h.join(first.member_id, v4=True)
        await h.advance(INITIAL_DELAY_MS - 1)
        assert not joining.done()  # group.initial.rebalance.delay.ms: a new group waits for others
        await h.advance(1)
        joined = joining.result()
        assert (joined.error, joined.generation_id, joined.leader_id, joined.protocol_name) == (
            ErrorCode.NONE, 1, first.member_id, "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"range-metadata")]
        synced = await h.sync(first.member_id, 1, {first.member_id: b"assignment"})
        assert (synced.error, synced.assignment, synced.protocol_name) == (ErrorCode.NONE, b"assignment", "range")
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert (summary.state, summary.protocol, summary.members[0].assignment) == ("Stable", "range", b"assignment")
        gauges = {name: read() for name, read in h.manager.metrics().items()}
        assert (gauges["NumGroups"], gauges["NumGroupsStable"], gauges["NumGroupsEmpty"]) == (1, 1, 0)
        # The assignment is in __consumer_offsets before SyncGroup answers.
        assert [key for key, _ in h.log.records(PARTITION)] == [b"\x00\x02\x00\x05group"]

    run(scenario)


def test_two_members_share_a_generation_and_followers_wait_for_the_leader() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        a, b = h.join(), h.join()
        await h.advance(INITIAL_DELAY_MS)
        assert not a.done()  # a second member arrived during the initial delay: it waits once more
        await h.advance(INITIAL_DELAY_MS)
        ra, rb = a.result(), b.result()
        assert ra.generation_id == rb.generation_id == 1 and ra.leader_id == rb.leader_id == ra.member_id
        assert len(ra.members) == 2 and rb.members == []
        follower = h.sync(rb.member_id, 1)
        await settle()
        assert not follower.done()  # CompletingRebalance: waiting for the leader's assignment
        leader = await h.sync(ra.member_id, 1, {ra.member_id: b"A", rb.member_id: b"B"})
        await settle()
        assert (leader.assignment, follower.result().assignment) == (b"A", b"B")
        assert await h.coordinator.heartbeat(GROUP, rb.member_id, None, 1) is ErrorCode.NONE
        assert await h.coordinator.heartbeat(GROUP, rb.member_id, None, 0) is ErrorCode.ILLEGAL_GENERATION
        assert await h.coordinator.heartbeat(GROUP, "nobody", None, 1) is ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario)


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        leader, follower = await h.stable_group(2)
        for _ in range(2):  # heartbeats keep the leader in
            await h.advance(SESSION_MS // 2 - 1)
            assert await h.coordinator.heartbeat(GROUP, leader.member_id, None, 1) is ErrorCode.NONE
        await h.advance(3)  # the follower did not heartbeat for a session: gone, and a rebalance starts
        assert await h.coordinator.heartbeat(GROUP, leader.member_id, None, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        rejoin = await h.join(leader.member_id)
        assert (rejoin.generation_id, [m.member_id for m in rejoin.members]) == (2, [leader.member_id])
        assert await h.coordinator.heartbeat(GROUP, follower.member_id, None, 1) is ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario)


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        leader, follower = await h.stable_group(2)
        rejoin = h.join(leader.member_id, protocols=[("roundrobin", b"x")])  # new metadata: a rebalance
        await settle()
        assert await h.coordinator.heartbeat(GROUP, follower.member_id, None, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        for _ in range(REBALANCE_MS // (SESSION_MS - 1000)):  # the follower heartbeats but does not rejoin
            await h.advance(SESSION_MS - 1000)
            await h.coordinator.heartbeat(GROUP, follower.member_id, None, 1)
        await h.advance(SESSION_MS)
        result = rejoin.result()
        assert (result.generation_id, result.protocol_name, len(result.members)) == (2, "roundrobin", 1)

    run(scenario)


def test_leave_group_rebalances_and_the_last_member_leaves_the_group_empty() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        leader, follower = await h.stable_group(2)
        left = await h.coordinator.leave_group(GROUP, [MemberIdentity(follower.member_id), MemberIdentity("x")])
        assert left.members == [(MemberIdentity(follower.member_id), ErrorCode.NONE),
                                (MemberIdentity("x"), ErrorCode.UNKNOWN_MEMBER_ID)]
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert summary.state == "PreparingRebalance"
        rejoined = await h.join(leader.member_id)
        assert rejoined.generation_id == 2
        await h.coordinator.leave_group(GROUP, [MemberIdentity(leader.member_id)])
        await settle()
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert (summary.state, summary.members) == ("Empty", [])
        listed = await h.coordinator.list_groups({"Empty"})
        assert [(g.group_id, g.state) for g in listed.groups] == [(GROUP, "Empty")]

    run(scenario)


def test_join_is_refused_with_kafkas_errors() -> None:
    async def scenario() -> None:
        h = Harness(max_size=1)
        coordinator = h.coordinator
        assert (await h.join()).error is ErrorCode.NOT_COORDINATOR  # the partition is not led here
        await h.own_partition()
        assert (await h.join(session_ms=5_999)).error is ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await h.join(session_ms=300_001)).error is ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await h.join("unknown-id")).error is ErrorCode.UNKNOWN_MEMBER_ID
        assert (await coordinator.join_group("", "", None, True, "c", "h", 1, SESSION_MS, "consumer",
                                             PROTOCOLS)).error is ErrorCode.INVALID_GROUP_ID
        [member] = await h.stable_group(1)
        other = await coordinator.join_group(GROUP, "", None, False, "c", "h", 1, SESSION_MS, "consumer",
                                             [("sticky", b"")])
        assert other.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # no protocol in common
        assert (await h.join()).error is ErrorCode.GROUP_MAX_SIZE_REACHED  # group.max.size=1
        assert member.error is ErrorCode.NONE
        for protocol_type, protocols in (("", PROTOCOLS), ("consumer", [])):  # nothing to agree on
            refused = await coordinator.join_group(group_here("fresh"), "", None, False, "c", "h", 1, SESSION_MS,
                                                   protocol_type, protocols)
            assert refused.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    run(scenario)


def test_a_static_member_rejoining_takes_its_place_without_a_rebalance() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        dynamic = h.join()
        await settle()
        static = h.join(instance="instance-1", v4=True)  # a static member needs no MEMBER_ID_REQUIRED round
        await h.initial_delays(2)
        leader, first = dynamic.result(), static.result()
        assert leader.leader_id == leader.member_id and first.error is ErrorCode.NONE
        h.sync(first.member_id, 1, instance="instance-1")
        await h.sync(leader.member_id, 1, {leader.member_id: b"L", first.member_id: b"S"})
        # The static member restarts: no member id, the same instance id. Same generation, no rebalance.
        again = await h.join(instance="instance-1")
        assert (again.error, again.generation_id) == (ErrorCode.NONE, 1) and again.member_id != first.member_id
        assert (await h.sync(again.member_id, 1, instance="instance-1")).assignment == b"S"
        # The new id is in __consumer_offsets before the member is told it: a new coordinator knows it.
        stored = records.read_group_value(h.log.records(PARTITION)[-1][1] or b"")
        assert {m.member_id: m.assignment for m in stored.members} == {leader.member_id: b"L", again.member_id: b"S"}
        # Its old incarnation is fenced.
        assert await h.coordinator.heartbeat(GROUP, first.member_id, "instance-1", 1) is ErrorCode.FENCED_INSTANCE_ID
        assert await h.coordinator.heartbeat(GROUP, again.member_id, "instance-1", 1) is ErrorCode.NONE
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert summary.state == "Stable"
        assert sorted(m.member_id for m in summary.members) == sorted([leader.member_id, again.member_id])

    run(scenario)


# ------------------------------------------------------------------ offsets


def test_commits_need_the_current_generation_and_a_member() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        [member] = await h.stable_group(1)
        assert await commit(h, member.member_id, 1, 10, "ok") == {TOPIC_TP: ErrorCode.NONE}
        assert await commit(h, member.member_id, 0, 11) == {TOPIC_TP: ErrorCode.ILLEGAL_GENERATION}
        assert await commit(h, "stranger", 1, 11) == {TOPIC_TP: ErrorCode.UNKNOWN_MEMBER_ID}
        # A group with members takes no standalone commits.
        assert await commit(h, "", -1, 11) == {TOPIC_TP: ErrorCode.UNKNOWN_MEMBER_ID}
        assert await commit(h, member.member_id, 1, 11, "x" * 11) == {TOPIC_TP: ErrorCode.OFFSET_METADATA_TOO_LARGE}
        unknown = TopicPartition("nope", 0)
        assert await commit(h, member.member_id, 1, 11, tp=unknown) == {unknown: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = await h.coordinator.fetch_offsets(GROUP, [TOPIC_TP, TopicPartition("orders", 1)])
        assert fetched.error is ErrorCode.NONE
        assert [(o.offset, o.leader_epoch, o.metadata) for o in fetched.offsets.values()] == [(10, 3, "ok"),
                                                                                              (-1, -1, "")]

    run(scenario)


def test_a_standalone_commit_naming_a_member_id_is_stored_while_the_group_is_empty() -> None:
    """Kafka 2.8's GroupCoordinator.doCommitOffsets: generation -1 on an Empty group only stores offsets, whatever
    member id the commit carries (a new group is created Empty for it)."""
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await commit(h, "a-former-member", -1, 7) == {TOPIC_TP: ErrorCode.NONE}
        assert await commit(h, "another", -1, 8) == {TOPIC_TP: ErrorCode.NONE}, "the group exists now, still Empty"
        assert (await h.coordinator.fetch_offsets(GROUP, [TOPIC_TP])).offsets[TOPIC_TP].offset == 8

    run(scenario)


def test_a_failed_append_is_not_a_commit() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        h.log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        assert await commit(h, "", -1, 5) == {TOPIC_TP: ErrorCode.COORDINATOR_NOT_AVAILABLE}
        h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await commit(h, "", -1, 5) == {TOPIC_TP: ErrorCode.NOT_COORDINATOR}
        assert (await h.coordinator.fetch_offsets(GROUP, None)).offsets == {}

    run(scenario)


def test_a_new_leader_loads_groups_and_offsets_from_the_log() -> None:
    async def scenario() -> None:
        old = Harness()
        await old.own_partition()
        leader, follower = await old.stable_group(2)
        assert await commit(old, leader.member_id, 1, 42, "meta") == {TOPIC_TP: ErrorCode.NONE}
        old.coordinator.on_resignation(PARTITION, 1)  # emigration
        assert (await old.coordinator.fetch_offsets(GROUP, None)).error is ErrorCode.NOT_COORDINATOR
        new = Harness(old.log, old.clock)
        await new.own_partition()  # immigration
        fetched = await new.coordinator.fetch_offsets(GROUP, None)
        assert {tp: (o.offset, o.metadata) for tp, o in fetched.offsets.items()} == {TOPIC_TP: (42, "meta")}
        [summary] = await new.coordinator.describe_groups([GROUP])
        assert summary.state == "Stable" and {m.member_id: m.assignment for m in summary.members} == {
            leader.member_id: leader.member_id.encode(), follower.member_id: follower.member_id.encode()}
        # The members carry on with their generation at the new coordinator, with sessions from the load on.
        await new.advance(SESSION_MS // 2)
        assert await new.coordinator.heartbeat(GROUP, follower.member_id, None, 1) is ErrorCode.NONE
        await new.advance(SESSION_MS // 2)  # the leader did not heartbeat since the load: gone
        assert await new.coordinator.heartbeat(GROUP, follower.member_id, None, 1) is ErrorCode.REBALANCE_IN_PROGRESS

    run(scenario)


def test_emigration_answers_waiting_joins_with_not_coordinator() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        waiting = h.join()
        await settle()
        h.coordinator.on_resignation(PARTITION, 1)
        await settle()
        assert waiting.result().error is ErrorCode.NOT_COORDINATOR

    run(scenario)


def test_standalone_commits_expire_after_the_retention_and_leave_tombstones() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        assert await commit(h, "", -1, 7) == {TOPIC_TP: ErrorCode.NONE}
        h.clock.advance(RETENTION_MS - 1)
        assert await h.coordinator.cleanup_group_metadata() == 0
        h.clock.advance(1)
        assert await h.coordinator.cleanup_group_metadata() == 1
        assert (await h.coordinator.fetch_offsets(GROUP, [TOPIC_TP])).offsets[TOPIC_TP].offset == -1
        # The offset's tombstone, and none for the group: in generation 0 it never stored its metadata (Kafka's rule).
        offset_key = b"\x00\x01\x00\x05group\x00\x06orders\x00\x00\x00\x00"
        assert [(key, value is None) for key, value in h.log.records(PARTITION)] == [(offset_key, False),
                                                                                  (offset_key, True)]
        reloaded = Harness(h.log, h.clock)
        await reloaded.own_partition()
        assert (await reloaded.coordinator.list_groups()).groups == []

    run(scenario)


def test_delete_groups_only_deletes_empty_groups() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        [member] = await h.stable_group(1)
        await commit(h, member.member_id, 1, 3)
        missing = group_here("missing")
        elsewhere = next(g for i in range(100) if partition_for(g := f"other-{i}", NUM_PARTITIONS) != PARTITION)
        assert await h.coordinator.delete_groups([GROUP, missing, elsewhere]) == {
            GROUP: ErrorCode.NON_EMPTY_GROUP, missing: ErrorCode.GROUP_ID_NOT_FOUND,
            elsewhere: ErrorCode.NOT_COORDINATOR}
        await h.coordinator.leave_group(GROUP, [MemberIdentity(member.member_id)])
        await h.advance(REBALANCE_MS)
        assert await h.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
        assert await h.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.GROUP_ID_NOT_FOUND}
        reloaded = Harness(h.log, h.clock)
        await reloaded.own_partition()
        assert (await reloaded.coordinator.fetch_offsets(GROUP, None)).offsets == {}

    run(scenario)


@pytest.mark.parametrize("loading_answer", ["join", "heartbeat", "sync"])
def test_while_loading_requests_get_kafkas_answers(loading_answer: str) -> None:
    async def scenario() -> None:
        h = Harness()
        h.manager.begin_loading(PARTITION, 0)
        coordinator = h.coordinator
        if loading_answer == "join":
            assert (await h.join()).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        elif loading_answer == "heartbeat":
            assert await coordinator.heartbeat(GROUP, "m", None, 1) is ErrorCode.NONE  # Kafka answers blindly
        else:
            assert (await h.sync("m", 1)).error is ErrorCode.REBALANCE_IN_PROGRESS

    run(scenario)


# ------------------------------------------------------------------ OffsetDelete (KIP-496)

EVENTS_TP = TopicPartition("events", 0)


def with_events_topic(h: Harness) -> None:
    h.cache.update_metadata(1, [(EVENTS_TP, metadata_state())], [live_broker(1)])


def test_offset_delete_of_an_empty_group_deletes_what_is_named_then_the_group() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        other = TopicPartition("orders", 1)
        [member] = await h.stable_group(1)
        await commit(h, member.member_id, 1, 7)
        await commit(h, member.member_id, 1, 8, tp=other)
        await h.coordinator.leave_group(GROUP, [MemberIdentity(member.member_id)])
        await h.advance(REBALANCE_MS)  # Empty, in generation 2
        assert await h.coordinator.delete_offsets(GROUP, [TOPIC_TP]) == DeleteOffsetsResult(
            ErrorCode.NONE, {TOPIC_TP: ErrorCode.NONE})
        fetched = (await h.coordinator.fetch_offsets(GROUP, [TOPIC_TP, other])).offsets
        assert (fetched[TOPIC_TP].offset, fetched[other].offset) == (-1, 8)
        assert h.log.records(PARTITION)[-1] == (records.offset_commit_key(GROUP, TOPIC_TP), None)
        # The last offsets go (a partition named twice is answered once): the group is Dead and gone.
        unknown = TopicPartition("nowhere", 0)
        assert await h.coordinator.delete_offsets(GROUP, [other, unknown, other]) == \
            DeleteOffsetsResult(ErrorCode.NONE, {other: ErrorCode.NONE, unknown: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
        assert h.log.records(PARTITION)[-2:] == [(records.offset_commit_key(GROUP, other), None),
                                                 (records.group_metadata_key(GROUP), None)]
        assert (await h.coordinator.list_groups()).groups == []
        assert await h.coordinator.delete_offsets(GROUP, [TOPIC_TP]) == DeleteOffsetsResult(
            ErrorCode.GROUP_ID_NOT_FOUND)
        reloaded = Harness(h.log, h.clock)
        await reloaded.own_partition()
        assert (await reloaded.coordinator.fetch_offsets(GROUP, None)).offsets == {}
        assert (await reloaded.coordinator.list_groups()).groups == []

    run(scenario)


@pytest.mark.parametrize("state", ["Stable", "PreparingRebalance"])
def test_offset_delete_of_a_live_consumer_group_spares_the_topics_its_members_subscribe_to(state: str) -> None:
    async def scenario() -> None:
        h = Harness()
        with_events_topic(h)
        await h.own_partition()
        joining = h.join(protocols=[("range", subscription(1, TOPIC_TP.topic))])
        await h.initial_delays(1)
        member = joining.result()
        assert (await h.sync(member.member_id, 1, {member.member_id: b""})).error is ErrorCode.NONE
        await commit(h, member.member_id, 1, 3)
        await commit(h, member.member_id, 1, 4, tp=EVENTS_TP)
        if state == "PreparingRebalance":
            h.join()  # a second member: the group rebalances, the first generation's subscriptions still count
            await settle()
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert summary.state == state
        assert await h.coordinator.delete_offsets(GROUP, [TOPIC_TP, EVENTS_TP]) == DeleteOffsetsResult(
            ErrorCode.NONE, {TOPIC_TP: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, EVENTS_TP: ErrorCode.NONE})
        fetched = (await h.coordinator.fetch_offsets(GROUP, [TOPIC_TP, EVENTS_TP])).offsets
        assert (fetched[TOPIC_TP].offset, fetched[EVENTS_TP].offset) == (3, -1)
        [summary] = await h.coordinator.describe_groups([GROUP])
        assert summary.state == state  # members keep the group alive, whatever offsets it has left

    run(scenario)


def test_offset_delete_takes_a_subscription_it_cannot_read_as_subscribed_to_every_topic() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        [member] = await h.stable_group(1)  # the harness' subscriptions are not ConsumerProtocol bytes
        await commit(h, member.member_id, 1, 3)
        assert await h.coordinator.delete_offsets(GROUP, [TOPIC_TP]) == DeleteOffsetsResult(
            ErrorCode.NONE, {TOPIC_TP: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})

    run(scenario)


def test_offset_delete_of_another_kind_of_group_with_members_is_non_empty_group() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.own_partition()
        joining = asyncio.ensure_future(h.coordinator.join_group(
            GROUP, "", None, False, "client", "/127.0.0.1", REBALANCE_MS, SESSION_MS, "connect", PROTOCOLS))
        await h.initial_delays(1)
        assert joining.result().error is ErrorCode.NONE
        assert await h.coordinator.delete_offsets(GROUP, [TOPIC_TP]) == DeleteOffsetsResult(ErrorCode.NON_EMPTY_GROUP)

    run(scenario)


def test_offset_delete_group_errors_come_before_any_partition() -> None:
    async def scenario() -> None:
        h = Harness()
        elsewhere = next(g for i in range(100) if partition_for(g := f"other-{i}", NUM_PARTITIONS) != PARTITION)
        h.manager.begin_loading(PARTITION, 0)
        nowhere = [TopicPartition("nowhere", 0)]
        assert await h.coordinator.delete_offsets(GROUP, nowhere) == DeleteOffsetsResult(
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        await h.own_partition()
        assert [(await h.coordinator.delete_offsets(g, nowhere)).error for g in ("", elsewhere, GROUP)] == [
            ErrorCode.INVALID_GROUP_ID, ErrorCode.NOT_COORDINATOR, ErrorCode.GROUP_ID_NOT_FOUND]
        h.coordinator.shutdown()
        assert (await h.coordinator.delete_offsets(GROUP, nowhere)).error is ErrorCode.COORDINATOR_NOT_AVAILABLE

    run(scenario)
