"""The producer's contract with its caller: Kafka 3's defaults (KIP-679) and precise errors for misuse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

import minibroker
from client import Consumer, IllegalStateError, Producer, TopicPartition
from client.producer import idempotence_enabled
from common.record import NO_PRODUCER_ID, validate_batch

TP = TopicPartition("t", 0)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.create("t", 1)
        yield b


def producer_ids(broker: FakeBroker) -> set[int]:
    return {validate_batch(batch).producer_id for batch in broker.logs[TP]}


def test_default_producer_is_idempotent_with_acks_all(broker: FakeBroker) -> None:
    with Producer(broker.address) as producer:
        assert (producer.acks, producer.enable_idempotence) == (-1, True)
        producer.send("t", b"v", partition=0).get(timeout=10)
    assert NO_PRODUCER_ID not in producer_ids(broker)


def test_explicit_acks_1_turns_unset_idempotence_off(broker: FakeBroker) -> None:
    with Producer(broker.address, acks=1) as producer:
        assert (producer.acks, producer.enable_idempotence) == (1, False)
        producer.send("t", b"v", partition=0).get(timeout=10)
    assert producer_ids(broker) == {NO_PRODUCER_ID}


def test_idempotence_rule_as_kafka_3() -> None:
    # Unset: on where nothing rules it out, quietly off where something does.
    assert idempotence_enabled(None, acks=-1, retries=5, max_in_flight=5)
    assert not idempotence_enabled(None, acks=1, retries=5, max_in_flight=5)
    assert not idempotence_enabled(None, acks=0, retries=5, max_in_flight=5)
    assert not idempotence_enabled(None, acks=-1, retries=0, max_in_flight=5)
    assert not idempotence_enabled(None, acks=-1, retries=5, max_in_flight=6)
    # Explicit: false is false, true with a conflicting config is an error naming Kafka's properties.
    assert not idempotence_enabled(False, acks=-1, retries=5, max_in_flight=5)
    with pytest.raises(ValueError, match=r"enable.idempotence=true requires acks=all"):
        idempotence_enabled(True, acks=1, retries=5, max_in_flight=5)
    with pytest.raises(ValueError, match="retries"):
        idempotence_enabled(True, acks=-1, retries=0, max_in_flight=5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"value": "text"}, "value must be bytes (or None), not str: pass bytes or give the producer a value_serializer"),
    ({"value": b"v", "headers": [("trace", "text")]},
     "headers must be (str, bytes or None) pairs, not ('trace', 'text')"),
    ({"value": b"v", "key": 7},
     "key must be bytes (or None), not int: pass bytes or give the producer a key_serializer"),
])
def test_unserialized_key_or_value_is_a_precise_type_error(broker: FakeBroker, kwargs: dict[str, object],
                                                            message: str) -> None:
    with Producer(broker.address) as producer:
        with pytest.raises(TypeError) as err:
            producer.send("t", **kwargs)  # type: ignore[arg-type]
        assert str(err.value).startswith(message)
        # bytearray and memoryview are bytes too.
        producer.send("t", bytearray(b"v"), key=memoryview(b"k"), partition=0).get(timeout=10)


def test_negative_timestamp_is_refused(broker: FakeBroker) -> None:
    with Producer(broker.address) as producer:
        with pytest.raises(ValueError, match=r"Invalid timestamp: -5. Timestamp should always be non-negative"):
            producer.send("t", b"v", timestamp_ms=-5)
        assert producer.send("t", b"v", partition=0, timestamp_ms=0).get(timeout=10).timestamp == 0
    assert len(broker.logs[TP]) == 1


def test_send_after_close_is_an_illegal_state(broker: FakeBroker) -> None:
    producer = Producer(broker.address)
    producer.close()
    with pytest.raises(IllegalStateError) as err:
        producer.send("t", b"v")
    assert str(err.value) == "Cannot perform operation after producer has been closed"


def test_public_names_are_importable_from_minibroker() -> None:
    from minibroker import KafkaError, KafkaTimeoutError, OffsetAndMetadata  # noqa: F401

    assert minibroker.OffsetAndMetadata(42, "meta").metadata == "meta"
    assert issubclass(minibroker.IllegalStateError, minibroker.KafkaError)
    assert {"OffsetAndMetadata", "KafkaError", "MessageTooLargeError", "RecordMetadata"} <= set(minibroker.__all__)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"auto_offset_reset": "smallest-ish"},
     "Invalid value smallest-ish for configuration auto.offset.reset: String must be one of: latest, earliest, none"),
    ({"isolation_level": "dirty"},
     "Invalid value dirty for configuration isolation.level: String must be one of: read_committed, read_uncommitted"),
    ({"bootstrap_servers": "host:port"}, "Invalid url in bootstrap.servers: host:port"),
    ({"bootstrap_servers": " , "}, "No resolvable bootstrap urls given in bootstrap.servers"),
])
def test_consumer_config_errors_use_kafkas_property_names(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as err:
        Consumer(**{"bootstrap_servers": "127.0.0.1:1", **kwargs})  # type: ignore[arg-type]
    assert str(err.value) == message


def test_committed_without_group_names_group_id() -> None:
    with Consumer(bootstrap_servers="127.0.0.1:1") as consumer, \
            pytest.raises(ValueError, match=r"you must provide a valid group\.id"):
        consumer.committed(TP)
