"""`minibroker console-producer`: Kafka's kafka-console-producer.sh, standard input lines to records.

    minibroker console-producer --topic T (--bootstrap-server H:P | --broker-list H:P | --data-dir D)
        [--property parse.key=true --property key.separator=:] [--property parse.headers=true ...]
        [--producer-property acks=all ...] [--compression-codec snappy] [--request-required-acks all]
        [--message-send-max-retries 3] [--sync]

Each line is one record (LineMessageReader): its value, or with parse.key=true
its key and value split at the first key.separator (a tab by default); with
parse.headers=true the line starts with headers (`h1:v1,h2:v2`, then
headers.delimiter, a tab by default). The producer is Kafka 3's: acks=all and
idempotent, giving up on a record after --message-send-max-retries retries.
At end of input every record is flushed. A record that fails is reported on
stderr, as Kafka's ErrorLoggingCallback does, and the exit code is 1 if any
failed. Ctrl-C flushes for at most request.timeout.ms, says on stderr how many
records were not acknowledged, and exits with 130 (128 + SIGINT).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from client import FutureRecordMetadata, KafkaError, Producer
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_kwargs,
    client_security,
    load_config_file,
    parse_key_values,
)

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
EXIT_INTERRUPTED = 128 + signal.SIGINT


class LineFormatError(Exception):
    """A line the reader cannot split (Kafka's "No key separator found on line number N")."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("console-producer", help="send standard input lines as records",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    parser.add_argument("--broker-list", dest="bootstrap_server", metavar="HOST:PORT[,HOST:PORT]",
                        help="The old name of --bootstrap-server (Kafka's console producer before 2.5).")
    parser.add_argument("--topic", required=True, help="The topic to produce messages to.")
    parser.add_argument("--property", action="append", default=[], metavar="PROP=VALUE",
                        help="Line reader properties: parse.key (false), key.separator (a tab), parse.headers"
                             " (false), headers.delimiter (a tab), headers.separator (','), headers.key.separator"
                             " (':'), null.marker (none), ignore.error (false).")
    parser.add_argument("--producer-property", action="append", default=[], metavar="PROP=VALUE",
                        help="A producer config, Kafka's name (acks=all, linger.ms=5, ...); repeatable.")
    parser.add_argument("--producer.config", dest="producer_config", type=Path, metavar="FILE",
                        help="Producer config properties file; --producer-property wins over it.")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", choices=_CODECS,
                        help="Compression codec: none, gzip, snappy, lz4 or zstd; gzip if given without a value.")
    parser.add_argument("--request-required-acks", metavar="ACKS",
                        help="The acks the producer asks for: 0, 1 or all (default all, as in Kafka 3).")
    parser.add_argument("--message-send-max-retries", type=int, metavar="N",
                        help="retries: how often a failed send is retried before the record is given up (default 3).")
    parser.add_argument("--timeout", type=int, metavar="MS",
                        help="linger.ms: how long a record may wait for more to share its batch (default 1000).")
    parser.add_argument("--request-timeout-ms", type=int, metavar="MS",
                        help="How long the producer waits for a broker's answer (default 1500).")
    parser.add_argument("--sync", action="store_true", help="Wait for each record's acknowledgement before the next.")
    parser.set_defaults(func=run)


def producer_props(args: argparse.Namespace) -> dict[str, str]:
    """ConsoleProducer.producerProps: the file, then --producer-property, then the options given explicitly;
    an option left out fills its key only if nothing else set it (CommandLineUtils.maybeMergeOptions)."""
    props = load_config_file(args.producer_config) | parse_key_values(args.producer_property)
    props.setdefault("client.id", "console-producer")
    for key, value, default in (
        ("acks", args.request_required_acks, "-1"),
        ("retries", args.message_send_max_retries, 3),
        ("linger.ms", args.timeout, 1000),
        ("request.timeout.ms", args.request_timeout_ms, 1500),
        ("compression.type", args.compression_codec, None),
    ):
        if value is not None:
            props[key] = str(value)
        elif default is not None:
            props.setdefault(key, str(default))
    return props


