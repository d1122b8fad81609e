"""Which send errors leave a record's fate unknown: only a definite refusal counts as "fail"."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import confluent_kafka
import kafka.errors
import pytest

from chaos import workload
from chaos.clients import (
    ClientLibrary,
    Delivery,
    Done,
    ProducerSettings,
    Record,
    confluent,
    kafka_python,
    minibroker_client,
)
from chaos.cluster import ChaosError
from chaos.history import HistoryWriter, load
from chaos.workload import WorkloadConfig, create_topic
from client.errors import KafkaTimeoutError
from proto.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(("error", "outcome"), [
    (KafkaTimeoutError("Expiring 3 record(s): 30000 ms has passed since batch creation"), "info"),
    (KafkaError("", ErrorCode.REQUEST_TIMED_OUT), "info"),
    (KafkaError("", ErrorCode.NETWORK_EXCEPTION), "info"),
    (KafkaError("", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND), "info"),  # appended on the leader
    (KafkaError("", ErrorCode.NOT_LEADER_OR_FOLLOWER), "info"),  # retriable: a retry may have landed
    (KafkaError("", ErrorCode.MESSAGE_TOO_LARGE), "fail"),
    (KafkaError("", ErrorCode.INVALID_TOPIC_EXCEPTION), "fail"),
    (RuntimeError("producer closed"), "info"),
])
def test_outcome_of_minibroker_errors(error: BaseException, outcome: str) -> None:
    assert minibroker_client.outcome_of(error) == outcome


@pytest.mark.parametrize(("code", "outcome"), [
    (confluent_kafka.KafkaError._MSG_TIMED_OUT, "info"),  # the client gave up: it may have reached the leader
    (confluent_kafka.KafkaError._TRANSPORT, "info"),
    (confluent_kafka.KafkaError.REQUEST_TIMED_OUT, "info"),
    (confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, "info"),
    (confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION, "info"),
    (confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, "fail"),  # the broker's MESSAGE_TOO_LARGE
    (confluent_kafka.KafkaError.TOPIC_EXCEPTION, "fail"),
])
def test_outcome_of_confluent_kafka_errors(code: int, outcome: str) -> None:
    assert confluent.outcome_of(confluent_kafka.KafkaError(code)) == outcome


@pytest.mark.parametrize(("error", "outcome"), [
    (kafka.errors.KafkaTimeoutError("Batch expired"), "info"),
    (kafka.errors.RequestTimedOutError(), "info"),
    (kafka.errors.NotEnoughReplicasAfterAppendError(), "info"),
    (kafka.errors.NotLeaderForPartitionError(), "info"),
    (kafka.errors.MessageSizeTooLargeError(), "fail"),
    (kafka.errors.InvalidTopicError(), "fail"),
    (kafka.errors.KafkaConnectionError("closed"), "info"),
])
def test_outcome_of_kafka_python_errors(error: BaseException, outcome: str) -> None:
    assert kafka_python.outcome_of(error) == outcome


class ExistingTopicAdmin:
    def __init__(self, bootstrap_servers: str, **settings: object) -> None: ...

    def __enter__(self) -> ExistingTopicAdmin:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None: ...

    def create_topics(self, topics: object, timeout_ms: int) -> None:
        raise KafkaError("Topic 'chaos' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)


def test_a_run_refuses_a_topic_an_earlier_run_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cluster that lives on between runs (--data-dir, --compose) still has the last run's topic.
    monkeypatch.setattr(workload, "Admin", ExistingTopicAdmin)
    with pytest.raises(ChaosError, match=r"topic 'chaos' exists already .*give another --topic"):
        create_topic("localhost:9092", WorkloadConfig(topic="chaos"))


class FakeProducer:
    """Answers every other send at once (OK at its offset, or a refusal), keeps the rest unanswered."""

    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        self.settings = settings
        self.sent: list[bytes] = []
        self.unanswered: list[Done] = []
        self.closed = False
        producers.append(self)

    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        self.sent.append(value)
        n = len(self.sent) - 1
        if n % 2 == 1:
            self.unanswered.append(done)
        else:
            done(Delivery("ok", offset=n) if n % 4 == 0 else Delivery("fail", error="MESSAGE_TOO_LARGE"))

    def flush(self, timeout: float) -> None: ...

    def close(self) -> None:
        self.closed = True


class FakeConsumer:
    """Hands out one record per partition per poll, then an error once."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, partitions: int, request_timeout_ms: int) -> None:
        self.partitions = partitions
        self.polls = 0
        self.closed = False

    def poll(self, timeout: float) -> tuple[list[Record], list[str]]:
        self.polls += 1
        if self.polls == 2:
            return [], ["NOT_LEADER_OR_FOLLOWER"]
        return [(p, self.polls, f"w0-{self.polls}".encode()) for p in range(self.partitions)], []

    def close(self) -> None:
        self.closed = True


producers: list[FakeProducer] = []
FAKE = ClientLibrary("fake", kafka_protocol=True, producer=FakeProducer, consumer=FakeConsumer)


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_writer_records_each_delivery_and_what_had_none(tmp_path: Path) -> None:
    producers.clear()
    config = WorkloadConfig(partitions=3, rate=1000.0)
    history = HistoryWriter(tmp_path / "h.jsonl")
    writer = workload.Writer("w0", FAKE, "b:1", config, history)
    [producer] = producers
    assert producer.settings == ProducerSettings("chaos-w0", "all", idempotent=True, request_timeout_ms=5000,
                                                 delivery_timeout_ms=30000)
    writer.start()
    _wait(lambda: len(producer.sent) >= 8)
    writer.stop(flush_timeout=0)
    history.close()
    sends = {s.value: s for s in load(tmp_path / "h.jsonl").sends}
    assert producer.closed and len(sends) == len(producer.sent)
    assert (sends["w0-0"].outcome, sends["w0-0"].offset, sends["w0-0"].partition) == ("ok", 0, 0)
    assert (sends["w0-1"].outcome, sends["w0-1"].error) == ("info", "no answer before the run ended")
    assert (sends["w0-2"].outcome, sends["w0-2"].error, sends["w0-2"].partition) == ("fail", "MESSAGE_TOO_LARGE", 2)
    assert all(s.invoke <= s.complete for s in sends.values())


def test_a_reader_records_polls_and_errors_until_the_targets(tmp_path: Path) -> None:
    history = HistoryWriter(tmp_path / "h.jsonl")
    reader = workload.Reader("c0", FAKE, "b:1", WorkloadConfig(partitions=2), history)
    reader.start()
    reader.finish({0: 4, 1: 4}, timeout=10)
    history.close()
    polls = load(tmp_path / "h.jsonl").polls
    assert reader.caught_up and reader.errors == ["NOT_LEADER_OR_FOLLOWER"]
    assert [p.records for p in polls][:2] == [((0, 1, "w0-1"), (1, 1, "w0-1")), ((0, 3, "w0-3"), (1, 3, "w0-3"))]
    assert polls[-1].records[0][1] >= 3
