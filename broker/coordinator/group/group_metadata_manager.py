"""GroupMetadataManager: the groups this broker coordinates and their home in __consumer_offsets (Kafka 2.x's
coordinator/group/GroupMetadataManager.scala).

- partitionFor: a group lives in partition abs(java String.hashCode(group_id)) % offsets.topic.num.partitions,
  and the leader of that partition is its coordinator.
- Storing: a group's metadata (after each rebalance) and each offset commit are records appended to that
  partition through the ReplicaManager with offsets.commit.required.acks (-1: all in-sync replicas) and
  offsets.commit.timeout.ms; the caller is answered only when the append is acknowledged, with Kafka's
  mapping of append errors to coordinator errors.
- Transactional offsets (KIP-98): a TxnOffsetCommit's records are one transactional batch of the producer's
  id and epoch (so the partition's producer state sees the transaction open), pending in the group per
  producer; when a COMMIT or ABORT marker of that producer is in the partition (handle_txn_completion, called
  by WriteTxnMarkers once the marker is acknowledged) they become committed offsets or are dropped.
- Loading (immigration): when this broker becomes the partition's leader, the partition's log is read from
  its start to its end and the last record per key wins; a null value (tombstone) removes an offset or a
  group. A transactional batch's offsets wait for their producer's marker in the same read (COMMIT applies
  them, ABORT drops them); those of transactions still open stay pending. Requests for its groups get
  COORDINATOR_LOAD_IN_PROGRESS meanwhile.
- Unloading (emigration): when it stops leading, the partition's groups are dropped here (their members
  find the new coordinator).
- Cleanup (cleanupGroupMetadata): offsets removed by expiration (offsets.retention.minutes, checked every
  offsets.retention.check.interval.ms), DeleteGroups or OffsetDelete, and groups left Empty without offsets,
  get tombstones.

Everything but the log reading runs on the broker's event loop; the group state needs no lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

from broker.coordinator.group import records
from broker.coordinator.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
)
from broker.coordinator.group.results import OffsetAndMetadata, PartitionOffset
from broker.replication.delayed_produce import ProducePartitionResponse
from common.java_hash import java_string_hash, kafka_abs
from common.record import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ControlRecordType,
    EndTxnMarker,
    ProducerRecord,
    build_batch,
    decode_records,
    iter_headers,
    read_end_txn_marker,
)
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition

logger = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

# Appends a batch to one partition with the configured acks; the partition's produce answer.
Append = Callable[[TopicPartition, bytes], Awaitable[ProducePartitionResponse]]


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


def _append_error_for_group(error: ErrorCode) -> ErrorCode:
    """Kafka's storeGroup mapping of an append's error to what JoinGroup / SyncGroup answer."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return error if error is ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR


