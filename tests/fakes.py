"""The test fakes every unit test shares (as trio.testing does): a clock only the test moves, ZooKeeper in
memory, a partition state store in memory. Fakes only for unit tests of pure logic; integration tests start
the real processes (tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from broker.replication.partition_state_store import IsrUpdateResult
from proto.errors import ErrorCode, KafkaError
from proto.types import EndPoint, TopicPartition
from zk import paths
from zk.client import ControllerMovedError, UpdateLeaderAndIsrResult, Watch
from zk.paths import BrokerInfo, LeaderIsrAndControllerEpoch, TopicAssignment


class FakeClock:
    """A clock only the test moves, never real time. Calling it gives `now` in the unit it started in
    (milliseconds for the broker's `time_ms`, seconds for a `time.monotonic` stand-in); `advance` and
    `sleep` move it, and every `sleep` is recorded."""

    def __init__(self, now: float = 1_000_000) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> Any:
        return self.now

    def advance(self, amount: float) -> None:
        self.now += amount

    def sleep(self, amount: float) -> None:
        self.sleeps.append(amount)
        self.now += amount


class FakeMonotonic(FakeClock):
    """time.monotonic's stand-in (seconds) over a clock moved in milliseconds, the unit of a client's settings."""

    @property
    def now_ms(self) -> float:
        return self.now

    def __call__(self) -> float:
        return self.now / 1000


class FakeStateStore:
    """A partition state znode in memory: conditional writes on its version, as ZooKeeper does them."""

    def __init__(self) -> None:
        self.states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.writes: list[tuple[str, LeaderIsrAndControllerEpoch]] = []

    def shrink_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        return self._write("shrink", tp, state)

    def expand_isr(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        return self._write("expand", tp, state)

    def _write(self, kind: str, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> IsrUpdateResult:
        current = self.states.get(tp)
        version = 0 if current is None else current.zk_version
        if state.zk_version != version:
            return IsrUpdateResult(None, current)
        self.writes.append((kind, state))
        self.states[tp] = LeaderIsrAndControllerEpoch(state.leader, state.leader_epoch, state.isr,
                                                      state.controller_epoch, version + 1)
        return IsrUpdateResult(version + 1)


class FakeZk:
    """KafkaZkClient in memory: the operations the controller, the AdminManager and the group offsets use, with
    ZooKeeper's rules that matter to them: a controller write whose expected /controller_epoch version is not
    the current one raises ControllerMovedError; creating a topic that exists raises TOPIC_ALREADY_EXISTS."""

    def __init__(self) -> None:
        self.controller: int | None = None
        self.controller_epoch = 0
        self.controller_epoch_zk_version = 0
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.partition_states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.isr_notifications: dict[str, set[TopicPartition]] = {}
        # /log_dir_event_notification: sequence number -> broker id, and the next sequence number.
        self.log_dir_events: dict[str, int] = {}
        self.log_dir_event_sequence = 0
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}  # /config/brokers/<id|<default>>
        self.user_configs: dict[str, dict[str, str]] = {}  # /config/users/<user>
        self.config_changes: list[str] = []  # entity paths of /config/changes notifications, in order
        self.topic_deletions: set[str] = set()
        self.preferred_replica_election: set[TopicPartition] = set()
        self.partition_reassignment: dict[TopicPartition, tuple[int, ...]] = {}
        # Partitions whose state znode the controller watches (reassignment), with their callbacks.
        self.partition_state_watches: dict[TopicPartition, Any] = {}
        # Partitions whose next conditional update meets a concurrent write (a leader's ISR change) first.
        self.concurrent_writes: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.watches: dict[str, Any] = {}
        # Each watch's handle, by the same name: a cancelled one no longer calls back.
        self.watch_handles: dict[str, Watch] = {}
        self.session_expired_callbacks: list[Any] = []
        self.new_session_callbacks: list[Any] = []
        self.fail_next_get_all_brokers: Exception | None = None
        self.topic_partition_writes: list[TopicAssignment] = []

    # --- test controls ---

    def elect_other(self, controller_id: int) -> None:
        """Another controller wins an election (its multi-op bumps the epoch)."""
        self.controller = controller_id
        self.controller_epoch += 1
        self.controller_epoch_zk_version += 1

    def add_broker(self, *broker_ids: int) -> None:
        """Registered brokers with one PLAINTEXT listener each, at 127.0.0.1:9000 + id."""
        for b in broker_ids:
            self.brokers[b] = BrokerInfo(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),))

    def add_topic(self, topic: str, replicas: Mapping[int, Iterable[int]]) -> None:
        self.topics[topic] = TopicAssignment.of(topic, {p: list(r) for p, r in replicas.items()})

    def _fence(self, expected: int) -> None:
        if expected != self.controller_epoch_zk_version:
            raise ControllerMovedError(f"expected /controller_epoch at version {expected}")

    # --- controller ---

    def get_controller_id(self) -> int | None:
        return self.controller

    def try_create_controller(self, controller_id: int, endpoint: str | None = None) -> tuple[int, int] | None:
        if self.controller is not None:
            return None
        self.controller = controller_id
        self.controller_epoch += 1
        self.controller_epoch_zk_version += 1
        return self.controller_epoch, self.controller_epoch_zk_version

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.controller = None

    # --- brokers and topics ---

    def get_all_brokers(self) -> list[BrokerInfo]:
        if self.fail_next_get_all_brokers is not None:
            error, self.fail_next_get_all_brokers = self.fail_next_get_all_brokers, None
            raise error
        return [self.brokers[i] for i in sorted(self.brokers)]

    def get_all_topics(self) -> set[str]:
        return set(self.topics)

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        return {t: self.topics[t] for t in topics if t in self.topics}

    # --- partition state ---

    def get_partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return {tp: self.partition_states[tp] for tp in partitions if tp in self.partition_states}

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> set[TopicPartition]:
        self._fence(expected_controller_epoch_zk_version)
        created = set()
        for tp, s in states.items():
            if tp not in self.partition_states:
                self.partition_states[tp] = replace(s, zk_version=0)
                created.add(tp)
        return created

    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        self._fence(expected_controller_epoch_zk_version)
        result = UpdateLeaderAndIsrResult()
        for tp, s in states.items():
            if tp in self.concurrent_writes:
                concurrent = self.concurrent_writes.pop(tp)
                self.partition_states[tp] = replace(concurrent, zk_version=self.partition_states[tp].zk_version + 1)
            if self.partition_states[tp].zk_version != s.zk_version:
                result.to_retry.append(tp)
            else:
                self.partition_states[tp] = result.finished[tp] = replace(s, zk_version=s.zk_version + 1)
        return result

    # --- topic creation (AdminManager) ---

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        if assignment.topic in self.topics:
            raise KafkaError("exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        self.topics[assignment.topic] = assignment
        self.topic_configs[assignment.topic] = dict(config or {})

    def create_delete_topic_path(self, topic: str) -> bool:
        self.topic_deletions.add(topic)
        return True

    # --- added partitions (AdminManager's CreatePartitions) ---

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return topic in self.topic_deletions

    def set_topic_partitions(self, assignment: TopicAssignment) -> None:
        self.topic_partition_writes.append(assignment)
        self.topics[assignment.topic] = assignment

    # --- topic config and deletion ---

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.topic_configs.get(topic, {}))

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        return self.topics.get(topic)

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        if entity_type == paths.TOPICS_ENTITY:
            return self.get_topic_config(name)
        if entity_type == paths.USERS_ENTITY:
            return dict(self.user_configs.get(name, {}))
        return dict(self.broker_configs.get(name, {}))

    def set_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """The overrides and their /config/changes notification, as one write (a user's name sanitized in the
        notification, as Kafka writes it)."""
        if entity_type == paths.TOPICS_ENTITY:
            self.topic_configs[name] = dict(config)
        elif entity_type == paths.USERS_ENTITY:
            self.user_configs[name] = dict(config)
        else:
            self.broker_configs[name] = dict(config)
        self.config_changes.append(paths.entity_config_path(entity_type, name).removeprefix("/config/"))

    def get_user_names(self) -> list[str]:
        return sorted(self.user_configs)

    def get_topic_deletions(self) -> set[str]:
        return set(self.topic_deletions)

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.topic_deletions -= set(topics)

    def delete_topics(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        for topic in topics:
            self.topics.pop(topic, None)
            self.topic_configs.pop(topic, None)
            self.topic_deletions.discard(topic)
        for tp in [tp for tp in self.partition_states if tp.topic in topics]:
            del self.partition_states[tp]

    # --- ISR change notifications ---

    def notify_isr_change(self, tp: TopicPartition, new_state: LeaderIsrAndControllerEpoch) -> None:
        """What a leader does: a conditional write of the state, then a notification."""
        self.partition_states[tp] = new_state
        self.isr_notifications[f"{len(self.isr_notifications):010d}"] = {tp}

    def get_isr_change_notifications(self) -> list[str]:
        return sorted(self.isr_notifications)

    def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        return set().union(*(self.isr_notifications.get(s, set()) for s in sequence_numbers))

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._delete_notifications(self.isr_notifications, sequence_numbers, expected_controller_epoch_zk_version)

    def _delete_notifications(self, notifications: dict[str, Any], sequence_numbers: Iterable[str],
                              expected_controller_epoch_zk_version: int) -> None:
        """A fenced multi-delete of sequential notification znodes (none: no check, as the real client)."""
        sequence_numbers = list(sequence_numbers)
        if sequence_numbers:
            self._fence(expected_controller_epoch_zk_version)
        for s in sequence_numbers:
            notifications.pop(s, None)

    # --- log dir event notifications ---

    def propagate_log_dir_event(self, broker_id: int) -> str:
        sequence_number = f"{self.log_dir_event_sequence:010d}"
        self.log_dir_event_sequence += 1
        self.log_dir_events[sequence_number] = broker_id
        return sequence_number

    def get_all_log_dir_event_notifications(self) -> list[str]:
        return sorted(self.log_dir_events)

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        return [self.log_dir_events[s] for s in sequence_numbers if s in self.log_dir_events]

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._delete_notifications(self.log_dir_events, sequence_numbers, expected_controller_epoch_zk_version)

    # --- watches: recorded, never fired (tests call process() with the events instead) ---

    def _watch(self, name: str, callback: Any) -> Watch:
        self.watches[name] = callback
        handle = self.watch_handles[name] = Watch()
        return handle

    def watch_controller(self, callback: Any) -> Any:
        return self._watch("controller", callback)

    def watch_broker_ids(self, callback: Any) -> Any:
        return self._watch("brokers", callback)

    def watch_topics(self, callback: Any) -> Any:
        return self._watch("topics", callback)

    def watch_topic_assignments(self, topics: Any, callback: Any) -> dict[str, Watch]:
        return {topic: self._watch(f"topics/{topic}", lambda topic=topic: callback(topic)) for topic in topics}

    def watch_isr_change_notifications(self, callback: Any) -> Any:
        return self._watch("isr_change_notification", callback)

    def watch_log_dir_event_notifications(self, callback: Any) -> Any:
        return self._watch("log_dir_event_notification", callback)

    def watch_topic_deletions(self, callback: Any) -> Any:
        return self._watch("delete_topics", callback)

    def watch_preferred_replica_election(self, callback: Any) -> Any:
        return self._watch("preferred_replica_election", callback)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        return set(self.preferred_replica_election)

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.preferred_replica_election = set()

    def watch_partition_reassignment(self, callback: Any) -> Any:
        return self._watch("reassign_partitions", callback)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.partition_reassignment)

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.partition_reassignment = {tp: tuple(r) for tp, r in reassignment.items()}

    def set_topic_assignment(self, assignment: TopicAssignment, expected_controller_epoch_zk_version: int) -> None:
        self._fence(expected_controller_epoch_zk_version)
        self.topics[assignment.topic] = assignment

    def watch_partition_state(self, tp: TopicPartition, callback: Any) -> Watch:
        watch = Watch()
        self.partition_state_watches[tp] = (watch, callback)
        return watch

    def on_session_expired(self, callback: Any) -> None:
        self.session_expired_callbacks.append(callback)

    def on_new_session(self, callback: Any) -> None:
        self.new_session_callbacks.append(callback)