def run(args: argparse.Namespace) -> int:
    try:
        reader = LineMessageReader(parse_key_values(args.property))
        props = producer_props(args)
        kwargs = client_kwargs(Producer, props)
        # The producer's delivery.timeout.ms must cover linger.ms + request.timeout.ms (Kafka's rule too).
        kwargs.setdefault("delivery_timeout_ms", max(120000, kwargs["linger_ms"] + kwargs["request_timeout_ms"]))
        producer = Producer(bootstrap_servers(args, props), **kwargs,
                            channel_factory=client_security(args, props).channel_factory)
    except (UsageError, ValueError) as e:
        print(f"minibroker console-producer: {e}", file=sys.stderr)
        return 1
    outcomes = _Outcomes(args.topic)
    interrupted = False
    try:
        try:
            _produce(producer, reader, args, outcomes)
        except LineFormatError as e:
            print(f"ERROR {e}", file=sys.stderr)
            outcomes.failed += 1
        producer.close()  # every record: acknowledged, or failed after its retries or delivery.timeout.ms
    except KeyboardInterrupt:
        interrupted = True
    if not interrupted:
        return 1 if outcomes.failed else 0
    # Ctrl-C (while reading or while closing): flush for one more answer's worth at most; a second Ctrl-C
    # must not cut that short and lose the count.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    timeout_ms = kwargs["request_timeout_ms"]
    producer.close(timeout=timeout_ms / 1000)
    unacknowledged = outcomes.sent - outcomes.acknowledged
    if unacknowledged:
        print(f"ERROR {unacknowledged} of {outcomes.sent} records sent were not acknowledged: interrupted, the"
              f" producer was closed after request.timeout.ms ({timeout_ms} ms)", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _produce(producer: Producer, reader: LineMessageReader, args: argparse.Namespace, outcomes: _Outcomes) -> None:
    prompt = sys.stdin.isatty()
    if prompt:
        print(">", end="", flush=True)
    for record in reader.read(sys.stdin.buffer):
        outcomes.sent += 1
        future = producer.send(args.topic, value=record.value, key=record.key, headers=record.headers,
                               callback=outcomes.done)
        if args.sync:
            _wait(future)
        if prompt:
            print(">", end="", flush=True)


def _wait(future: FutureRecordMetadata) -> None:
    # The callback reports a failure; --sync only has to wait for it.
    try:
        future.get()
    except KafkaError:
        pass


class LineRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class LineMessageReader:
    """Kafka's LineMessageReader: one record per line, headers and key split off with parse.headers/parse.key.

    Lines are UTF-8 as in Kafka; bytes that are not pass through unchanged (surrogateescape).
    """

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        self.parse_key = flag("parse.key")
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = flag("parse.headers")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = flag("ignore.error")
        self.null_marker = props.get("null.marker")
        try:
            self._headers_pattern = re.compile(self.headers_separator)  # a regular expression, as in Kafka
        except re.error as e:
            raise UsageError(f"headers.separator {self.headers_separator!r} is not a regular expression: {e}") from None
        for (a, a_name), (b, b_name) in (
            ((self.headers_delimiter, "headers.delimiter"), (self.headers_separator, "headers.separator")),
            ((self.headers_delimiter, "headers.delimiter"), (self.headers_key_separator, "headers.key.separator")),
            ((self.headers_separator, "headers.separator"), (self.headers_key_separator, "headers.key.separator")),
            ((self.null_marker, "null.marker"), (self.key_separator, "key.separator")),
            ((self.null_marker, "null.marker"), (self.headers_separator, "headers.separator")),
            ((self.null_marker, "null.marker"), (self.headers_delimiter, "headers.delimiter")),
            ((self.null_marker, "null.marker"), (self.headers_key_separator, "headers.key.separator")),
        ):
            if a == b:
                raise UsageError(f"{a_name} and {b_name} may not be equal")

    def read(self, stream: BinaryIO) -> Iterator[LineRecord]:
        for line_number, raw in enumerate(stream, start=1):
            line = raw.rstrip(b"\n").removesuffix(b"\r").decode(errors="surrogateescape")
            headers = self._part(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", line_number)
            start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
            key = self._part(self.parse_key, line, start, self.key_separator, "key separator", line_number)
            if key is not None:
                start += len(key) + len(self.key_separator)
            parsed_headers = [] if headers is None or headers == self.null_marker else \
                self._split_headers(headers, line_number)
            yield LineRecord(self._bytes(key), self._bytes(line[start:]), parsed_headers)

    def _part(self, enabled: bool, line: str, start: int, separator: str, name: str, line_number: int) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index >= 0:
            return line[start:index]
        if self.ignore_error:
            return None
        raise LineFormatError(f"No {name} found on line number {line_number}: '{line}'")

    def _split_headers(self, headers: str, line_number: int) -> list[tuple[str, bytes | None]]:
        parsed: list[tuple[str, bytes | None]] = []
        for pair in self._headers_pattern.split(headers):
            key, separator, value = pair.partition(self.headers_key_separator)
            if not separator:
                if not self.ignore_error:
                    raise LineFormatError(f"No header key separator found in pair '{pair}' on line number"
                                          f" {line_number}")
                parsed.append((pair, None))
            elif key == self.null_marker:
                raise LineFormatError(f"Header keys should not be equal to the null marker '{self.null_marker}'"
                                      " as they can't be null")
            else:
                parsed.append((key, self._bytes(value)))
        return parsed

    def _bytes(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode(errors="surrogateescape")


class _Outcomes:
    """Counts what was sent and acknowledged; logs each failed record as Kafka's ErrorLoggingCallback does,
    on the producer's I/O thread."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.sent = 0
        self.acknowledged = 0
        self.failed = 0
        self._lock = threading.Lock()

    def done(self, future: FutureRecordMetadata) -> None:
        error = future.exception(0)
        with self._lock:
            if error is None:
                self.acknowledged += 1
                return
            self.failed += 1
            key_text = "null" if future.key_size < 0 else f"{future.key_size} bytes"
            print(f"ERROR Error when sending message to topic {self.topic} with key: {key_text},"
                  f" value: {max(future.value_size, 0)} bytes with error: {error}", file=sys.stderr, flush=True)