def _append_error_for_offsets(error: ErrorCode) -> ErrorCode:
    """Kafka's storeOffsets mapping of an append's error to OffsetCommit's per-partition error."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


@dataclass(frozen=True, slots=True)
class OffsetsConfig:
    """The offsets.* and offset.* keys the manager reads (Kafka's OffsetConfig)."""

    num_partitions: int
    retention_ms: int
    metadata_max_bytes: int
    load_buffer_size: int


# An offset record as a load found it: where it is in the log, and its value (None: tombstone).
LoadedOffset = tuple[int, records.OffsetValue | None]


@dataclass(slots=True)
class LoadedPartition:
    """What reading one partition's log found: the last value per key (None: tombstone), and per producer id
    the offsets of its transaction still open at the end of the log."""

    offsets: dict[tuple[str, TopicPartition], LoadedOffset]
    groups: dict[str, records.GroupValue | None]
    pending: dict[int, dict[tuple[str, TopicPartition], LoadedOffset]] = field(default_factory=dict)


class GroupMetadataManager:
    def __init__(self, broker_id: int, config: OffsetsConfig, append: Append, time_ms: Callable[[], int],
                 read_log: Callable[[TopicPartition, int], LoadedPartition],
                 load_executor: Executor | None = None) -> None:
        self.broker_id = broker_id
        # Where a partition's log is read (the broker's disk threads; None: the loop's default executor).
        self._load_executor = load_executor
        self.config = config
        self._append = append
        self._time_ms = time_ms
        self._read_log = read_log
        self._groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        # Kafka's epochForPartitionId: a load or unload ordered by an older leader epoch is ignored.
        self._epoch_for_partition: dict[int, int] = {}
        # Kafka's openGroupsForProducer: the groups holding each producer id's pending transactional offsets,
        # so a marker finds them without a walk over every group.
        self._open_groups_for_producer: dict[int, set[str]] = {}
        # Markers acknowledged on a partition while it loads: (producer id, commit?), applied once it is loaded.
        self._completions_awaiting_load: dict[int, list[tuple[int, bool]]] = {}

    # ------------------------------------------------------------------ which groups are here

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Kafka's putIfNotExists: the group already there wins."""
        return self._groups.setdefault(group.group_id, group)

    def remove_group(self, group: GroupMetadata) -> None:
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    def current_groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    def metrics(self) -> dict[str, Callable[[], int]]:
        """Kafka's GroupMetadataManager gauges: groups (all and per state) and offsets held here."""
        def in_state(state: GroupState) -> Callable[[], int]:
            return lambda: sum(g.is_(state) for g in list(self._groups.values()))

        gauges: dict[str, Callable[[], int]] = {
            "NumGroups": lambda: len(self._groups),
            "NumOffsets": lambda: sum(len(g.offsets) for g in list(self._groups.values())),
        }
        for state in GroupState:
            gauges[f"NumGroups{state.value}"] = in_state(state)
        return gauges

    # ------------------------------------------------------------------ storing

    def _tp(self, group_id: str) -> TopicPartition:
        return TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

    async def _append_records(self, group_id: str, entries: Sequence[tuple[bytes, bytes | None]],
                              producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                              ) -> ProducePartitionResponse:
        """One batch of the records; a transactional one of `producer_id` (sequence 0, as Kafka's: the
        coordinator's appends skip the sequence checks) when it is given."""
        now = self._time_ms()
        transactional = producer_id != NO_PRODUCER_ID
        batch = build_batch([ProducerRecord(value, key, now) for key, value in entries], now_ms=now,
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=0 if transactional else -1, is_transactional=transactional)
        try:
            return await self._append(self._tp(group_id), batch)
        except KafkaError as e:
            return ProducePartitionResponse(e.code, error_message=str(e))

    @staticmethod
    def group_value(group: GroupMetadata, assignment: dict[str, bytes]) -> records.GroupValue:
        protocol = group.protocol_name
        return records.GroupValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=protocol,
            leader=group.leader_id, current_state_timestamp=group.current_state_timestamp,
            members=tuple(
                records.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout_ms, m.session_timeout_ms,
                                    m.metadata(protocol) if protocol is not None else b"",
                                    assignment.get(m.member_id, b""))
                for m in group.members.values()))

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        """Append the group's metadata (members, generation, the leader's assignment); the coordinator error."""
        value = records.group_metadata_value(self.group_value(group, assignment))
        response = await self._append_records(group.group_id, [(records.group_metadata_key(group.group_id), value)])
        if response.error is not ErrorCode.NONE:
            logger.warning("Failed to write the metadata of group %s generation %d: %s", group.group_id,
                           group.generation_id, response.error.name)
        return _append_error_for_group(response.error)

    async def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata],
                            producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                            ) -> dict[TopicPartition, ErrorCode]:
        """Append the commits with offset.metadata.max.bytes checked per partition; each partition's error.
        With a producer id (TxnOffsetCommit) they stay pending until the producer's marker."""
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, offset in offsets.items():
            if len(offset.metadata.encode("utf-8")) > self.config.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = offset
        if not valid:
            return errors
        entries = [(records.offset_commit_key(group.group_id, tp),
                    records.offset_commit_value(records.OffsetValue(o.offset, o.leader_epoch, o.metadata,
                                                                    o.commit_timestamp, o.expire_timestamp)))
                   for tp, o in valid.items()]
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            self._add_producer_group(producer_id, group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
        else:
            group.prepare_offset_commit(valid)
        if not group.has_received_consistent_offset_commits():
            logger.warning("group: %s with leader: %s has received offset commits from consumers as well as"
                           " transactional producers. Mixing both types of offset commits will generally result"
                           " in surprises and should be avoided.", group.group_id, group.leader_id)
        response = await self._append_records(group.group_id, entries, producer_id, producer_epoch)
        error = _append_error_for_offsets(response.error)
        if not group.is_(GroupState.DEAD):
            for i, (tp, offset) in enumerate(valid.items()):
                appended = CommitRecordMetadataAndOffset(response.base_offset + i, offset)
                if error is ErrorCode.NONE and transactional:
                    group.on_txn_offset_commit_append(producer_id, tp, appended)
                elif error is ErrorCode.NONE:
                    group.on_offset_commit_append(tp, appended)
                elif transactional:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                else:
                    group.fail_pending_offset_write(tp, offset)
            if transactional and not group.has_pending_offset_commits_from_producer(producer_id):
                self._remove_producer_group(producer_id, group.group_id)
        if error is not ErrorCode.NONE:
            logger.warning("Offset commit of group %s failed: %s (%s)", group.group_id, error.name,
                           response.error.name)
        errors.update(dict.fromkeys(valid, error))
        return errors

    def get_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None, require_stable: bool = False
                    ) -> dict[TopicPartition, PartitionOffset]:
        """The committed offsets; with `require_stable` (KIP-447) a partition with a pending commit (a
        transaction's, or one not yet acknowledged) is UNSTABLE_OFFSET_COMMIT instead."""
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {} if partitions is None else {tp: PartitionOffset() for tp in partitions}
        wanted = list(group.offsets) if partitions is None else partitions
        found = {}
        for tp in wanted:
            o = group.offset(tp)
            if require_stable and group.has_pending_offset_commits_for_topic_partition(tp):
                found[tp] = PartitionOffset(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            else:
                found[tp] = PartitionOffset() if o is None else PartitionOffset(o.offset, o.leader_epoch, o.metadata)
        return found

    # ------------------------------------------------------------------ transaction markers

    def _add_producer_group(self, producer_id: int, group_id: str) -> None:
        self._open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._open_groups_for_producer[producer_id]

    def handle_txn_completion(self, producer_id: int, completed_partitions: Iterable[int], is_commit: bool) -> None:
        """A COMMIT or ABORT marker of `producer_id` is in these __consumer_offsets partitions (acknowledged):
        complete the producer's pending offsets of the groups they hold (Kafka's handleTxnCompletion).

        A partition still loading may have been read before the marker landed: its completion waits for the
        load's end (Kafka's one group-metadata-manager thread runs loads and completions in turn). Its producer
        cannot have offsets of a later transaction there by then: those would need the partition loaded."""
        partitions = set(completed_partitions)
        for partition in partitions & self.loading_partitions:
            self._completions_awaiting_load.setdefault(partition, []).append((producer_id, is_commit))
        self._complete_txn(producer_id, partitions - self.loading_partitions, is_commit)

    def _complete_txn(self, producer_id: int, partitions: set[int], is_commit: bool) -> None:
        for group_id in [g for g in self._open_groups_for_producer.get(producer_id, ())
                         if self.partition_for(g) in partitions]:
            group = self._groups.get(group_id)
            if group is None:
                logger.info("Group %s has moved away from %d after transaction marker was written but before the"
                            " cache was updated. The cache on the new group owner will be updated instead.",
                            group_id, self.broker_id)
            elif not group.is_(GroupState.DEAD):
                try:
                    group.complete_pending_txn_offset_commit(producer_id, is_commit)
                except RuntimeError:
                    logger.exception("Completing the transactional offsets of group %s failed", group_id)
            self._remove_producer_group(producer_id, group_id)

    async def cleanup_group_metadata(self, group: GroupMetadata,
                                     selector: Callable[[GroupMetadata], list[TopicPartition]]
                                     ) -> tuple[list[TopicPartition], ErrorCode]:
        """Kafka's cleanupGroupMetadata, for offset expiration, DeleteGroups and OffsetDelete alike: remove the
        offsets `selector` picks; a group left Empty without offsets (or already Dead) becomes Dead and leaves
        this broker; tombstones for what went, appended with the configured acks. The offsets removed and the
        append's error."""
        removed = selector(group)
        if group.is_(GroupState.EMPTY) and not group.has_offsets():
            logger.info("Group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
            group.transition_to(GroupState.DEAD, self._time_ms())
        dead_here = group.is_(GroupState.DEAD) and self._groups.get(group.group_id) is group
        if dead_here:
            del self._groups[group.group_id]
        # As Kafka, no group tombstone in generation 0: such a group only stored offsets, never its metadata.
        return removed, await self._write_tombstones(group.group_id, removed, dead_here and group.generation_id > 0)

    async def _write_tombstones(self, group_id: str, offsets: Iterable[TopicPartition], group_too: bool) -> ErrorCode:
        """Null values for removed offsets (and the group's metadata)."""
        entries: list[tuple[bytes, bytes | None]] = [(records.offset_commit_key(group_id, tp), None) for tp in offsets]
        if group_too:
            entries.append((records.group_metadata_key(group_id), None))
        if not entries:
            return ErrorCode.NONE
        response = await self._append_records(group_id, entries)
        if response.error is not ErrorCode.NONE:
            logger.warning("Failed to write tombstones of group %s: %s", group_id, response.error.name)
        return response.error

    # ------------------------------------------------------------------ immigration and emigration

    def begin_loading(self, partition: int, leader_epoch: int) -> bool:
        """This broker leads the partition from `leader_epoch`: False if an unload of a newer epoch was seen."""
        if self._epoch_for_partition.get(partition, -1) > leader_epoch:
            return False
        self._epoch_for_partition[partition] = leader_epoch
        self.loading_partitions.add(partition)
        return True

    async def load_groups_and_offsets(self, partition: int, leader_epoch: int) -> list[GroupMetadata]:
        """Read the partition's log (in a worker thread) and install what it holds; the loaded groups."""
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        start = self._time_ms()
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._load_executor, self._read_log, tp, self.config.load_buffer_size)
        except Exception:
            logger.exception("Error loading offsets from %s", tp)
            self.loading_partitions.discard(partition)
            self._completions_awaiting_load.pop(partition, None)
            return []
        if partition not in self.loading_partitions or self._epoch_for_partition.get(partition) != leader_epoch:
            return []  # unloaded (or re-elected) while reading
        groups = self._install(loaded)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        for producer_id, is_commit in self._completions_awaiting_load.pop(partition, []):
            self._complete_txn(producer_id, {partition}, is_commit)
        logger.info("Finished loading offsets and group metadata from %s in %d milliseconds, of which %d"
                    " groups", tp, self._time_ms() - start, len(groups))
        return groups

    def _install(self, loaded: LoadedPartition) -> list[GroupMetadata]:
        by_group: dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]] = {}
        for (group_id, tp), (append_offset, value) in loaded.offsets.items():
            if value is not None:
                by_group.setdefault(group_id, {})[tp] = _commit_record(append_offset, value)
        pending_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]]] = {}
        for producer_id, producer_offsets in loaded.pending.items():
            for (group_id, tp), (append_offset, value) in producer_offsets.items():
                if value is not None:
                    pending_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = _commit_record(
                        append_offset, value)
        installed = []
        for group_id in set(by_group) | set(pending_by_group) | {g for g, v in loaded.groups.items() if v is not None}:
            group_value = loaded.groups.get(group_id)
            group = GroupMetadata(group_id) if group_value is None else _group_from_value(group_id, group_value)
            group.offsets = by_group.get(group_id, {})
            group.pending_transactional_offset_commits = pending_by_group.get(group_id, {})
            current = self.add_group(group)
            if current is not group:
                # A reload while the group is cached (this broker led the partition through an epoch bump): the
                # cached group is the live one. Kafka logs this at debug too.
                logger.debug("Attempt to load group %s from log with generation %d failed because there is already"
                             " a cached group with generation %d", group_id, group.generation_id,
                             current.generation_id)
                continue
            for producer_id in group.pending_transactional_offset_commits:
                self._add_producer_group(producer_id, group_id)
            installed.append(group)
        return installed

    def remove_groups_for_partition(self, partition: int, leader_epoch: int | None) -> list[GroupMetadata]:
        """Stop coordinating the partition's groups; the groups removed (the coordinator marks them Dead)."""
        if leader_epoch is not None:
            if self._epoch_for_partition.get(partition, -1) > leader_epoch:
                return []
            self._epoch_for_partition[partition] = leader_epoch
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self._completions_awaiting_load.pop(partition, None)
        removed = [g for g in self._groups.values() if self.partition_for(g.group_id) == partition]
        for group in removed:
            del self._groups[group.group_id]
            for producer_id in list(group.pending_transactional_offset_commits):
                self._remove_producer_group(producer_id, group.group_id)
        if removed:
            logger.info("Unloaded %d groups of %s-%d", len(removed), GROUP_METADATA_TOPIC_NAME, partition)
        return removed


