"""The console producer's and consumer's pure parts: Kafka's LineMessageReader, the option merging, configs."""

from __future__ import annotations

import argparse
import io

import pytest

from client import Producer
from minibroker.commands import console_consumer, console_producer
from minibroker.commands.client_options import UsageError, client_kwargs
from minibroker.commands.console_producer import LineFormatError, LineMessageReader, LineRecord


def read(text: str, **props: str) -> list[LineRecord]:
    return list(LineMessageReader(props).read(io.BytesIO(text.encode())))


def test_values_only_by_default() -> None:
    assert read("a\tb\nc:d\r\n") == [LineRecord(None, b"a\tb", []), LineRecord(None, b"c:d", [])]


def test_parse_headers_and_key_as_kafka() -> None:
    props = {"parse.headers": "true", "parse.key": "true"}
    assert read("h1:v1,h2:v2\tk\tvalue\n", **props) == [
        LineRecord(b"k", b"value", [("h1", b"v1"), ("h2", b"v2")])]
    # Custom separators; headers.separator is a regular expression, as in Kafka; null.marker makes nulls.
    custom = {"parse.headers": "true", "parse.key": "true", "headers.delimiter": "|", "headers.separator": "[;&]",
              "headers.key.separator": "=", "key.separator": "#", "null.marker": "NULL"}
    assert read("a=1;b=NULL&c=3|NULL#v\n", **custom) == [
        LineRecord(None, b"v", [("a", b"1"), ("b", None), ("c", b"3")])]
    # The header text no longer becomes the key.
    assert read("trace:t1\tv\n", **{"parse.headers": "true"}) == [LineRecord(None, b"v", [("trace", b"t1")])]


@pytest.mark.parametrize(("line", "props", "message"), [
    ("no delimiter here", {"parse.headers": "true"}, "No headers delimiter found on line number 1"),
    ("h:1\tno key", {"parse.headers": "true", "parse.key": "true"}, "No key separator found on line number 1"),
    ("nosep\tv", {"parse.headers": "true"}, "No header key separator found in pair 'nosep' on line number 1"),
])
def test_malformed_lines_are_named(line: str, props: dict[str, str], message: str) -> None:
    with pytest.raises(LineFormatError) as err:
        read(line + "\n", **props)
    assert str(err.value).startswith(message)


def test_ignore_error_keeps_going() -> None:
    assert read("just a value\n", **{"parse.key": "true", "ignore.error": "true"}) == [
        LineRecord(None, b"just a value", [])]


def test_equal_separators_are_refused() -> None:
    with pytest.raises(UsageError, match=r"headers.delimiter and headers.separator may not be equal"):
        LineMessageReader({"headers.delimiter": ",", "headers.separator": ","})


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    console_producer.register(parser.add_subparsers())
    return parser.parse_args(["console-producer", "--topic", "t", *argv])


def test_console_producer_defaults_are_kafka_3s() -> None:
    props = console_producer.producer_props(args("--broker-list", "h:1"))
    assert (props["acks"], props["retries"], props["request.timeout.ms"]) == ("-1", "3", "1500")
    producer_args = args("--broker-list", "h:1", "--message-send-max-retries", "7", "--request-required-acks", "1")
    assert producer_args.bootstrap_server == "h:1"
    explicit = console_producer.producer_props(producer_args)
    assert (explicit["acks"], explicit["retries"]) == ("1", "7")


def test_unknown_client_config_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    kwargs = client_kwargs(Producer, {"foo": "bar", "acks": "1", "linger.ms": "5"})
    assert kwargs == {"acks": "1", "linger_ms": 5}
    assert capsys.readouterr().err == "WARN The configuration 'foo' was supplied but isn't a known config.\n"
    with pytest.raises(UsageError, match=r"Invalid value x for configuration linger.ms"):
        client_kwargs(Producer, {"linger.ms": "x"})


def test_console_consumer_refuses_what_cannot_work(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    console_consumer.register(parser.add_subparsers())
    for argv, message in (
        (["--include", "orders.(", "--bootstrap-server", "h:1"], "--include 'orders.(' is not a regular expression"),
        (["--include", "o.*", "--partition", "0", "--bootstrap-server", "h:1"],
         "The topic is required when partition is specified."),
        (["--topic", "t", "--formatter", "kafka.tools.LoggingMessageFormatter", "--bootstrap-server", "h:1"],
         "formatter kafka.tools.LoggingMessageFormatter is not available"),
    ):
        assert console_consumer.run(parser.parse_args(["console-consumer", *argv])) == 1
        assert message in capsys.readouterr().err


def test_console_consumer_isolation_level_is_kafkas_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    console_consumer.register(parser.add_subparsers())

    def props(*argv: str) -> dict[str, str]:
        return console_consumer.consumer_props(parser.parse_args(["console-consumer", "--topic", "t", *argv]))

    assert "isolation.level" not in props()  # the consumer's default, read_uncommitted
    assert props("--isolation-level", "read_committed")["isolation.level"] == "read_committed"
    # Given, the flag wins over a consumer property (Kafka's maybeMergeOptions).
    assert props("--consumer-property", "isolation.level=read_committed", "--isolation-level",
                 "read_uncommitted")["isolation.level"] == "read_uncommitted"
    assert console_consumer.run(parser.parse_args(
        ["console-consumer", "--topic", "t", "--bootstrap-server", "h:1", "--isolation-level", "committed"])) == 1
    assert ("Invalid value committed for configuration isolation.level: String must be one of: read_committed,"
            " read_uncommitted") in capsys.readouterr().err
