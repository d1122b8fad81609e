"""The `minibroker` source's and sink's options: the JVM connector's names, defaults and refusals."""

from __future__ import annotations

import pytest

from spark_jobs.kafka_options import OptionError, Subscription, sink_options, source_options

SERVERS = {"kafka.bootstrap.servers": "h:9092"}


def test_defaults_are_the_connectors_with_read_committed() -> None:
    stream = source_options({**SERVERS, "subscribe": "a, b"}, streaming=True)
    assert stream.subscription == Subscription(topics=("a", "b"))
    assert (stream.starting, stream.ending, stream.fail_on_data_loss, stream.include_headers) == \
        ("latest", "latest", True, False)
    assert stream.isolation_level == "read_committed"
    assert stream.poll_timeout_ms == 120_000
    assert source_options({**SERVERS, "subscribe": "a"}, streaming=False).starting == "earliest"


def test_kafka_options_go_to_the_client_without_their_prefix_and_names_are_case_insensitive() -> None:
    options = source_options({**SERVERS, "kafka.security.protocol": "SASL_SSL", "kafka.isolation.level":
                              "read_uncommitted", "SUBSCRIBEPATTERN": "ev.*", "MaxOffsetsPerTrigger": "5",
                              "minpartitions": "3", "failOnDataLoss": "False", "startingOffsets":
                              '{"ev":{"0":-2,"1":17}}'}, streaming=True)
    assert options.client == {"bootstrap.servers": "h:9092", "security.protocol": "SASL_SSL",
                              "isolation.level": "read_uncommitted"}
    assert (options.max_offsets_per_trigger, options.min_partitions, options.fail_on_data_loss) == (5, 3, False)
    assert options.starting == {("ev", 0): -2, ("ev", 1): 17}
    assert options.subscription.matches("events") and not options.subscription.matches("__events")


def test_assign_lists_topic_partitions() -> None:
    options = source_options({**SERVERS, "assign": '{"b":[1],"a":[0,2]}'}, streaming=True)
    assert options.subscription.assigned == (("a", 0), ("a", 2), ("b", 1))


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({**SERVERS}, "One of the following options must be specified"),
    ({**SERVERS, "subscribe": "a", "assign": '{"a":[0]}'}, "One of the following options must be specified"),
    ({**SERVERS, "subscribe": " , "}, "No topics to subscribe to"),
    ({**SERVERS, "subscribePattern": "("}, "Invalid subscribePattern"),
    ({**SERVERS, "assign": "[0]"}, "Expected e.g."),
    ({**SERVERS, "subscribe": "a", "startingOffsets": "{bad"}, "for startingOffsets"),
    ({**SERVERS, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "at least -2"),
    ({**SERVERS, "subscribe": "a", "endingOffsets": "latest"}, "Ending offset not valid in streaming queries"),
    ({**SERVERS, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "must be at least 1"),
    ({**SERVERS, "subscribe": "a", "minPartitions": "x"}, "must be an integer"),
    ({**SERVERS, "subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
    ({**SERVERS, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({**SERVERS, "subscribe": "a", "kafka.isolation.level": "dirty"}, "kafka.isolation.level"),
])
def test_streaming_refusals_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        source_options(options, streaming=True)


def test_batch_refuses_latest_as_start_and_earliest_as_end() -> None:
    with pytest.raises(OptionError, match="starting offset can't be latest"):
        source_options({**SERVERS, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, streaming=False)
    with pytest.raises(OptionError, match="ending offset can't be earliest"):
        source_options({**SERVERS, "subscribe": "a", "endingOffsets": "earliest"}, streaming=False)


def test_sink_takes_the_topic_option_and_the_client_settings() -> None:
    options = sink_options({**SERVERS, "topic": "out", "kafka.linger.ms": "20"})
    assert (options.topic, options.client) == ("out", {"bootstrap.servers": "h:9092", "linger.ms": "20"})
    assert sink_options(SERVERS).topic is None


def test_sink_exactly_once_takes_a_ledger_topic_and_refuses_a_transactional_id() -> None:
    assert not sink_options(SERVERS).exactly_once
    options = sink_options({**SERVERS, "exactlyOnce": "true", "exactlyOnce.ledgerTopic": "commits"})
    assert (options.exactly_once, options.ledger_topic) == (True, "commits")
    assert sink_options({**SERVERS, "exactlyonce": "TRUE"}).ledger_topic == "minibroker-sink-ledger"
    with pytest.raises(OptionError, match=r"kafka\.transactional\.id"):
        sink_options({**SERVERS, "exactlyOnce": "true", "kafka.transactional.id": "mine"})
    with pytest.raises(OptionError, match="exactlyOnce"):
        sink_options({**SERVERS, "exactlyOnce": "yes"})
