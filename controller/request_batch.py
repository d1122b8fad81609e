"""ControllerBrokerRequestBatch: the requests one controller event sends, one per broker and kind.

State machines add to the batch as they decide (a LeaderAndIsr entry only ever
after its state znode was written); the controller sends it when the event is
done, so a broker gets one LeaderAndIsr with all its partitions however many
partitions the event changed, one UpdateMetadata and a StopReplica (one
without, one with deletion). Building
is pure: the actual sending is the injected `send` (the channel manager's queue).
Partitions of a topic being deleted go out in UpdateMetadata with leader
LEADER_DURING_DELETE, Kafka's sign for brokers to forget them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from controller.context import ControllerContext
from controller.loggers import Logger
from proto import minibroker_pb2 as pb
from proto.types import SECURITY_PROTOCOL_IDS, TopicPartition
from zk.paths import LEADER_DURING_DELETE, LeaderIsrAndControllerEpoch, ReplicaAssignment

BrokerRequest = pb.LeaderAndIsrRequest | pb.UpdateMetadataRequest | pb.StopReplicaRequest
BrokerResponse = pb.LeaderAndIsrResponse | pb.UpdateMetadataResponse | pb.StopReplicaResponse
# Called with a broker's answer (on the channel's thread): LeaderAndIsr's and deleting StopReplica's have one.
ResponseCallback = Callable[[BrokerResponse], None]
SendRequest = Callable[[int, BrokerRequest, ResponseCallback | None], None]
# (broker id, its answer) to a StopReplica that deletes partitions.
StopReplicaResponseCallback = Callable[[int, pb.StopReplicaResponse], None]
# (broker id, its answer) to a LeaderAndIsr: the controller learns which replicas are on offline log dirs.
LeaderAndIsrResponseCallback = Callable[[int, pb.LeaderAndIsrResponse], None]



class ControllerBrokerRequestBatch:
    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        send: SendRequest,
        state_change_log: Logger,
        stop_replica_response: StopReplicaResponseCallback,
        inter_broker_listener: str = "PLAINTEXT",
        leader_and_isr_response: LeaderAndIsrResponseCallback | None = None,
    ) -> None:
        self._controller_id = controller_id
        self._leader_and_isr_response = leader_and_isr_response
        self._context = context
        self._send = send
        self._log = state_change_log
        self._stop_replica_response = stop_replica_response
        # Followers fetch from their leader on this listener (Kafka's controller sends each leader's
        # node on its interBrokerListenerName).
        self._inter_broker_listener = inter_broker_listener
        self._leader_and_isr: dict[int, dict[TopicPartition, pb.LeaderAndIsrPartitionState]] = {}
        # Per broker, each partition to stop and whether to delete it too.
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: set[TopicPartition] = set()

    @property
    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._update_metadata_brokers or self._stop_replica)

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Tell these brokers the partition's state; every live broker also gets it in its UpdateMetadata."""
        for broker_id in broker_ids:
            partitions = self._leader_and_isr.setdefault(broker_id, {})
            # A replica created earlier in the same batch is still new (it may have no log yet).
            already_new = tp in partitions and partitions[tp].is_new
            partitions[tp] = pb.LeaderAndIsrPartitionState(
                topic_name=tp.topic,
                partition_index=tp.partition,
                controller_epoch=state.controller_epoch,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                zk_version=state.zk_version,
                replicas=assignment.replicas,
                is_new=is_new or already_new,
            )
        self.add_update_metadata_request_for_brokers(self._context.live_broker_ids, [tp])

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """These brokers get an UpdateMetadata with the live brokers and these partitions' states
        (as they are when the batch is sent)."""
        self._update_metadata_brokers.update(broker_ids)
        self._update_metadata_partitions.update(partitions)

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        """These brokers stop fetching and serving the partition (a replica going offline: it leaves the ISR),
        and with `delete_partition` also delete its log (topic deletion: their answers go to the
        stop_replica_response callback). A deletion asked in the same batch includes the stop."""
        for broker_id in broker_ids:
            partitions = self._stop_replica.setdefault(broker_id, {})
            partitions[tp] = partitions.get(tp, False) or delete_partition

    def send_requests_to_brokers(self) -> None:
        """Hand every request to `send`, LeaderAndIsr first, then UpdateMetadata, then StopReplica (as Kafka),
        and empty the batch. Requests for brokers that are no longer live are dropped: their next registration
        gets fresh ones."""
        try:
            for broker_id, partitions in sorted(self._leader_and_isr.items()):
                if broker_id in self._context.live_brokers:
                    self._send(broker_id, self._leader_and_isr_request(broker_id, partitions),
                               self._on_leader_and_isr_response(broker_id))
            brokers = sorted(self._update_metadata_brokers & self._context.live_broker_ids)
            if brokers:
                self._send_update_metadata(brokers)
            for broker_id, stopped in sorted(self._stop_replica.items()):
                if broker_id in self._context.live_brokers:
                    for delete in (False, True):
                        to_stop = sorted(tp for tp, d in stopped.items() if d is delete)
                        if to_stop:
                            self._send_stop_replica(broker_id, to_stop, delete)
        finally:
            self.clear()

    def _on_leader_and_isr_response(self, broker_id: int) -> ResponseCallback | None:
        callback = self._leader_and_isr_response
        if callback is None:
            return None

        def on_response(response: BrokerResponse) -> None:
            assert isinstance(response, pb.LeaderAndIsrResponse)
            callback(broker_id, response)

        return on_response

    def _send_stop_replica(self, broker_id: int, partitions: list[TopicPartition], delete: bool) -> None:
        self._log.info(
            "Sending StopReplica request (delete = %s) for %d partitions to broker %d",
            str(delete).lower(),
            len(partitions),
            broker_id,
        )

        def on_response(response: BrokerResponse) -> None:
            assert isinstance(response, pb.StopReplicaResponse)
            self._stop_replica_response(broker_id, response)

        request = pb.StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=self._context.epoch,
            broker_epoch=self._context.live_brokers[broker_id].epoch,
            delete_partitions=delete,
            partitions=[pb.TopicPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in partitions],
        )
        # Only deletions report back: topic deletion waits for them.
        self._send(broker_id, request, on_response if delete else None)

    def _leader_and_isr_request(
        self, broker_id: int, partitions: dict[TopicPartition, pb.LeaderAndIsrPartitionState]
    ) -> pb.LeaderAndIsrRequest:
        states = [partitions[tp] for tp in sorted(partitions)]
        leaders = sorted({s.leader for s in states} & self._context.live_broker_ids)
        become_leader = sum(1 for s in states if s.leader == broker_id)
        self._log.info(
            "Sending LeaderAndIsr request to broker %d with %d become-leader and %d become-follower partitions",
            broker_id,
            become_leader,
            len(states) - become_leader,
        )
        for s in states:
            self._log.debug(
                "Sending %s LeaderAndIsr request %s to broker %d for partition %s-%d",
                "become-leader" if s.leader == broker_id else "become-follower",
                _describe(s),
                broker_id,
                s.topic_name,
                s.partition_index,
            )
        return pb.LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=self._context.epoch,
            broker_epoch=self._context.live_brokers[broker_id].epoch,
            partition_states=states,
            live_leaders=[
                pb.LeaderAndIsrLiveLeader(broker_id=b, host_name=endpoint.host, port=endpoint.port)
                for b in leaders
                if (endpoint := self._context.live_brokers[b].endpoint(self._inter_broker_listener)) is not None
            ],
        )

    def _send_update_metadata(self, broker_ids: list[int]) -> None:
        states = []
        for tp in sorted(self._update_metadata_partitions):
            state = self._context.partition_leadership_info.get(tp)
            if state is None:
                self._log.info("Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.", tp)
                continue
            replicas = self._context.partition_replica_assignment(tp)
            deleting = self._context.is_topic_queued_up_for_deletion(tp.topic)
            states.append(
                pb.UpdateMetadataPartitionState(
                    topic_name=tp.topic,
                    partition_index=tp.partition,
                    controller_epoch=state.controller_epoch,
                    leader=LEADER_DURING_DELETE if deleting else state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=state.isr,
                    zk_version=state.zk_version,
                    replicas=replicas,
                    # A broker shutting down still serves its replicas (Kafka's includeShuttingDownBrokers = true).
                    offline_replicas=[
                        r for r in replicas if not self._context.is_replica_online(r, tp, include_shutting_down=True)
                    ],
                )
            )
        live_brokers = [
            pb.UpdateMetadataBroker(
                id=b.id,
                endpoints=[
                    pb.UpdateMetadataEndpoint(
                        port=e.port,
                        host=e.host,
                        listener=e.listener_name,
                        security_protocol=SECURITY_PROTOCOL_IDS[e.security_protocol],
                    )
                    for e in b.endpoints
                ],
                rack=b.rack,
            )
            for _, b in sorted(self._context.live_brokers.items())
        ]
        self._log.info("Sending UpdateMetadata request to brokers %s for %d partitions", broker_ids, len(states))
        for broker_id in broker_ids:
            self._send(
                broker_id,
                pb.UpdateMetadataRequest(
                    controller_id=self._controller_id,
                    controller_epoch=self._context.epoch,
                    broker_epoch=self._context.live_brokers[broker_id].epoch,
                    partition_states=states,
                    live_brokers=live_brokers,
                ),
                None,
            )


def _describe(s: pb.LeaderAndIsrPartitionState) -> str:
    """Kafka's LeaderAndIsrPartitionState toString, the way its state change log shows it."""
    return (
        f"(controllerEpoch={s.controller_epoch}, leader={s.leader}, leaderEpoch={s.leader_epoch}, "
        f"isr={list(s.isr)}, zkVersion={s.zk_version}, replicas={list(s.replicas)}, isNew={s.is_new})"
    )
