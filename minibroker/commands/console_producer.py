"""`minibroker console-producer`: Kafka's kafka-console-producer.sh, standard input lines to records.

    minibroker console-producer --topic T (--bootstrap-server H:P | --data-dir D)
        [--property parse.key=true --property key.separator=:] [--producer-property acks=all ...]
        [--compression-codec lz4] [--request-required-acks all] [--sync]

Each line is one record (LineMessageReader): its value, or with
parse.key=true its key and value split at the first key.separator (a tab by
default). At end of input every record is flushed. A record that fails is
reported on stderr, as Kafka's ErrorLoggingCallback does, and the exit code
is 1 if any failed.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from client import FutureRecordMetadata, KafkaError, Producer
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    bootstrap_servers,
    client_kwargs,
    load_config_file,
    parse_key_values,
)

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class LineFormatError(Exception):
    """A line without the key separator while parse.key=true (Kafka's "No key found on line N")."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("console-producer", help="send standard input lines as records",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    parser.add_argument("--topic", required=True, help="The topic to produce messages to.")
    parser.add_argument("--property", action="append", default=[], metavar="PROP=VALUE",
                        help="Line reader properties: parse.key (false), key.separator (a tab), ignore.error (false).")
    parser.add_argument("--producer-property", action="append", default=[], metavar="PROP=VALUE",
                        help="A producer config, Kafka's name (acks=all, linger.ms=5, ...); repeatable.")
    parser.add_argument("--producer.config", dest="producer_config", type=Path, metavar="FILE",
                        help="Producer config properties file; --producer-property wins over it.")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", choices=_CODECS,
                        help="Compression codec: none, gzip, snappy, lz4 or zstd; gzip if given without a value.")
    parser.add_argument("--request-required-acks", metavar="ACKS",
                        help="The acks the producer asks for: 0, 1 or all (default 1).")
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
        ("acks", args.request_required_acks, "1"),
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
        producer = Producer(bootstrap_servers(args, props), **kwargs)
    except (UsageError, ValueError) as e:
        print(f"minibroker console-producer: {e}", file=sys.stderr)
        return 1
    errors = _ErrorLogger(args.topic)
    try:
        if sys.stdin.isatty():
            print(">", end="", flush=True)
        for key, value in reader.read(sys.stdin.buffer):
            future = producer.send(args.topic, value=value, key=key)
            future.add_errback(errors.log, key, value)
            if args.sync:
                _wait(future)
            if sys.stdin.isatty():
                print(">", end="", flush=True)
    except LineFormatError as e:
        print(f"ERROR {e}", file=sys.stderr)
        errors.failed += 1
    finally:
        producer.close()
    return 1 if errors.failed else 0


def _wait(future: FutureRecordMetadata) -> None:
    # The errback reports a failure; --sync only has to wait for it.
    try:
        future.get()
    except KafkaError:
        pass


class LineMessageReader:
    """Kafka's ConsoleProducer.LineMessageReader: one record per line, the key split off with parse.key."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.key_separator = props.get("key.separator", "\t").encode()
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"

    def read(self, stream: BinaryIO) -> Iterator[tuple[bytes | None, bytes]]:
        for line_number, raw in enumerate(stream, start=1):
            line = raw.rstrip(b"\n").removesuffix(b"\r")
            if not self.parse_key:
                yield None, line
                continue
            key, sep, value = line.partition(self.key_separator)
            if sep:
                yield key, value
            elif self.ignore_error:
                yield None, line
            else:
                raise LineFormatError(f"No key found on line {line_number}: {line.decode(errors='replace')}")


class _ErrorLogger:
    """Kafka's ErrorLoggingCallback: one line per failed record, on the producer's I/O thread."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.failed = 0
        self._lock = threading.Lock()

    def log(self, key: bytes | None, value: bytes, error: Exception) -> None:
        key_text = "null" if key is None else f"{len(key)} bytes"
        with self._lock:
            self.failed += 1
            print(f"ERROR Error when sending message to topic {self.topic} with key: {key_text},"
                  f" value: {len(value)} bytes with error: {error}", file=sys.stderr, flush=True)
