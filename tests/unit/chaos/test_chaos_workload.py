"""Which send errors leave a record's fate unknown: only a definite refusal counts as "fail"."""

from __future__ import annotations

import pytest

from chaos.workload import outcome_of
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
