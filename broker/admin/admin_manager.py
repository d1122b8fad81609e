"""CreateTopics / DeleteTopics and topic auto-creation (Kafka 2.x's server/AdminManager.scala with
AdminZkClient's validation).

A topic is created by writing its assignment and config overrides to
ZooKeeper; the controller sees the new /brokers/topics child, elects leaders
and tells the brokers. A deletion is a request under /admin/delete_topics that
the controller carries out. Every call here does blocking ZooKeeper I/O: run
it off the event loop.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kazoo.exceptions import KazooException

from broker.config.kafka_config import KafkaConfig
from broker.config.topic_config import MIN_INSYNC_REPLICAS, TopicConfigs
from common.assignment import assign_replicas_to_brokers
from proto.errors import ErrorCode, KafkaError
from zk import paths
from zk.client import JUTE_MAX_BUFFER, KafkaZkClient, request_size
from zk.paths import TopicAssignment, validate_topic

logger = logging.getLogger(__name__)

# Far beyond any real topic, and still an assignment that fits a znode: a hostile
# num_partitions must not make the broker build a list of two billion partitions.
MAX_PARTITIONS = 100_000


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int  # -1: num.partitions
    replication_factor: int  # -1: default.replication.factor
    assignments: Sequence[tuple[int, Sequence[int]]] = ()  # (partition, replicas); both counts -1 then
    configs: Sequence[tuple[str, str | None]] = ()


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    message: str = ""
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """A CreatePartitions entry: raise `topic` to `count` partitions; `assignments` (one broker list per new
    partition) replaces the broker's own assignment."""

    topic: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str
    error: ErrorCode
    message: str = ""


_Request = TypeVar("_Request", NewTopic, NewPartitions)


@dataclass(slots=True)
class _ClusterView:
    """ZooKeeper reads one request shares, made only if some topic needs them."""

    zk: KafkaZkClient
    _live_brokers: list[int] | None = None
    _topics: set[str] | None = None
    created: set[str] = field(default_factory=set)

    @property
    def live_brokers(self) -> list[int]:
        if self._live_brokers is None:
            self._live_brokers = sorted(broker.id for broker in self.zk.get_all_brokers())
        return self._live_brokers

    @property
    def topics(self) -> set[str]:
        if self._topics is None:
            self._topics = self.zk.get_all_topics()
        return self._topics | self.created