def _commit_record(append_offset: int, value: records.OffsetValue) -> CommitRecordMetadataAndOffset:
    return CommitRecordMetadataAndOffset(append_offset, OffsetAndMetadata(
        value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp))


def _group_from_value(group_id: str, value: records.GroupValue) -> GroupMetadata:
    group = GroupMetadata(group_id, state=GroupState.STABLE if value.members else GroupState.EMPTY,
                          current_state_timestamp=value.current_state_timestamp,
                          protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                          generation_id=value.generation)
    for m in value.members:
        member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                m.session_timeout_ms, value.protocol_type,
                                [(value.protocol or "", m.subscription)], assignment=m.assignment)
        group.add(member)
    group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def read_partition_log(log_reader: Callable[[int, int], bytes], start: int, end: int,
                       buffer_size: int) -> LoadedPartition:
    """Every record of [start, end) of a __consumer_offsets log, the last value per key kept.

    `log_reader(offset, max_bytes)` returns whole batches from the one holding `offset` (at least one, whatever
    its size). A record no Kafka version wrote is skipped with an error logged. A transactional batch's offsets
    wait in `pending` for their producer's marker, as Kafka's doLoadGroupsAndOffsets: COMMIT applies each
    unless a newer record of its key was loaded, ABORT drops them; group records are never transactional.
    """
    loaded = LoadedPartition({}, {})
    offset = start
    while offset < end:
        next_offset = offset
        data = memoryview(log_reader(offset, buffer_size))
        for position, header in iter_headers(data):
            next_offset = header.next_offset
            if header.is_control:
                if header.last_offset >= offset:
                    _load_marker(loaded, header.producer_id, read_end_txn_marker(data, position, header))
                continue
            pending = loaded.pending.setdefault(header.producer_id, {}) if header.is_transactional else None
            for record in decode_records(data[position:position + header.size], header):
                if record.offset >= offset and record.key is not None:
                    _load_record(loaded, record.key, record.value, record.offset, pending)
        if next_offset <= offset:
            break  # nothing more readable (a concurrent truncation)
        offset = next_offset
    return loaded


