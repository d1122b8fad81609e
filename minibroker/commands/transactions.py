"""`minibroker transactions`: Kafka's kafka-transactions.sh (KIP-664), through the brokers' Kafka listeners.

    minibroker transactions (--bootstrap-server H:P | --data-dir D) [--command-config FILE]
        describe-producers --topic T --partition P [--broker-id N]

describe-producers prints the active producers of a partition as its leader's replica (or, with --broker-id,
that broker's replica) knows them, in Kafka's columns: ProducerId, ProducerEpoch, LatestCoordinatorEpoch (-1
before any marker), LastSequence, LastTimestamp and CurrentTransactionStartOffset (None without an open
transaction). It needs Read on the topic. The verbs that ask a transaction coordinator (list, describe,
find-hanging, abort) join COMMANDS when the coordinator is built.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO, Any, Protocol

from minibroker.commands.client_options import UsageError, add_cluster_options
from minibroker.commands.kafka_admin import kafka_error, kafka_listeners, open_kafka_admin
from proto.errors import KafkaError


class CommandFailedError(Exception):
    """What Kafka's tool prints before exiting 1 (printErrorAndExit)."""


class TransactionsCommand(Protocol):
    """A verb of kafka-transactions.sh (Kafka's TransactionsCommand)."""

    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        """Print the verb's answer to `out` with kafka-python's KafkaAdminClient `admin`; CommandFailedError else."""


class DescribeProducersCommand:
    name = "describe-producers"
    help = "describe the states of active producers for a topic partition"
    HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
               "CurrentTransactionStartOffset")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--broker-id", type=int,
                            help="optional broker id to describe the producer state on a specific replica")
        parser.add_argument("--topic", required=True, help="topic name")
        parser.add_argument("--partition", type=int, required=True, help="partition number")

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        from kafka import TopicPartition as KpTopicPartition
        from kafka.errors import KafkaError as KpError

        tp = KpTopicPartition(args.topic, args.partition)
        try:
            state = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
        except KpError as e:
            on = "leader" if args.broker_id is None else f"broker {args.broker_id}"
            raise CommandFailedError(f"Failed to describe producers for partition {args.topic}-{args.partition} on"
                                     f" {on}: {kafka_error(e)}. Enable debug logging for additional detail.") from None
        pretty_print_table(self.HEADERS, [producer_row(p) for p in state.active_producers], out)


def producer_row(producer: Any) -> list[str]:
    """A producer's row as Kafka's tool prints it: a negative coordinator epoch is -1 (none), a negative
    transaction start offset None (no open transaction)."""
    start = producer.current_transaction_start_offset
    return [str(producer.producer_id), str(producer.producer_epoch), str(max(producer.coordinator_epoch, -1)),
            str(producer.last_sequence), str(producer.last_timestamp), "None" if start < 0 else str(start)]


def pretty_print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str]) -> None:
    """Kafka's TransactionsCommand.prettyPrintTable: each column padded to its widest value, each followed by a
    tab."""
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]
    for row in (headers, *rows):
        out.write("".join(value.ljust(width) + "\t" for value, width in zip(row, widths, strict=True)) + "\n")


COMMANDS: tuple[TransactionsCommand, ...] = (DescribeProducersCommand(),)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "transactions", help="analyze the transactional state of producers (kafka-transactions.sh)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    verbs = parser.add_subparsers(dest="transactions_command", metavar="COMMAND", required=True, title="commands")
    for command in COMMANDS:
        verb = verbs.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(verb)
        verb.set_defaults(transactions_verb=command)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        admin = open_kafka_admin(args, kafka_listeners(args), "minibroker-transactions")
    except UsageError as e:
        print(f"minibroker transactions: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:  # no broker answered
        print(f"minibroker transactions: {e.message}", file=sys.stderr)
        return 1
    try:
        args.transactions_verb.execute(admin, args, sys.stdout)
    except CommandFailedError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        admin.close()
    return 0
