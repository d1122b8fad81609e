"""KafkaController: election, failover, resignation, and the events of an active controller (KafkaController.scala).

Every controller process runs for the ephemeral /controller znode; the winner
bumps /controller_epoch in the same multi-op and is the only one that acts. It
loads the cluster from ZooKeeper, tells every live broker what it needs
(UpdateMetadata to all, LeaderAndIsr to each partition's replicas), then
follows brokers, topics, ISR changes and topic deletions through its watches.
The others watch /controller and run again when it goes.

A broker whose registration disappears (or changes: it restarted) is a broker
failure: its replicas go offline, the partitions it led elect a new leader from
their live ISR, and it leaves every ISR it was in - so acks=all never counts a
dead replica. A broker that registers gets the metadata and its replicas'
states; partitions waiting offline for it come back. A broker whose log dir failed says so under
/log_dir_event_notification: the controller asks it about each replica it hosts (LeaderAndIsr), and those it
answers with KAFKA_STORAGE_ERROR are offline (Kafka's replicasOnOfflineDirs) until it registers again.

Planned operations: a broker about to stop asks for a controlled shutdown
(over the KafkaController gRPC service, controller/server.py); it stops being
elected, its leadership moves to another live ISR member and it leaves the
ISRs it follows, so clients meet a leader change instead of a dead leader.
Leadership moves back to the preferred replicas on request
(/admin/preferred_replica_election, `minibroker leader-election`) and, with
auto.leader.rebalance.enable, whenever a broker's leader imbalance passes
leader.imbalance.per.broker.percentage. Partitions move to other brokers on
request (/admin/reassign_partitions, `minibroker reassign-partitions`:
controller/reassignment_manager.py). Partitions an admin adds to a topic's
znode (CreatePartitions) are created as a new topic's are; an ElectLeaders
request (controller/server.py) elects preferred or, unclean, out-of-ISR leaders.

Every controller write to ZooKeeper is fenced by the controller epoch's znode
version. When one fails (ControllerMovedError) a newer controller exists: this
one resigns - stops acting, forgets its state, closes its broker connections -
and waits for its next chance. All of it runs on the event thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from common.config import UNCLEAN_LEADER_ELECTION_ENABLE, ConfigError, Type, parse_value
from common.event_ring import BROKER_FAILURE, BROKER_STARTUP, CONTROLLER_FAILOVER, EVENTS
from controller.channel_manager import ControllerChannelManager
from controller.config import ControllerConfig
from controller.context import ControllerContext, PartitionAndReplica
from controller.election import leader_for_controlled_shutdown, leader_for_offline, leader_for_preferred_replica
from controller.event_manager import ControllerEventManager
from controller.events import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControlledShutdownCallback,
    ControllerChange,
    ControllerEvent,
    ElectLeadersCallback,
    Expire,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
    PreferredReplicaLeaderElection,
    Reelect,
    ReplicaLeaderElection,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from controller.leader_imbalance import leader_imbalance, partitions_to_rebalance
from controller.loggers import controller_logger, state_change_logger
from controller.metrics import ControllerMetrics
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment_manager import PartitionReassignmentManager
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.states import PartitionState, ReplicaState
from controller.topic_deletion_manager import TopicDeletionManager
from controller.zk_watches import ControllerZkWatches
from proto import minibroker_pb2 as pb
from proto.errors import ErrorCode
from proto.types import TopicPartition
from zk.client import ControllerMovedError, KafkaZkClient
from zk.paths import BROKERS_ENTITY, DEFAULT_ENTITY_NAME, BrokerInfo


class KafkaController:
    def __init__(
        self,
        config: ControllerConfig,
        zk: KafkaZkClient,
        channel_manager: ControllerChannelManager | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.config = config
        # host:port of this process's KafkaController service, advertised in /controller when it wins.
        self.endpoint = endpoint
        self.controller_id = config.controller_id
        self.context = ControllerContext()
        # The controller /controller names, as last read; -1 when none.
        self.active_controller_id = -1
        self._zk = zk
        self._active = False
        self._log = controller_logger(__name__, self.controller_id)
        self._state_change_log = state_change_log = state_change_logger(self.controller_id, lambda: self.context.epoch)
        self._channel_manager = channel_manager or ControllerChannelManager(
            self.controller_id, config.cluster_credential_value, config.controller_socket_timeout_ms,
            config.inter_broker_listener, config.grpc_security,
        )
        self._event_manager = ControllerEventManager(self.process)
        self._batch = ControllerBrokerRequestBatch(
            self.controller_id,
            self.context,
            self._channel_manager.send_request,
            state_change_log,
            self._on_stop_replica_response,
            config.inter_broker_listener,
            self._on_leader_and_isr_response,
        )
        self._partition_state_machine = PartitionStateMachine(
            self.controller_id,
            self.context,
            zk,
            self._batch,
            state_change_log,
            unclean_leader_election_enabled=self._unclean_leader_election_enabled,
        )
        self._replica_state_machine = ReplicaStateMachine(
            self.controller_id, self.context, zk, self._batch, state_change_log
        )
        self._watches = ControllerZkWatches(zk, self._event_manager.put, self._event_manager.clear_and_put,
                                            self._event_manager.put_coalesced)
        self._topic_deletion_manager = TopicDeletionManager(
            self.context, zk, self._partition_state_machine, self._replica_state_machine, self._batch, self._log,
            self._watches.unregister_partition_modifications_handlers,
        )
        self._reassignment_manager = PartitionReassignmentManager(
            self.context,
            zk,
            self._partition_state_machine,
            self._replica_state_machine,
            self._topic_deletion_manager,
            self._batch,
            self._log,
            state_change_log,
            lambda tp: self._event_manager.put(PartitionReassignmentIsrChange(tp)),
        )
        # Kafka's auto-leader-rebalance-task, while active with auto.leader.rebalance.enable.
        self._auto_leader_rebalance_task: threading.Timer | None = None
        self.metrics = ControllerMetrics()

    @property
    def is_active(self) -> bool:
        return self._active

    def startup(self) -> None:
        self._event_manager.start()
        self._event_manager.put(Startup())

    def shutdown(self) -> None:
        """Stop processing and resign. Closing the ZooKeeper session afterwards (the caller's) deletes
        /controller at once, so a standby takes over without waiting for the session timeout."""
        self._event_manager.close()
        if self._active:
            self._on_controller_resignation()
        self._log.info("Shut down")

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, callback: ControlledShutdownCallback) -> None:
        """Queue a broker's ControlledShutdown; `callback` gets the answer on the event thread."""
        self._event_manager.put(ControlledShutdown(broker_id, broker_epoch, callback))

    def elect_leaders(self, partitions: tuple[TopicPartition, ...] | None, unclean: bool,
                      callback: ElectLeadersCallback) -> None:
        """Queue an ElectLeaders; `callback` gets the per-partition answer on the event thread."""
        self._event_manager.put(ReplicaLeaderElection(partitions, unclean, callback))

    # --- event processing ---

    def process(self, event: ControllerEvent) -> None:
        """Handle one event (on the event thread; tests call it directly)."""
        try:
            match event:
                case Startup():
                    self._process_startup()
                case ControllerChange():
                    self._maybe_resign()
                case Reelect():
                    self._maybe_resign()
                    self._elect()
                case Expire():
                    self._process_expire()
                case BrokerChange():
                    self._process_broker_change()
                case TopicChange():
                    self._process_topic_change()
                case PartitionModifications():
                    self._process_partition_modifications(event.topic)
                case IsrChangeNotification():
                    self._process_isr_change_notification()
                case LogDirEventNotification():
                    self._process_log_dir_event_notification()
                case LeaderAndIsrResponseReceived():
                    self._process_leader_and_isr_response_received(event)
                case TopicDeletion():
                    self._process_topic_deletion()
                case TopicDeletionStopReplicaResponseReceived():
                    self._process_topic_deletion_stop_replica_response_received(event)
                case ControlledShutdown():
                    self._process_controlled_shutdown(event)
                case PreferredReplicaLeaderElection():
                    self._process_preferred_replica_leader_election()
                case ReplicaLeaderElection():
                    self._process_replica_leader_election(event)
                case PartitionReassignment():
                    if self._active:
                        self._reassignment_manager.process_zk_partition_reassignment()
                case PartitionReassignmentIsrChange():
                    if self._active:
                        self._reassignment_manager.maybe_complete_reassignment(event.topic_partition)
                case AutoPreferredReplicaLeaderElection():
                    self._process_auto_preferred_replica_leader_election()
                case _:
                    raise TypeError(f"unknown controller event {event!r}")
        except ControllerMovedError:
            self._log.info("Controller moved to another controller when processing %s. Resigning", event)
            self._resign_after_controller_moved()
            self.metrics.update(self._active, self.context)
            return
        except Exception:
            self._log.exception("Error processing event %s", event)
        # What an event decided before failing was written to ZooKeeper: the brokers must still hear of it.
        if self._active:
            self._batch.send_requests_to_brokers()
        self.metrics.update(self._active, self.context)

    def _process_startup(self) -> None:
        self._watches.register_election_handlers()
        self._elect()

    # --- election and resignation ---

    def _elect(self) -> None:
        if self._active:
            return
        active = self._zk.get_controller_id()
        if active is not None:
            self._note_active_controller(active)
            return
        won = self._zk.try_create_controller(self.controller_id, self.endpoint)
        if won is None:
            self._note_active_controller(self._zk.get_controller_id())
            return
        self.context.epoch, self.context.epoch_zk_version = won
        self._active = True
        self.active_controller_id = self.controller_id
        self._log.info(
            "%d successfully elected as the controller. Epoch incremented to %d and epoch zk version is now %d",
            self.controller_id,
            self.context.epoch,
            self.context.epoch_zk_version,
        )
        try:
            self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            self._log.exception(
                "Error while electing or becoming controller on controller %d. Trigger controller movement immediately",
                self.controller_id,
            )
            self._trigger_controller_move()

    def _note_active_controller(self, controller_id: int | None) -> None:
        active = -1 if controller_id is None else controller_id
        if active not in (-1, self.active_controller_id) and not self._active:
            self._log.info(
                "Controller %d has been elected as the controller, so stopping the election process.", active
            )
        self.active_controller_id = active

    def _maybe_resign(self) -> None:
        controller_id = self._zk.get_controller_id()
        if self._active and controller_id != self.controller_id:
            self._on_controller_resignation()
        self._note_active_controller(controller_id)

    def _resign_after_controller_moved(self) -> None:
        """A fenced write failed: a newer epoch exists, so this controller is no longer active, whatever
        /controller says. If the seat is free, run again."""
        self._batch.clear()
        if self._active:
            self._on_controller_resignation()
        controller_id = self._zk.get_controller_id()
        if controller_id is None:
            # No watch will fire for a seat that is already free.
            self._event_manager.put(Reelect())
        elif controller_id == self.controller_id:
            self._log.warning(
                "The controller epoch moved past this controller's while /controller still names it: "
                "standing by until that znode goes"
            )
            self.active_controller_id = controller_id
        else:
            self._note_active_controller(controller_id)

    def _process_expire(self) -> None:
        self.active_controller_id = -1
        if self._active:
            self._on_controller_resignation()

    def _trigger_controller_move(self) -> None:
        """Give the seat up (a failover that failed half-way): a fresh election reloads everything."""
        epoch_zk_version = self.context.epoch_zk_version
        self._on_controller_resignation()
        self.active_controller_id = -1
        try:
            self._zk.delete_controller(epoch_zk_version)
        except ControllerMovedError:
            pass  # somebody else already holds the seat

    def _on_controller_failover(self) -> None:
        EVENTS.record(CONTROLLER_FAILOVER, f"controller {self.controller_id} won /controller in controller epoch"
                      f" {self.context.epoch}")
        self._log.info("Registering handlers")
        self._watches.register_active_handlers()
        # The whole state is read below: pending notifications would only repeat it.
        self._log.info("Deleting isr change notifications")
        self._zk.delete_isr_change_notifications(self._zk.get_isr_change_notifications(), self.context.epoch_zk_version)
        # The LeaderAndIsr every replica gets below makes brokers name their offline replicas again.
        self._log.info("Deleting log dir event notifications")
        self._zk.delete_log_dir_event_notifications(
            self._zk.get_all_log_dir_event_notifications(), self.context.epoch_zk_version)
        self._log.info("Initializing controller context")
        self._initialize_controller_context()
        # Brokers learn the live brokers before the LeaderAndIsr requests that name them.
        self._log.info("Sending update metadata request")
        self._send_update_metadata_request(self.context.live_broker_ids, ())
        self._replica_state_machine.startup()
        self._partition_state_machine.startup()
        # Reassignments a previous controller left half-way, before deletions that may wait for them.
        self._reassignment_manager.initialize()
        # Deletions a previous controller left unfinished (Kafka's tryTopicDeletion).
        self._topic_deletion_manager.resume_deletions()
        # Partitions none of whose replicas is live got no LeaderAndIsr, but brokers must still know them.
        self._batch.add_update_metadata_request_for_brokers(
            self.context.live_broker_ids, self.context.partitions_with_leaders()
        )
        self._batch.send_requests_to_brokers()
        if self.config.auto_leader_rebalance_enable:
            self._log.info("Starting the controller scheduler")
            self._schedule_auto_leader_rebalance_task()
        self._log.info("Ready to serve as the new controller with epoch %d", self.context.epoch)

    def _on_controller_resignation(self) -> None:
        self._log.info("Resigning")
        if self._auto_leader_rebalance_task is not None:
            self._auto_leader_rebalance_task.cancel()
            self._auto_leader_rebalance_task = None
        self._watches.unregister_active_handlers()
        self._reassignment_manager.reset()
        self._batch.clear()
        self._channel_manager.shutdown()
        self.context.reset()
        self._active = False
        self._log.info("Resigned")

    def _initialize_controller_context(self) -> None:
        brokers = self._zk.get_all_brokers()
        self.context.add_live_brokers(brokers)
        topics = self._zk.get_all_topics()
        self._watches.register_partition_modifications_handlers(topics)
        assignments = self._zk.get_topic_assignments(topics)
        self.context.set_all_topics(assignments)
        # Known before the state machines start, so that no leader is elected for a topic being deleted.
        self.context.queue_topic_deletion(self._zk.get_topic_deletions() & self.context.all_topics)
        for assignment in assignments.values():
            for partition, replicas in assignment.partitions.items():
                self.context.update_partition_full_replica_assignment(
                    TopicPartition(assignment.topic, partition), replicas
                )
        self._update_leader_and_isr_cache(self.context.all_partitions())
        for broker in brokers:
            self._channel_manager.add_broker(broker)
        self._log.info("Currently active brokers in the cluster: %s", sorted(self.context.live_broker_ids))
        self._log.info("Current list of topics in the cluster: %s", sorted(self.context.all_topics))

    def _update_leader_and_isr_cache(self, partitions: Iterable[TopicPartition]) -> None:
        for tp, state in self._zk.get_partition_states(partitions).items():
            self.context.put_partition_leadership_info(tp, state)

    def _send_update_metadata_request(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self._batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
        self._batch.send_requests_to_brokers()

    # --- brokers ---

    def _process_broker_change(self) -> None:
        if not self._active:
            return
        current = {b.id: b for b in self._zk.get_all_brokers()}
        known = dict(self.context.live_brokers)
        new_ids = sorted(current.keys() - known.keys())
        dead_ids = sorted(known.keys() - current.keys())
        # Same id, newer registration: the broker restarted between two looks at /brokers/ids.
        bounced_ids = sorted(i for i in current.keys() & known.keys() if current[i].epoch > known[i].epoch)
        self._log.info(
            "Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
            new_ids,
            dead_ids,
            bounced_ids,
            sorted(current),
        )
        for broker_id in dead_ids + bounced_ids:
            self._channel_manager.remove_broker(broker_id)
        # A broker's new incarnation loaded its log dirs afresh: its replicas are no longer known to be offline.
        for broker_id in new_ids + dead_ids + bounced_ids:
            self.context.replicas_on_offline_dirs.pop(broker_id, None)
        if new_ids:
            self._add_live_brokers([current[i] for i in new_ids])
            self._on_broker_startup(new_ids)
        if bounced_ids:
            # A restart the watch saw as one change: the old incarnation failed, the new one starts.
            self.context.remove_live_brokers(bounced_ids)
            self._on_broker_failure(bounced_ids)
            self._add_live_brokers([current[i] for i in bounced_ids])
            self._on_broker_startup(bounced_ids)
        if dead_ids:
            self.context.remove_live_brokers(dead_ids)
            self._on_broker_failure(dead_ids)

    def _add_live_brokers(self, brokers: list[BrokerInfo]) -> None:
        for broker in brokers:
            self._channel_manager.add_broker(broker)
        self.context.add_live_brokers(brokers)

    def _on_broker_startup(self, new_broker_ids: list[int]) -> None:
        self._log.info("New broker startup callback for %s", new_broker_ids)
        EVENTS.record(BROKER_STARTUP, f"brokers {sorted(new_broker_ids)} registered in /brokers/ids")
        # The others only need to know the new brokers; the new ones need everything.
        self._send_update_metadata_request(self.context.live_broker_ids - set(new_broker_ids), ())
        self._send_update_metadata_request(new_broker_ids, self.context.partitions_with_leaders())
        # What each new broker hosts, so it can become leader or follower of it.
        self._replica_state_machine.handle_state_changes(
            self.context.replicas_on_brokers(new_broker_ids), ReplicaState.OnlineReplica
        )
        self._partition_state_machine.trigger_online_partition_state_change()
        self._reassignment_manager.resume_for_brokers(new_broker_ids)
        # Deletions that waited for these brokers can go on.
        self._topic_deletion_manager.resume_deletion_for_topics(
            {r.topic_partition.topic for r in self.context.replicas_on_brokers(new_broker_ids)}
        )
        self._batch.send_requests_to_brokers()

    def _on_broker_failure(self, dead_broker_ids: list[int]) -> None:
        self._log.info("Broker failure callback for %s", dead_broker_ids)
        EVENTS.record(BROKER_FAILURE, f"brokers {sorted(dead_broker_ids)} left /brokers/ids (ZooKeeper session"
                      " expired or closed): their leaderships are elected again, they leave the ISRs")
        self._on_replicas_become_offline(self.context.replicas_on_brokers(dead_broker_ids))

    def _on_replicas_become_offline(self, new_offline_replicas: list[PartitionAndReplica]) -> None:
        """Kafka's onReplicasBecomeOffline: partitions that lost their leader go offline and elect a new one;
        the offline replicas leave their ISRs; deletions waiting on them halt."""
        for_deletion = [
            r for r in new_offline_replicas if self.context.is_topic_queued_up_for_deletion(r.topic_partition.topic)
        ]
        not_for_deletion = [r for r in new_offline_replicas if r not in for_deletion]
        partitions_without_leader = [
            tp
            for tp, state in sorted(self.context.partition_leadership_info.items())
            if not self.context.is_replica_online(state.leader, tp)
            and not self.context.is_topic_queued_up_for_deletion(tp.topic)
        ]
        self._partition_state_machine.handle_state_changes(partitions_without_leader, PartitionState.OfflinePartition)
        self._partition_state_machine.trigger_online_partition_state_change()
        self._replica_state_machine.handle_state_changes(not_for_deletion, ReplicaState.OfflineReplica)
        self._topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not partitions_without_leader:
            # No election carried the news: the live brokers still learn which replicas are offline.
            self._send_update_metadata_request(
                self.context.live_broker_ids, sorted({r.topic_partition for r in new_offline_replicas})
            )
        self._batch.send_requests_to_brokers()

    def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        """Answer the broker whatever happens: it waits for the answer before shutting down."""
        error: int = ErrorCode.UNKNOWN_SERVER_ERROR
        remaining: tuple[TopicPartition, ...] = ()
        try:
            error, remaining = self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        finally:
            event.callback(error, remaining)

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, tuple[TopicPartition, ...]]:
        """Kafka's doControlledShutdown: the broker stops being elected; the partitions it leads move to another
        live ISR member (its ISR without it), and it leaves the ISR of those it follows. Returns what it still
        leads (no other ISR member to take over): the broker asks again until that is empty.

        Kafka 2.x returns every replicated partition still led; here only those with another replica on a live
        broker that is not shutting down, the only ones a retry could move (it may rejoin the ISR meanwhile). The
        last broker of a cluster going down then stops at once instead of retrying in vain, as a KRaft
        controller lets a broker go when it has no leadership that can move."""
        if not self._active:
            return ErrorCode.NOT_CONTROLLER, ()
        self._log.info("Shutting down broker %d", broker_id)
        broker = self.context.live_brokers.get(broker_id)
        if broker is None:
            self._log.error("Broker id %d does not exist.", broker_id)
            return ErrorCode.BROKER_NOT_AVAILABLE, ()
        if broker_epoch < broker.epoch:
            # A request from a previous incarnation must not stop the one registered now.
            self._log.info(
                "Ignoring controlled shutdown request from broker %d with broker epoch %d, current broker epoch %d",
                broker_id,
                broker_epoch,
                broker.epoch,
            )
            return ErrorCode.STALE_BROKER_EPOCH, ()
        self.context.shutting_down_broker_ids.add(broker_id)
        self._log.debug("All shutting down brokers: %s", sorted(self.context.shutting_down_broker_ids))
        self._log.debug("Live brokers: %s", sorted(self.context.live_broker_ids))
        # A partition with one replica has nowhere to move: it goes offline with the broker.
        partitions_to_act_on = [
            tp
            for tp in sorted(set(self.context.partitions_on_brokers([broker_id])))
            if len(self.context.partition_replica_assignment(tp)) > 1
            and tp in self.context.partition_leadership_info
            and not self.context.is_topic_queued_up_for_deletion(tp.topic)
        ]
        # One pass: `tp not in led`, a list, was quadratic (0.44 s of CPU per request at 10,000 partitions).
        led: list[TopicPartition] = []
        followed: list[TopicPartition] = []
        for tp in partitions_to_act_on:
            (led if self.context.partition_leadership_info[tp].leader == broker_id else followed).append(tp)
        shutting_down = frozenset(self.context.shutting_down_broker_ids)
        self._partition_state_machine.handle_state_changes(
            led,
            PartitionState.OnlinePartition,
            lambda tp, current: leader_for_controlled_shutdown(self.context, tp, current, shutting_down),
        )
        self._replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, broker_id) for tp in followed], ReplicaState.OfflineReplica
        )
        self._batch.send_requests_to_brokers()
        remaining = tuple(
            tp
            for tp in partitions_to_act_on
            if self.context.partition_leadership_info[tp].leader == broker_id
            and any(self.context.is_replica_online(r, tp) for r in self.context.partition_replica_assignment(tp))
        )
        self._log.info("Controlled shutdown of broker %d: remaining partitions to move %s", broker_id,
                       [str(tp) for tp in remaining])
        return ErrorCode.NONE, remaining

    # --- preferred replica election ---

    def _process_preferred_replica_leader_election(self) -> None:
        """Kafka's processReplicaLeaderElection for /admin/preferred_replica_election. The znode is deleted when
        done, whatever happened: it also says an election is in progress, and would block the next request."""
        if not self._active:
            return
        partitions = self._zk.get_preferred_replica_election()
        if not partitions:
            return  # the watch also fires when the znode is deleted
        try:
            being_deleted = sorted(tp for tp in partitions if self.context.is_topic_queued_up_for_deletion(tp.topic))
            if being_deleted:
                self._log.error(
                    "Skipping replica leader election (PREFERRED) for partitions %s by zookeeper since the "
                    "respective topics are being deleted",
                    ",".join(map(str, being_deleted)),
                )
            unknown = sorted(tp for tp in partitions if tp not in self.context.partition_leadership_info)
            if unknown:
                self._log.warning(
                    "Skipping replica leader election (PREFERRED) for partitions %s: they do not exist",
                    ",".join(map(str, unknown)),
                )
            self._on_preferred_replica_election(sorted(partitions - set(being_deleted) - set(unknown)), "zookeeper")
        finally:
            self._zk.delete_preferred_replica_election(self.context.epoch_zk_version)

    def _process_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        """Answer the requester whatever happens (it waits)."""
        results: dict[TopicPartition, tuple[int, str]] = {
            tp: (ErrorCode.UNKNOWN_SERVER_ERROR, "") for tp in event.partitions or ()}
        try:
            results = self._replica_leader_election(event.partitions, event.unclean)
        finally:
            event.callback(results)

    def _replica_leader_election(self, requested: tuple[TopicPartition, ...] | None,
                                 unclean: bool) -> dict[TopicPartition, tuple[int, str]]:
        """Kafka's processReplicaLeaderElection for an admin client's ElectLeaders: unknown partitions and
        topics being deleted fail; a partition already led as the election type wants is ELECTION_NOT_NEEDED
        (PREFERRED: by its preferred replica; UNCLEAN: by a live broker); the others are elected, UNCLEAN
        taking a live replica outside the ISR when no ISR member is live, whatever
        unclean.leader.election.enable says."""
        if not self._active:
            return {tp: (ErrorCode.NOT_CONTROLLER, "") for tp in requested or ()}
        partitions = sorted(requested) if requested is not None else sorted(self.context.partition_leadership_info)
        results: dict[TopicPartition, tuple[int, str]] = {}
        electable = []
        for tp in partitions:
            leadership = self.context.partition_leadership_info.get(tp)
            if leadership is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif self.context.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            elif (self.context.is_replica_online(leadership.leader, tp) if unclean
                  else leadership.leader == self.context.partition_replica_assignment(tp)[0]):
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "")
            else:
                electable.append(tp)
        election_type = "UNCLEAN" if unclean else "PREFERRED"
        if electable:
            self._log.info("Starting replica leader election (%s) for partitions %s triggered by AdminClientTriggered",
                           election_type, ",".join(map(str, electable)))
            elected = self._partition_state_machine.handle_state_changes(
                electable,
                PartitionState.OnlinePartition,
                (lambda tp, current: leader_for_offline(self.context, tp, current, True)) if unclean
                else (lambda tp, current: leader_for_preferred_replica(self.context, tp, current)),
            )
            self._batch.send_requests_to_brokers()
            for tp in electable:
                if tp in elected:
                    results[tp] = (ErrorCode.NONE, "")
                else:
                    results[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean
                                   else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                   f"Failed to elect leader for partition {tp} under strategy"
                                   f" {'Offline' if unclean else 'PreferredReplica'}PartitionLeaderElectionStrategy")
        return results

    def _on_preferred_replica_election(self, partitions: list[TopicPartition], trigger: str) -> None:
        """Move each partition's leadership to its preferred replica (the first assigned) if it is live and in
        the ISR; those it already leads are left alone (Kafka's ElectionNotNeeded)."""
        already_elected = [
            tp
            for tp in partitions
            if self.context.partition_leadership_info[tp].leader == self.context.partition_replica_assignment(tp)[0]
        ]
        to_elect = [tp for tp in partitions if tp not in already_elected]
        if already_elected:
            self._log.info(
                "Valid replica already elected for partitions %s", ",".join(map(str, already_elected))
            )
        if not to_elect:
            return
        self._log.info(
            "Starting replica leader election (PREFERRED) for partitions %s triggered by %s",
            ",".join(map(str, to_elect)),
            trigger,
        )
        self._partition_state_machine.handle_state_changes(
            to_elect,
            PartitionState.OnlinePartition,
            lambda tp, current: leader_for_preferred_replica(self.context, tp, current),
        )
        self._batch.send_requests_to_brokers()

    def _schedule_auto_leader_rebalance_task(self) -> None:
        """Kafka's scheduleAutoLeaderRebalanceTask: the timer only queues the event; the check runs on the event
        thread and schedules the next one."""
        task = threading.Timer(
            self.config.leader_imbalance_check_interval_seconds,
            self._event_manager.put,
            (AutoPreferredReplicaLeaderElection(),),
        )
        task.name = "auto-leader-rebalance-task"
        task.daemon = True
        self._auto_leader_rebalance_task = task
        task.start()

    def _process_auto_preferred_replica_leader_election(self) -> None:
        if not self._active:
            return
        try:
            self._check_and_trigger_auto_leader_rebalance()
        finally:
            self._schedule_auto_leader_rebalance_task()

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        if self.context.partitions_being_reassigned:
            return  # as Kafka: a reassignment moves leaders itself
        self._log.debug("Checking need to trigger auto leader balancing")
        assignments = {
            tp: self.context.partition_replica_assignment(tp)
            for tp in self.context.all_partitions()
            if not self.context.is_topic_queued_up_for_deletion(tp.topic)
        }
        leaders = {tp: state.leader for tp, state in self.context.partition_leadership_info.items()}
        imbalance = leader_imbalance(assignments, leaders)
        for broker in imbalance.values():
            self._log.debug("Leader imbalance ratio for broker %d is %f", broker.preferred_broker, broker.ratio)
        partitions = partitions_to_rebalance(
            imbalance, self.config.leader_imbalance_per_broker_percentage, self.context.is_broker_online
        )
        if partitions:
            self._on_preferred_replica_election(partitions, "auto")

    def _unclean_leader_election_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable as Kafka's controller reads it at election time (so a change applies to
        the next election): the topic's override, else the cluster-wide dynamic broker default
        (/config/brokers/<default>, `configs --entity-type brokers --entity-default`), else the static config."""
        sources = (
            (f"topic {topic}", lambda: self._zk.get_topic_config(topic)),
            ("the default broker config", lambda: self._zk.get_entity_config(BROKERS_ENTITY, DEFAULT_ENTITY_NAME)),
        )
        for source, read in sources:
            text = read().get(UNCLEAN_LEADER_ELECTION_ENABLE)
            if text is None:
                continue
            try:
                return bool(parse_value(UNCLEAN_LEADER_ELECTION_ENABLE, Type.BOOLEAN, text.strip()))
            except ConfigError as e:
                self._log.warning("Ignoring the invalid %s of %s: %s", UNCLEAN_LEADER_ELECTION_ENABLE, source, e)
        return self.config.unclean_leader_election_enable

    # --- topics ---

    def _process_topic_change(self) -> None:
        if not self._active:
            return
        topics = self._zk.get_all_topics()
        new_topics = topics - self.context.all_topics
        deleted_topics = self.context.all_topics - topics
        self._watches.register_partition_modifications_handlers(new_topics)
        added = self._zk.get_topic_assignments(new_topics)
        for topic in deleted_topics:
            self.context.remove_topic(topic)
        # A topic deleted between the listing and the read has no assignment: no watch either.
        self._watches.unregister_partition_modifications_handlers(deleted_topics | (new_topics - added.keys()))
        self.context.set_all_topics(self.context.all_topics | added.keys())
        new_partitions = []
        for assignment in added.values():
            for partition, replicas in assignment.partitions.items():
                tp = TopicPartition(assignment.topic, partition)
                self.context.update_partition_full_replica_assignment(tp, replicas)
                new_partitions.append(tp)
        self._log.info(
            "New topics: %s, deleted topics: %s, new partition replica assignment %s",
            sorted(new_topics),
            sorted(deleted_topics),
            {str(tp): list(self.context.partition_replica_assignment(tp)) for tp in sorted(new_partitions)},
        )
        if new_partitions:
            self._on_new_partition_creation(sorted(new_partitions))

    def _process_partition_modifications(self, topic: str) -> None:
        """Kafka's processPartitionModifications: partitions an admin added to the topic's znode
        (CreatePartitions) are created as a new topic's are. A rewrite that adds none (a reassignment) is
        not this handler's business."""
        if not self._active or topic not in self.context.all_topics:
            return
        assignment = self._zk.get_topic_assignment(topic)
        if assignment is None:
            return  # deleted meanwhile: the topic change handles it
        to_add = {
            TopicPartition(topic, partition): replicas
            for partition, replicas in assignment.partitions.items()
            if not self.context.partition_replica_assignment(TopicPartition(topic, partition))
        }
        if not to_add:
            return
        if self.context.is_topic_queued_up_for_deletion(topic):
            self._log.info("Skipping adding partitions %s for topic %s since it is currently being deleted",
                           ",".join(str(tp.partition) for tp in sorted(to_add)), topic)
            return
        self._log.info("New partitions to be added %s",
                       {str(tp): list(replicas.replicas) for tp, replicas in sorted(to_add.items())})
        for tp, replicas in to_add.items():
            self.context.update_partition_full_replica_assignment(tp, replicas)
        self._on_new_partition_creation(sorted(to_add))

    def _on_new_partition_creation(self, new_partitions: list[TopicPartition]) -> None:
        self._log.info("New partition creation callback for %s", [str(tp) for tp in new_partitions])
        replicas = self.context.replicas_for_partitions(new_partitions)
        self._partition_state_machine.handle_state_changes(new_partitions, PartitionState.NewPartition)
        self._replica_state_machine.handle_state_changes(replicas, ReplicaState.NewReplica)
        self._partition_state_machine.handle_state_changes(new_partitions, PartitionState.OnlinePartition)
        self._replica_state_machine.handle_state_changes(replicas, ReplicaState.OnlineReplica)
        self._batch.send_requests_to_brokers()

    # --- topic deletion ---

    def _process_topic_deletion(self) -> None:
        if not self._active:
            return
        topics = self._zk.get_topic_deletions()
        non_existent = topics - self.context.all_topics
        if non_existent:
            self._log.warning("Ignoring request to delete non-existing topics %s", ",".join(sorted(non_existent)))
            self._zk.delete_topic_deletions(sorted(non_existent), self.context.epoch_zk_version)
        to_delete = topics - non_existent - self.context.topics_to_be_deleted
        if to_delete:
            self._log.info("Starting topic deletion for topics %s", ",".join(sorted(to_delete)))
            self._topic_deletion_manager.enqueue_topics_for_deletion(to_delete)

    def _on_stop_replica_response(self, broker_id: int, response: pb.StopReplicaResponse) -> None:
        """On the channel's thread: hand the answer to the event thread."""
        self._event_manager.put(
            TopicDeletionStopReplicaResponseReceived(
                broker_id,
                response.error_code,
                tuple(
                    (TopicPartition(e.topic_name, e.partition_index), e.error_code) for e in response.partition_errors
                ),
            )
        )

    def _process_topic_deletion_stop_replica_response_received(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self._active:
            return
        self._log.debug(
            "Delete topic callback invoked on StopReplica response received from broker %d", event.replica_id
        )
        failed = event.error != ErrorCode.NONE
        replicas_in_error = [
            PartitionAndReplica(tp, event.replica_id)
            for tp, error in event.partition_errors
            if failed or error != ErrorCode.NONE
        ]
        deleted = [
            PartitionAndReplica(tp, event.replica_id)
            for tp, error in event.partition_errors
            if not failed and error == ErrorCode.NONE
        ]
        if replicas_in_error:
            self._topic_deletion_manager.fail_replica_deletion(replicas_in_error)
        if deleted:
            self._topic_deletion_manager.complete_replica_deletion(deleted)

    # --- ISR changes ---

    def _process_isr_change_notification(self) -> None:
        if not self._active:
            return
        sequence_numbers = self._zk.get_isr_change_notifications()
        try:
            changed = self._zk.get_partitions_from_isr_change_notifications(sequence_numbers)
            # A notification can outlive its topic.
            partitions = sorted(tp for tp in changed if self.context.partition_replica_assignment(tp))
            if partitions:
                self._update_leader_and_isr_cache(partitions)
                self._send_update_metadata_request(self.context.live_broker_ids, partitions)
        finally:
            self._zk.delete_isr_change_notifications(sequence_numbers, self.context.epoch_zk_version)

    # --- log dir failures ---

    def _process_log_dir_event_notification(self) -> None:
        """Kafka's processLogDirEventNotification: ask every replica on the brokers named (a LeaderAndIsr to each,
        OnlineReplica): their answers say which replicas are on an offline dir (the LeaderAndIsr response)."""
        if not self._active:
            return
        sequence_numbers = self._zk.get_all_log_dir_event_notifications()
        try:
            broker_ids = sorted(set(self._zk.get_broker_ids_from_log_dir_events(sequence_numbers)))
            if broker_ids:
                self._log.info("Handling log directory failure for brokers %s", ",".join(map(str, broker_ids)))
                self._replica_state_machine.handle_state_changes(
                    self.context.replicas_on_brokers(broker_ids), ReplicaState.OnlineReplica)
        finally:
            self._zk.delete_log_dir_event_notifications(sequence_numbers, self.context.epoch_zk_version)

    def _on_leader_and_isr_response(self, broker_id: int, response: pb.LeaderAndIsrResponse) -> None:
        """On the channel's thread: hand the answer to the event thread."""
        self._event_manager.put(LeaderAndIsrResponseReceived(
            broker_id, response.error_code,
            tuple((TopicPartition(e.topic_name, e.partition_index), e.error_code) for e in response.partition_errors),
        ))

    def _process_leader_and_isr_response_received(self, event: LeaderAndIsrResponseReceived) -> None:
        """Kafka's processLeaderAndIsrResponseReceived: KAFKA_STORAGE_ERROR marks the broker's replica offline
        (elections skip it, it leaves the ISR, a partition it led elects another leader); NONE marks it online."""
        if not self._active:
            return
        if event.error != ErrorCode.NONE:
            self._state_change_log.error("Received error %s in LeaderAndIsr response from broker %d",
                                         ErrorCode(event.error).name, event.broker_id)
            return
        offline = {tp for tp, error in event.partition_errors if error == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, error in event.partition_errors if error == ErrorCode.NONE}
        previous = self.context.replicas_on_offline_dirs.get(event.broker_id, set())
        current = (previous - online) | offline
        self.context.replicas_on_offline_dirs[event.broker_id] = current
        newly_offline = sorted(current - previous)
        if newly_offline:
            self._state_change_log.info("Mark replicas %s on broker %d as offline",
                                        ",".join(map(str, newly_offline)), event.broker_id)
            self._on_replicas_become_offline([PartitionAndReplica(tp, event.broker_id) for tp in newly_offline])
