"""Which send errors leave a record's fate unknown: only a definite refusal counts as "fail"."""

from __future__ import annotations

from types import TracebackType

import confluent_kafka
import kafka.errors
import pytest

from chaos import workload
from chaos.clients import confluent, kafka_python, minibroker_client
from chaos.cluster import ChaosError
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
    def __init__(self, bootstrap_servers: str) -> None: ...

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
