"""Which send errors leave a record's fate unknown: only a definite refusal counts as "fail"."""

from __future__ import annotations

from types import TracebackType

import pytest

from chaos import workload
from chaos.cluster import ChaosError
from chaos.workload import WorkloadConfig, create_topic, outcome_of
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
def test_outcome_of(error: BaseException, outcome: str) -> None:
    assert outcome_of(error) == outcome


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
