"""A topic whose assignment znode ZooKeeper cannot take (issue 18: `--partitions 100000` made a 1.19 MB
/brokers/topics/<t>; ZooKeeper closed the broker's connection for the over-long request, kazoo re-sent it
after reconnecting, for ever, and the admin client sent the create again to a second broker).

A real ZooKeeper, two real brokers and the controller: the create is refused at once with POLICY_VIOLATION,
sent to one broker only, neither broker's ZooKeeper connection drops, and both keep serving.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from client.admin import Admin, NewTopic
from client.producer import Producer
from proto.errors import ErrorCode, KafkaError
from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import StartBrokers, StartController

pytestmark = pytest.mark.integration

# What kazoo logs when its connection breaks (the server closed it) or times out.
CONNECTION_LOSS_LINES = ("Connection dropped", "Connection time-out", "Transition to CONNECTING")


def test_a_topic_too_large_for_zookeeper_is_refused_and_no_session_suffers(
        start_brokers: StartBrokers, start_controller: StartController, zk_client: KafkaZkClient) -> None:
    brokers = start_brokers((1, 2))
    start_controller()
    bootstrap = ",".join(b.address for b in brokers.values())
    with Admin(bootstrap_servers=bootstrap, request_timeout_ms=20_000) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaError) as refused:
            admin.create_topics([NewTopic("huge", num_partitions=100_000, replication_factor=1)])
        elapsed = time.monotonic() - started
        assert refused.value.code == ErrorCode.POLICY_VIOLATION
        assert "/brokers/topics/huge" in refused.value.message and "jute.maxbuffer" in refused.value.message
        assert elapsed < 10, f"refused only after {elapsed:.1f}s"
        assert "huge" not in zk_client.get_all_topics()
        assert zk_client.get_topic_config("huge") == {}
        # Exactly one broker was asked (the refusal is final, not a transport failure to retry elsewhere).
        refusal = "Error processing create topic request for topic huge"
        asked = [b for b in brokers.values() if refusal in b.process.log()]
        assert len(asked) == 1, [b.broker_id for b in asked]
        for broker in brokers.values():
            log = broker.process.log()
            assert not any(line in log for line in CONNECTION_LOSS_LINES), log[-3000:]
        # Both keep serving: a normal topic is created and written through them.
        admin.create_topics([NewTopic("normal", num_partitions=2, replication_factor=2)])
    with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        for partition in (0, 1):
            producer.send("normal", b"after", partition=partition).get(timeout=30)
    for broker in brokers.values():
        assert broker.process.popen.poll() is None
        log = broker.process.log()
        assert not any(line in log for line in CONNECTION_LOSS_LINES), log[-3000:]
