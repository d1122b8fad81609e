"""TopicDeletionManager: deleting topics requested under /admin/delete_topics (Kafka's TopicDeletionManager.scala).

A topic queued for deletion gets no leader elections and its partitions go out
to brokers with leader LEADER_DURING_DELETE, so they forget it. Its partitions go
Offline -> NonExistent; every replica goes OfflineReplica -> ReplicaDeletionStarted,
which sends its broker StopReplica(delete_partitions). Each answer moves the
replica to ReplicaDeletionSuccessful or, on an error or when its broker is
down, ReplicaDeletionIneligible: the topic then waits, and its deletion resumes
when the broker returns. A topic with a partition being reassigned waits for the
reassignment to finish. Once every replica is deleted the topic's znodes go
(fenced) and the controller forgets it.

The controller calls in on its event thread and sends the batch afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from controller.context import ControllerContext, PartitionAndReplica
from controller.loggers import Logger
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import PartitionState, ReplicaState


class TopicZnodes(Protocol):
    """What deletion needs from ZooKeeper (KafkaZkClient provides it)."""

    def delete_topics(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None: ...


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: TopicZnodes,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        batch: ControllerBrokerRequestBatch,
        log: Logger,
        mute_partition_modifications: Callable[[Iterable[str]], None],
    ) -> None:
        self._context = context
        self._zk = zk
        self._partition_state_machine = partition_state_machine
        self._replica_state_machine = replica_state_machine
        self._batch = batch
        self._log = log
        # Kafka's mutePartitionModifications: a deleted topic's assignment watch would fire a no-op event.
        self._mute_partition_modifications = mute_partition_modifications

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        self._context.queue_topic_deletion(topics)
        self.resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        """Their replicas' brokers are back: retry."""
        queued = set(topics) & self._context.topics_to_be_deleted
        if queued:
            self._context.topics_ineligible_for_deletion -= queued
            self.resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        # Reassignment deletes replicas too, without waiting for the answer.
        replicas = [r for r in replicas if self._context.is_topic_queued_up_for_deletion(r.topic_partition.topic)]
        if not replicas:
            return
        self._log.info("Deletion successfully completed for replicas %s", ",".join(map(str, replicas)))
        self._replica_state_machine.handle_state_changes(replicas, ReplicaState.ReplicaDeletionSuccessful)
        self.resume_deletions({r.topic_partition.topic for r in replicas})

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """StopReplica failed, or the replica's broker went down: the topic waits."""
        replicas = [r for r in replicas if self._context.is_topic_queued_up_for_deletion(r.topic_partition.topic)]
        if not replicas:
            return
        self._log.info("Handling deletion failure for replicas %s", ",".join(map(str, replicas)))
        self._replica_state_machine.handle_state_changes(replicas, ReplicaState.ReplicaDeletionIneligible)
        topics = {r.topic_partition.topic for r in replicas}
        self._mark_topic_ineligible_for_deletion(topics)
        self.resume_deletions(topics)

    def resume_deletions(self, topics: Iterable[str] | None = None) -> None:
        """Kafka's resumeDeletions: finish the topics all of whose replicas are deleted, retry the others'
        ineligible replicas, start the eligible ones. Of `topics` only, when given: a replica's answer changes
        its own topic's deletion and no other's (Kafka looks at every queued topic after each answer, which
        with 10,000 topics queued is 10,000 looks per answer)."""
        queued = self._context.topics_to_be_deleted
        completed = []
        eligible = []
        for topic in sorted(queued if topics is None else queued.intersection(topics)):
            if self._is_topic_deletion_successful(topic):
                completed.append(topic)
                continue
            if topic in self._context.topics_with_deletion_started and self._context.replicas_for_topic_in_state(
                topic, ReplicaState.ReplicaDeletionIneligible
            ):
                self._retry_deletion_for_ineligible_replicas(topic)
            if self._is_topic_eligible_for_deletion(topic):
                self._log.info("Deletion of topic %s (re)started", topic)
                eligible.append(topic)
        if completed:
            self._complete_delete_topics(completed)
        if eligible:
            self._on_topic_deletion(eligible)

    def _is_topic_deletion_successful(self, topic: str) -> bool:
        replicas = self._context.replicas_for_partitions(self._context.partitions_for_topic(topic))
        return all(self._context.replica_state(r) is ReplicaState.ReplicaDeletionSuccessful for r in replicas)

    def _is_topic_eligible_for_deletion(self, topic: str) -> bool:
        in_progress = self._context.replicas_for_topic_in_state(topic, ReplicaState.ReplicaDeletionStarted)
        return (
            not in_progress
            and topic not in self._context.topics_ineligible_for_deletion
            and not self._context.is_topic_being_reassigned(topic)
        )

    def _mark_topic_ineligible_for_deletion(self, topics: set[str]) -> None:
        newly = (topics & self._context.topics_to_be_deleted) - self._context.topics_ineligible_for_deletion
        if newly:
            self._context.topics_ineligible_for_deletion |= newly
            self._log.info("Halted deletion of topics %s", ",".join(sorted(newly)))

    def _retry_deletion_for_ineligible_replicas(self, topic: str) -> None:
        failed = self._context.replicas_for_topic_in_state(topic, ReplicaState.ReplicaDeletionIneligible)
        self._log.info(
            "Retrying deletion of topic %s since replicas %s were not successfully deleted",
            topic,
            ",".join(map(str, failed)),
        )
        self._replica_state_machine.handle_state_changes(failed, ReplicaState.OfflineReplica)

    def _on_topic_deletion(self, topics: list[str]) -> None:
        self._log.info("Topic deletion callback for %s", ",".join(topics))
        unseen = [t for t in topics if t not in self._context.topics_with_deletion_started]
        if unseen:
            partitions = [tp for t in unseen for tp in self._context.partitions_for_topic(t)]
            self._partition_state_machine.handle_state_changes(partitions, PartitionState.OfflinePartition)
            self._partition_state_machine.handle_state_changes(partitions, PartitionState.NonExistentPartition)
            self._context.topics_with_deletion_started.update(unseen)
        # Brokers stop serving the topics now (LEADER_DURING_DELETE), before their logs go.
        self._batch.add_update_metadata_request_for_brokers(
            self._context.live_broker_ids, [tp for t in topics for tp in self._context.partitions_for_topic(t)]
        )
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: list[str]) -> None:
        """Kafka's onPartitionDeletion: the topics' replicas on dead brokers wait (ReplicaDeletionIneligible), the
        others not yet deleted stop (OfflineReplica) and are deleted (ReplicaDeletionStarted), each transition
        made once for all the topics: per topic, the ISR writes of OfflineReplica were a round of ZooKeeper
        reads and writes per topic and broker."""
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        ineligible = set()
        for topic in topics:
            replicas = self._context.replicas_for_partitions(self._context.partitions_for_topic(topic))
            topic_dead = [r for r in replicas if not self._context.is_replica_online(r.replica, r.topic_partition)]
            retry.extend(
                r for r in replicas
                if r not in topic_dead and self._context.replica_state(r) is not ReplicaState.ReplicaDeletionSuccessful
            )
            # Already ineligible (down when this controller took over) need no second transition.
            dead.extend(r for r in topic_dead
                        if self._context.replica_state(r) is not ReplicaState.ReplicaDeletionIneligible)
            if topic_dead:
                ineligible.add(topic)
        self._replica_state_machine.handle_state_changes(dead, ReplicaState.ReplicaDeletionIneligible)
        self._replica_state_machine.handle_state_changes(retry, ReplicaState.OfflineReplica)
        self._replica_state_machine.handle_state_changes(retry, ReplicaState.ReplicaDeletionStarted)
        if ineligible:
            self._mark_topic_ineligible_for_deletion(ineligible)

    def _complete_delete_topics(self, topics: list[str]) -> None:
        """Kafka's completeDeleteTopic, for all these topics at once: their znodes go in a few pipelined rounds
        (one topic at a time, each cost five round trips on the event thread). Their assignment watches go first,
        or deleting the znodes would queue an event per topic that finds nothing to do."""
        self._mute_partition_modifications(topics)
        replicas = [r for topic in topics
                    for r in self._context.replicas_for_topic_in_state(topic, ReplicaState.ReplicaDeletionSuccessful)]
        self._replica_state_machine.handle_state_changes(replicas, ReplicaState.NonExistentReplica)
        self._zk.delete_topics(topics, self._context.epoch_zk_version)
        for topic in topics:
            self._context.remove_topic(topic)
            self._log.info("Deletion of topic %s successfully completed", topic)