class AdminManager:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient, topic_configs: TopicConfigs) -> None:
        self._config = config
        self._zk = zk
        self._topic_configs = topic_configs


    @property
    def zookeeper_connected(self) -> bool:
        """Whether the broker's ZooKeeper session is connected now (what a timed-out request's message says)."""
        return self._zk.connected
    def create_topics(self, topics: Sequence[NewTopic], validate_only: bool) -> list[CreateTopicResult]:
        return self._each_topic(topics, [t.name for t in topics], "Create topics", "create topic",
                                lambda topic, view: self._create_topic(topic, validate_only, view))

    def _each_topic(self, requests: Sequence[_Request], names: Sequence[str], what: str, log_what: str,
                    create: Callable[[_Request, _ClusterView], CreateTopicResult]) -> list[CreateTopicResult]:
        """One result per request, in order: a topic named twice is INVALID_REQUEST, a KafkaError its code."""
        duplicates = {name for name, count in Counter(names).items() if count > 1}
        view = _ClusterView(self._zk)
        results = []
        for request, name in zip(requests, names, strict=True):
            if name in duplicates:
                results.append(CreateTopicResult(
                    name, ErrorCode.INVALID_REQUEST, f"{what} request contains multiple entries for the topic {name}"))
                continue
            try:
                results.append(create(request, view))
            except KafkaError as e:
                logger.info("Error processing %s request for topic %s: %s (%s)", log_what, name, e.message,
                            e.code.name)
                results.append(CreateTopicResult(name, e.code, e.message))
            except KazooException as e:
                # ZooKeeper unreachable or the session expired: nothing can change until it is back. Kafka's
                # ApiError.fromThrowable makes any such exception UNKNOWN_SERVER_ERROR, its message withheld.
                logger.error("Error processing %s request for topic %s: ZooKeeper %r", log_what, name, e)
                results.append(CreateTopicResult(name, ErrorCode.UNKNOWN_SERVER_ERROR, ""))
        return results

    def auto_create_topic(self, topic: str) -> ErrorCode:
        """Metadata's auto-creation: broker defaults, answered LEADER_NOT_AVAILABLE until a leader is elected."""
        result = self.create_topics([NewTopic(topic, -1, -1)], validate_only=False)[0]
        if result.error is ErrorCode.NONE:
            logger.info("Auto creation of topic %s with %d partitions and replication factor %d is successful",
                        topic, result.num_partitions, result.replication_factor)
        if result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return ErrorCode.LEADER_NOT_AVAILABLE
        return result.error

    def _create_topic(self, topic: NewTopic, validate_only: bool, view: _ClusterView) -> CreateTopicResult:
        validate_topic(topic.name)
        _check_no_collision(topic.name, view.topics)
        configs = _config_overrides(topic.configs)
        topic_config = self._topic_configs.validate(configs)
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise KafkaError("Both numPartitions or replicationFactor and replicasAssignments were set."
                                 " Both cannot be used at the same time.", ErrorCode.INVALID_REQUEST)
            assignment = _validate_assignment(topic.assignments, view.live_brokers)
        else:
            partitions = self._config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            replication_factor = (self._config.default_replication_factor if topic.replication_factor == -1
                                  else topic.replication_factor)
            if partitions > MAX_PARTITIONS:
                raise KafkaError(f"Number of partitions {partitions} is larger than {MAX_PARTITIONS}.",
                                 ErrorCode.INVALID_PARTITIONS)
            assignment = assign_replicas_to_brokers(partitions, replication_factor, view.live_brokers)
        _check_min_insync_replicas(configs, topic_config.min_insync_replicas, len(next(iter(assignment.values()))))
        topic_assignment = TopicAssignment.of(topic.name, assignment)
        _check_fits_a_znode(topic_assignment)
        if not validate_only:
            self._zk.create_topic(topic_assignment, configs)
            view.created.add(topic.name)
            logger.info("Created topic %s with partition assignment %s", topic.name, assignment)
        return CreateTopicResult(topic.name, ErrorCode.NONE, num_partitions=len(assignment),
                                 replication_factor=len(assignment[0]))

    def create_partitions(self, requests: Sequence[NewPartitions], validate_only: bool) -> list[CreateTopicResult]:
        """Kafka's ZkAdminManager.createPartitions: each topic's new assignment is written to its znode; the
        controller sees the change (PartitionModifications) and creates the new partitions. A result's
        num_partitions is the topic's new count, what a DelayedCreateTopics waits for."""
        return self._each_topic(requests, [r.topic for r in requests], "Create partitions", "create partitions",
                                lambda request, view: self._create_partitions(request, validate_only, view))

    def _create_partitions(self, request: NewPartitions, validate_only: bool, view: _ClusterView) -> CreateTopicResult:
        topic = request.topic
        existing = self._zk.get_topic_assignment(topic)
        if existing is None:
            raise KafkaError(f"The topic '{topic}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if any(a.is_being_reassigned for a in existing.partitions.values()):
            # The controller rewrites this znode while it reassigns: two writers would lose one's change.
            raise KafkaError(f"A partition reassignment is in progress for the topic '{topic}'.",
                             ErrorCode.REASSIGNMENT_IN_PROGRESS)
        if self._zk.is_topic_marked_for_deletion(topic):
            raise KafkaError(f"The topic '{topic}' is queued for deletion.", ErrorCode.INVALID_TOPIC_EXCEPTION)
        old_count = len(existing.partitions)
        increment = request.count - old_count
        if increment < 0:
            raise KafkaError(f"Topic currently has {old_count} partitions, which is higher than the requested"
                             f" {request.count}.", ErrorCode.INVALID_PARTITIONS)
        if increment == 0:
            raise KafkaError(f"Topic already has {old_count} partitions.", ErrorCode.INVALID_PARTITIONS)
        if request.count > MAX_PARTITIONS:
            raise KafkaError(f"Number of partitions {request.count} is larger than {MAX_PARTITIONS}.",
                             ErrorCode.INVALID_PARTITIONS)
        partition0 = existing.replicas(0)
        if request.assignments is not None:
            added = _validate_new_partitions(request.assignments, increment, len(partition0), old_count,
                                             view.live_brokers)
        else:
            # AdminZkClient.createNewPartitionsAssignment: continue the round robin where partition 0's leader
            # sits in the broker list, numbering from the current count.
            brokers = view.live_brokers
            start_index = next((i for i, b in enumerate(brokers) if b >= partition0[0]), 0)
            added = assign_replicas_to_brokers(increment, len(partition0), brokers, fixed_start_index=start_index,
                                               start_partition_id=old_count)
        grown = TopicAssignment.of(topic, {p: list(existing.replicas(p)) for p in existing.partitions} | added)
        _check_fits_a_znode(grown, f"given {request.count} partitions")
        if not validate_only:
            logger.info("Creating %d partitions for '%s' with the following replica assignment: %s.", increment,
                        topic, added)
            self._zk.set_topic_partitions(grown)
        return CreateTopicResult(topic, ErrorCode.NONE, num_partitions=request.count,
                                 replication_factor=len(partition0))

    def delete_topics(self, names: Sequence[str]) -> list[DeleteTopicResult]:
        if not self._config.delete_topic_enable:
            # Kafka 2.x's TOPIC_DELETION_DISABLED is answered as older versions did.
            return [DeleteTopicResult(name, ErrorCode.INVALID_REQUEST, "Topic deletion is disabled.")
                    for name in names]
        duplicates = {name for name, count in Counter(names).items() if count > 1}
        existing: set[str] | None = None
        results = []
        for name in names:
            if name in duplicates:
                results.append(DeleteTopicResult(
                    name, ErrorCode.INVALID_REQUEST, f"Delete topics request contains multiple entries for {name}"))
                continue
            try:
                validate_topic(name)
                if existing is None:
                    existing = self._zk.get_all_topics()
                if name not in existing:
                    raise KafkaError(f"Topic {name} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if self._zk.create_delete_topic_path(name):
                    logger.info("Topic %s marked for deletion", name)
                results.append(DeleteTopicResult(name, ErrorCode.NONE))
            except KafkaError as e:
                results.append(DeleteTopicResult(name, e.code, e.message))
            except KazooException as e:  # as in _each_topic
                logger.error("Error processing delete topic request for topic %s: ZooKeeper %r", name, e)
                results.append(DeleteTopicResult(name, ErrorCode.UNKNOWN_SERVER_ERROR, ""))
        return results


def _config_overrides(configs: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    nulls = [name for name, value in configs if value is None]
    if nulls:
        raise KafkaError(f"Null value not supported for topic configs : {','.join(nulls)}", ErrorCode.INVALID_REQUEST)
    return {name: value for name, value in configs if value is not None}


def _validate_assignment(assignments: Sequence[tuple[int, Sequence[int]]],
                         live_brokers: Sequence[int]) -> dict[int, list[int]]:
    """An explicit assignment, as AdminZkClient.validateTopicCreate checks it, plus known brokers."""

    def invalid(message: str) -> KafkaError:
        return KafkaError(message, ErrorCode.INVALID_REPLICA_ASSIGNMENT)

    assignment: dict[int, list[int]] = {}
    for partition, replicas in assignments:
        if partition in assignment:
            raise invalid(f"Partition {partition} is assigned more than once")
        assignment[partition] = list(replicas)
    if sorted(assignment) != list(range(len(assignment))) or len(assignment) > MAX_PARTITIONS:
        raise invalid("partitions should be a consecutive 0-based integer sequence")
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise invalid("All partitions should have the same number of replicas")
    for partition, replicas in assignment.items():
        if not replicas:
            raise invalid(f"Partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise invalid(f"Duplicate replica assignment found: {assignment}")
    unknown = sorted({b for replicas in assignment.values() for b in replicas} - set(live_brokers))
    if unknown:
        raise invalid(f"Unknown broker(s) in replica assignment: {unknown}")
    return assignment


def _validate_new_partitions(assignments: Sequence[Sequence[int]], increment: int, replication_factor: int,
                             first_partition: int, live_brokers: Sequence[int]) -> dict[int, list[int]]:
    """CreatePartitions' explicit assignment, as ZkAdminManager and AdminZkClient.validateReplicaAssignment
    check it."""
    unknown = sorted({b for replicas in assignments for b in replicas} - set(live_brokers))
    if unknown:
        raise KafkaError(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
                         ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if len(assignments) != increment:
        raise KafkaError(f"Increasing the number of partitions by {increment} but {len(assignments)} assignments"
                         " provided.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    added = {first_partition + i: list(replicas) for i, replicas in enumerate(assignments)}
    for partition, replicas in added.items():
        if not replicas:
            raise KafkaError(f"Cannot have replication factor of 0 for partition id {partition}.",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if len(set(replicas)) != len(replicas):
            raise KafkaError("Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {partition}.",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    bad = {p: len(r) for p, r in added.items() if len(r) != replication_factor}
    if bad:
        raise KafkaError(f"Inconsistent replication factor between partitions, partition 0 has {replication_factor}"
                         f" while partitions [{', '.join(map(str, bad))}] have replication factors"
                         f" [{', '.join(map(str, bad.values()))}], respectively.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return added


def _check_min_insync_replicas(overrides: dict[str, str], min_insync_replicas: int, replication_factor: int) -> None:
    """A topic's own min.insync.replicas above its replication factor fails every acks=all write: refused as
    Kafka 3 does (a broker-wide default is left alone, as it applies to topics of every size)."""
    if MIN_INSYNC_REPLICAS in overrides and min_insync_replicas > replication_factor:
        raise KafkaError(
            f"Invalid value {overrides[MIN_INSYNC_REPLICAS]} for configuration {MIN_INSYNC_REPLICAS}: it is larger"
            f" than the replication factor {replication_factor}, so no acks=all write could ever succeed",
            ErrorCode.INVALID_CONFIG)


def _check_fits_a_znode(assignment: TopicAssignment, action: str = "created") -> None:
    """Refuse an assignment ZooKeeper cannot store (the server drops a connection sending more than jute.maxbuffer)."""
    path = paths.topic_path(assignment.topic)
    size = request_size(path, paths.encode_topic_assignment(assignment))
    if size > JUTE_MAX_BUFFER:
        raise KafkaError(
            f"Topic {assignment.topic} cannot be {action}: writing its assignment to {path} takes a {size}-byte"
            f" ZooKeeper request, more than jute.maxbuffer ({JUTE_MAX_BUFFER} bytes); use fewer partitions or"
            f" a smaller replication factor", ErrorCode.POLICY_VIOLATION)


def _check_no_collision(topic: str, existing: set[str]) -> None:
    """Kafka: '.' and '_' collide in metric names, so `a.b` and `a_b` cannot both exist."""
    if topic in existing:
        raise KafkaError(f"Topic '{topic}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
    if "." in topic or "_" in topic:
        normalized = topic.replace(".", "_")
        colliding = sorted(t for t in existing if t.replace(".", "_") == normalized)
        if colliding:
            raise KafkaError(f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}",
                             ErrorCode.INVALID_TOPIC_EXCEPTION)
