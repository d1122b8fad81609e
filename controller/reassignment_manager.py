"""Partition reassignment through /admin/reassign_partitions (Kafka 2.4+'s KafkaController.onPartitionReassignment
with ZooKeeper-based requests; the rules are in controller/reassignment.py).

A request names each partition's target replicas (TRS). For each partition:

- U: the topic's znode gets RS = TRS + ORS with the adding (TRS - ORS) and
  removing (ORS - TRS) replicas, before the context: a controller that takes
  over finds the reassignment there and resumes it. Replicas a replaced
  reassignment no longer wants stop at once. The partition's state znode is
  watched from now on (Kafka's PartitionReassignmentIsrChangeHandler).
- A (some target replica is not in the ISR yet): the leader epoch is bumped and
  RS gets a LeaderAndIsr naming RS as the replicas, so the leader serves the new
  replicas' fetches; the new ones start as followers (NewReplica, is_new).
- B (every target replica is in the ISR): the new replicas go online, the
  leader moves onto TRS if it is not there or not alive (or keeps its place with
  a new leader epoch), the removed replicas leave the ISR and get StopReplica
  with delete, the topic's znode gets RS = TRS, the partition leaves the request
  znode (deleted when empty), and every broker gets the new metadata.

A target broker that is down holds the reassignment in A until it registers
again. The controller calls in on its event thread and sends the batch after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from controller.context import ControllerContext, PartitionAndReplica
from controller.election import leader_for_reassign, new_leader_and_isr
from controller.leader_and_isr_update import LeaderAndIsrStore, update_leader_and_isr
from controller.loggers import Logger
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment import (
    invalid_target_error,
    is_reassignment_complete,
    leader_must_move,
    reassignment_to_start,
    remaining_requests,
    unneeded_replicas,
)
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import PartitionState, ReplicaState
from controller.topic_deletion_manager import TopicDeletionManager
from proto.errors import ErrorCode, KafkaError
from proto.types import TopicPartition
from zk.client import ControllerMovedError, Watch
from zk.paths import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicAssignment


class ReassignmentStore(LeaderAndIsrStore, Protocol):
    """What reassignment needs from ZooKeeper (KafkaZkClient provides it)."""

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]: ...

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_zk_version: int
    ) -> None: ...

    def set_topic_assignment(self, assignment: TopicAssignment, expected_controller_epoch_zk_version: int) -> None: ...

    def watch_partition_state(self, tp: TopicPartition, callback: Callable[[], None]) -> Watch: ...


class PartitionReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ReassignmentStore,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        topic_deletion_manager: TopicDeletionManager,
        batch: ControllerBrokerRequestBatch,
        log: Logger,
        state_change_log: Logger,
        on_isr_change: Callable[[TopicPartition], None],
    ) -> None:
        self._context = context
        self._zk = zk
        self._partition_state_machine = partition_state_machine
        self._replica_state_machine = replica_state_machine
        self._topic_deletion_manager = topic_deletion_manager
        self._batch = batch
        self._log = log
        self._state_change_log = state_change_log
        # Queues the event that re-checks a reassigning partition (runs on ZooKeeper's callback thread).
        self._on_isr_change = on_isr_change
        self._isr_watches: dict[TopicPartition, Watch] = {}

    def reset(self) -> None:
        """Resignation: stop following ISRs (the context forgets the partitions itself)."""
        for watch in self._isr_watches.values():
            watch.cancel()
        self._isr_watches.clear()

    # --- triggers ---

    def initialize(self) -> None:
        """On takeover (Kafka's initializePartitionReassignments): resume what a previous controller left half-way,
        as the topics' znodes record it. New requests in /admin/reassign_partitions come with its watch's first
        event."""
        for tp in self._context.all_partitions():
            if self._context.partition_full_replica_assignment(tp).is_being_reassigned:
                self._context.partitions_being_reassigned.add(tp)
        self.resume_reassignments(lambda _tp, _assignment: True)

    def resume_for_brokers(self, broker_ids: Iterable[int]) -> None:
        """Brokers registered: reassignments waiting for them go on (Kafka's onBrokerStartup)."""
        brokers = set(broker_ids)
        self.resume_reassignments(lambda _tp, assignment: bool(brokers & set(assignment.target_replicas)))

    def resume_reassignments(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        for tp in sorted(self._context.partitions_being_reassigned):
            assignment = self._context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self._on_partition_reassignment(tp, assignment)

    def process_zk_partition_reassignment(self) -> None:
        """Kafka's processZkPartitionReassignment: start every request that is valid and not already running;
        refused ones leave the znode, with the reason in the log."""
        requested = self._zk.get_partition_reassignment()
        if not requested:
            return  # the watch also fires when the znode is deleted
        refused: dict[TopicPartition, KafkaError] = {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(requested.items()):
            error = invalid_target_error(target) or self._unknown_partition_error(tp)
            if error is not None:
                refused[tp] = error
                continue
            reassignment = reassignment_to_start(
                self._context.partition_full_replica_assignment(tp), tp in self._context.partitions_being_reassigned,
                target,
            )
            if reassignment is not None:
                to_start[tp] = reassignment
        for tp, reassignment in to_start.items():
            try:
                self._on_partition_reassignment(tp, reassignment)
            except ControllerMovedError:
                self._log.info("Failed completing reassignment of partition %s because controller has moved", tp)
                raise
            except Exception as e:
                self._log.exception("Error completing reassignment of partition %s", tp)
                refused[tp] = KafkaError(str(e), ErrorCode.UNKNOWN_SERVER_ERROR)
        if refused:
            self._log.warning(
                "Failed reassignment through zk with the following errors: %s",
                {str(tp): str(error) for tp, error in sorted(refused.items())},
            )
            self._remove_from_zk_reassignment({tp: requested[tp] for tp in refused})

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        """A reassigning partition's state changed (Kafka's processPartitionReassignmentIsrChange)."""
        if tp not in self._context.partitions_being_reassigned:
            return
        assignment = self._context.partition_full_replica_assignment(tp)
        if self._is_complete(tp, assignment):
            self._log.info(
                "Target replicas %s have all caught up with the leader for reassigning partition %s",
                list(assignment.target_replicas),
                tp,
            )
            self._on_partition_reassignment(tp, assignment)

    def _unknown_partition_error(self, tp: TopicPartition) -> KafkaError | None:
        if self._context.is_topic_queued_up_for_deletion(tp.topic):
            self._log.info("Skipping reassignment of %s since the topic is currently being deleted", tp)
        elif self._context.partition_replica_assignment(tp):
            return None
        return KafkaError("The partition does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    # --- Kafka's onPartitionReassignment ---

    def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        self._update_current_reassignment(tp, reassignment)
        if not self._is_complete(tp, reassignment):
            # A1: RS learns RS (the leader serves the new replicas' fetches); A2: the new ones start as followers.
            self._update_leader_epoch_and_send_request(tp, reassignment)
            self._replica_state_machine.handle_state_changes(
                [
                    PartitionAndReplica(tp, r)
                    for r in reassignment.adding_replicas
                    if self._context.replica_state(PartitionAndReplica(tp, r)) is ReplicaState.NonExistentReplica
                ],
                ReplicaState.NewReplica,
            )
            return
        # B1 .. B8
        self._replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas], ReplicaState.OnlineReplica
        )
        completed = ReplicaAssignment(reassignment.target_replicas)
        self._context.update_partition_full_replica_assignment(tp, completed)
        self._move_reassigned_partition_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, reassignment.removing_replicas)
        self._write_assignment(tp, completed)
        self._remove_partition_from_reassigning_partitions(tp, completed)
        self._batch.add_update_metadata_request_for_brokers(self._context.live_broker_ids, [tp])
        self._log.info("Completed reassignment of partition %s to replicas %s", tp, list(completed.replicas))
        # A deletion requested meanwhile waited for this.
        self._topic_deletion_manager.resume_deletion_for_topics({tp.topic})

    def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        current = self._context.partition_full_replica_assignment(tp)
        if current != reassignment:
            self._log.debug("Updating assignment of partition %s from %s to %s", tp, current, reassignment)
            # ZooKeeper first: it is the only place the original replicas are kept.
            self._write_assignment(tp, reassignment)
            self._context.update_partition_full_replica_assignment(tp, reassignment)
            unneeded = unneeded_replicas(current, reassignment)
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        if tp not in self._isr_watches:
            self._isr_watches[tp] = self._zk.watch_partition_state(tp, lambda: self._on_isr_change(tp))
        self._context.partitions_being_reassigned.add(tp)

    def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """Read from ZooKeeper, not the cache: the leader changes the ISR itself."""
        state = self._zk.get_partition_states([tp]).get(tp)
        if state is None:
            return False
        self._context.put_partition_leadership_info(tp, state)
        return is_reassignment_complete(assignment, state.isr)

    def _update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Same leader and ISR, next leader epoch: brokers accept only a newer epoch's LeaderAndIsr, and this one
        carries the new replica list."""

        def bump(_tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch:
            return new_leader_and_isr(current, current.leader, current.isr, self._context.epoch)

        updated = update_leader_and_isr(
            self._zk, self._context, [tp], bump, self._state_change_log, "update leader epoch"
        ).get(tp)
        if updated is None:
            self._state_change_log.error(
                "Failed to send LeaderAndIsr request with new replica assignment %s to leader for partition being "
                "reassigned %s",
                assignment,
                tp,
            )
            return
        self._batch.add_leader_and_isr_request_for_brokers(
            assignment.origin_replicas, tp, updated, assignment, is_new=False
        )
        self._batch.add_leader_and_isr_request_for_brokers(
            assignment.adding_replicas, tp, updated, assignment, is_new=True
        )
        self._state_change_log.info(
            "Sent LeaderAndIsr request (leader %d, leader epoch %d, ISR %s) with new replica assignment %s to "
            "leader %d for partition being reassigned %s",
            updated.leader,
            updated.leader_epoch,
            list(updated.isr),
            list(assignment.replicas),
            updated.leader,
            tp,
        )

    def _move_reassigned_partition_leader_if_required(self, tp: TopicPartition, completed: ReplicaAssignment) -> None:
        leader = self._context.partition_leadership_info[tp].leader
        alive = self._context.is_replica_online(leader, tp)
        if not leader_must_move(completed.replicas, leader, alive):
            self._log.info(
                "Leader %d for partition %s being reassigned, is already in the new list of replicas %s and is alive",
                leader,
                tp,
                ",".join(map(str, completed.replicas)),
            )
            self._update_leader_epoch_and_send_request(tp, completed)
            return
        self._log.info(
            "Leader %d for partition %s being reassigned, %s. Re-electing leader",
            leader,
            tp,
            f"is already in the new list of replicas {','.join(map(str, completed.replicas))} but is dead"
            if leader in completed.replicas
            else f"is not in the new list of replicas {','.join(map(str, completed.replicas))}",
        )
        self._partition_state_machine.handle_state_changes(
            [tp], PartitionState.OnlinePartition, lambda p, current: leader_for_reassign(self._context, p, current)
        )

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        """Out of the ISR first (so acks=all stops counting them), then StopReplica with delete. Like Kafka, the
        answer is not waited for: a broker that is down keeps its copy until an operator removes it."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        for target_state in (
            ReplicaState.OfflineReplica,
            ReplicaState.ReplicaDeletionStarted,
            ReplicaState.ReplicaDeletionSuccessful,
            ReplicaState.NonExistentReplica,
        ):
            self._replica_state_machine.handle_state_changes(replicas, target_state)

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        partitions = dict(self._context.partition_assignments.get(tp.topic, {}))
        partitions[tp.partition] = assignment
        self._zk.set_topic_assignment(TopicAssignment(tp.topic, partitions), self._context.epoch_zk_version)
        self._log.info("Successfully updated assignment of partition %s to %s", tp, assignment)

    def _remove_partition_from_reassigning_partitions(self, tp: TopicPartition, completed: ReplicaAssignment) -> None:
        watch = self._isr_watches.pop(tp, None)
        if watch is not None:
            watch.cancel()
        self._remove_from_zk_reassignment({tp: completed.replicas})
        self._context.partitions_being_reassigned.discard(tp)

    def _remove_from_zk_reassignment(self, done: Mapping[TopicPartition, Sequence[int]]) -> None:
        requested = self._zk.get_partition_reassignment()
        if not requested:
            return
        remaining = remaining_requests(requested, done)
        if remaining == requested:
            return
        self._log.info(
            "Removing partitions %s from the list of reassigned partitions in zookeeper",
            sorted(str(tp) for tp in requested.keys() - remaining.keys()),
        )
        if not remaining:
            self._log.info("No more partitions need to be reassigned. Deleting zk path /admin/reassign_partitions")
        self._zk.set_partition_reassignment(remaining, self._context.epoch_zk_version)