def _load_marker(loaded: LoadedPartition, producer_id: int, marker: EndTxnMarker | None) -> None:
    if marker is None:
        return  # a control record of another kind: no transaction ends here
    pending = loaded.pending.pop(producer_id, {})
    if marker.control_type is not ControlRecordType.COMMIT:
        return
    for key, (append_offset, value) in pending.items():
        current = loaded.offsets.get(key)
        if current is None or current[1] is None or current[0] < append_offset:
            loaded.offsets[key] = (append_offset, value)


def _load_record(loaded: LoadedPartition, key_bytes: bytes, value: bytes | None, offset: int,
                 pending: dict[tuple[str, TopicPartition], LoadedOffset] | None) -> None:
    """One record; into `pending` (its producer's open transaction) when its batch is transactional."""
    try:
        key = records.read_key(key_bytes)
        if isinstance(key, records.OffsetKey):
            group_tp = (key.group_id, key.topic_partition)
            if pending is None:
                loaded.offsets[group_tp] = (offset, None if value is None else records.read_offset_value(value))
            elif value is None:
                pending.pop(group_tp, None)  # Kafka: a tombstone in a transaction only unstages the offset
            else:
                pending[group_tp] = (offset, records.read_offset_value(value))
        else:
            loaded.groups[key.group_id] = None if value is None else records.read_group_value(value)
    except records.RecordFormatError as e:
        logger.error("Skipping the record at offset %d of %s: %s", offset, GROUP_METADATA_TOPIC_NAME, e)
