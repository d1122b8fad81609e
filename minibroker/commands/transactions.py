"""`minibroker transactions`: Kafka's kafka-transactions.sh (KIP-664), through the brokers' Kafka listeners.

    minibroker transactions (--bootstrap-server H:P | --data-dir D) [--command-config FILE]
        list
        describe --transactional-id ID
        describe-producers --topic T --partition P [--broker-id N]
        find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MINUTES]
        abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E --coordinator-epoch C)

list asks every broker's transaction coordinator for the ids it holds (ListTransactions): TransactionalId,
Coordinator, ProducerId, TransactionState. describe asks the id's coordinator (DescribeTransactions):
CoordinatorId, TransactionalId, ProducerId, ProducerEpoch, TransactionState, TransactionTimeoutMs,
CurrentTransactionStartTimeMs, TransactionDurationMs, TopicPartitions. Both show only the ids the caller may
Describe.

describe-producers prints the active producers of a partition as its leader's replica (or, with --broker-id,
that broker's replica) knows them, in Kafka's columns: ProducerId, ProducerEpoch, LatestCoordinatorEpoch (-1
before any marker), LastSequence, LastTimestamp and CurrentTransactionStartOffset (None without an open
transaction). It needs Read on the topic.

find-hanging looks for transactions a partition holds open but no coordinator will ever finish: the open
transactions (DescribeProducers) of the broker's partitions (or the topic's) whose last write is older than
--max-transaction-timeout (15 minutes), then, per producer id, its transactional id (ListTransactions) and
state (DescribeTransactions). A transaction is hanging when no coordinator knows its producer id, or its
transaction no longer includes the partition. Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch,
StartOffset, LastTimestamp, Duration(min).

abort writes an ABORT marker for one producer to one partition (WriteTxnMarkers to the partition's leader, as
AdminClient.abortTransaction does; ClusterAction on the cluster), so the last stable offset moves past the
hanging transaction. --start-offset names it by its first offset (its producer looked up with
DescribeProducers); the producer's id, epoch and coordinator epoch name it directly.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
            raise failed(f"Failed to describe producers for partition {args.topic}-{args.partition} on {on}",
                         e) from None
        pretty_print_table(self.HEADERS, [producer_row(p) for p in state.active_producers], out)


class ListTransactionsCommand:
    name = "list"
    help = "list transactions"
    HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        from kafka.errors import KafkaError as KpError

        try:
            by_broker = admin.list_transactions()
        except KpError as e:
            raise failed("Failed to list transactions", e) from None
        pretty_print_table(self.HEADERS, [
            [listing.transactional_id, str(broker), str(listing.producer_id), listing.state.value]
            for broker, listings in sorted(by_broker.items()) for listing in listings], out)


class DescribeTransactionsCommand:
    name = "describe"
    help = "describe the state of an active transactional-id"
    HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
               "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")

    def __init__(self, time_ms: Callable[[], int]) -> None:
        self._time_ms = time_ms

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--transactional-id", required=True, help="transactional id")

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        from kafka.errors import KafkaError as KpError

        try:
            txn = admin.describe_transactions([args.transactional_id])[args.transactional_id]
        except KpError as e:
            raise failed(f"Failed to describe transaction state of transactional-id `{args.transactional_id}`",
                         e) from None
        pretty_print_table(self.HEADERS, [describe_row(args.transactional_id, txn, self._time_ms())], out)


def describe_row(transactional_id: str, txn: Any, now_ms: int) -> list[str]:
    """Kafka's row: a transaction that never started (start time -1) has None for its start and duration."""
    start = txn.transaction_start_time_ms
    return [str(txn.coordinator_id), transactional_id, str(txn.producer_id), str(txn.producer_epoch),
            txn.state.value, str(txn.transaction_timeout_ms), "None" if start < 0 else str(start),
            "None" if start < 0 else str(now_ms - start),
            ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(txn.topic_partitions))]


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A producer's open transaction on one partition, as DescribeProducers shows it."""

    topic: str
    partition: int
    producer: Any  # kafka-python's ProducerState


def candidate_open_transactions(producers: Mapping[Any, Any], now_ms: int,
                                max_transaction_timeout_ms: int) -> list[OpenTransaction]:
    """Kafka's collectCandidateOpenTransactions: the open transactions whose producer last wrote longer ago than
    the longest transaction timeout (a younger one may still be finished by its coordinator)."""
    return [OpenTransaction(tp.topic, tp.partition, producer)
            for tp, state in producers.items() for producer in state.active_producers
            if producer.current_transaction_start_offset >= 0
            and now_ms - producer.last_timestamp > max_transaction_timeout_ms]


def hanging_transactions(candidates: Iterable[OpenTransaction], transactional_ids: Mapping[int, str],
                         descriptions: Mapping[str, Any]) -> list[OpenTransaction]:
    """Kafka's filterHangingTransactions: an open transaction hangs when no coordinator knows its producer id,
    its id is not found, or its coordinator's transaction no longer holds the partition (whose marker the
    coordinator would otherwise still write)."""
    hanging = []
    for txn in candidates:
        transactional_id = transactional_ids.get(txn.producer.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None or not any(tp.topic == txn.topic and tp.partition == txn.partition
                                          for tp in description.topic_partitions):
            hanging.append(txn)
    return hanging


class FindHangingTransactionsCommand:
    name = "find-hanging"
    help = "find hanging transactions"
    HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
               "LastTimestamp", "Duration(min)")

    def __init__(self, time_ms: Callable[[], int]) -> None:
        self._time_ms = time_ms

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
        parser.add_argument("--max-transaction-timeout", type=int, default=15,
                            help="maximum transaction timeout in minutes to limit the scope of the search")
        parser.add_argument("--topic", help="topic name to limit search to")
        parser.add_argument("--partition", type=int, help="partition number")

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        if args.topic is None and args.broker_id is None:
            raise CommandFailedError("The `find-hanging` command requires either --topic or --broker-id to limit"
                                     " the scope of the search")
        if args.partition is not None and args.topic is None:
            raise CommandFailedError("The --partition argument requires --topic to be provided")
        partitions = self._partitions_to_search(admin, args)
        candidates = self._candidates(admin, args, partitions)
        producer_ids = {txn.producer.producer_id for txn in candidates}
        transactional_ids = self._transactional_ids(admin, producer_ids) if candidates else {}
        descriptions = {tid: self._describe(admin, tid) for tid in set(transactional_ids.values())}
        now = self._time_ms()
        pretty_print_table(self.HEADERS, [
            [txn.topic, str(txn.partition), str(txn.producer.producer_id), str(txn.producer.producer_epoch),
             str(max(txn.producer.coordinator_epoch, -1)), str(txn.producer.current_transaction_start_offset),
             str(txn.producer.last_timestamp), str((now - txn.producer.last_timestamp) // 60_000)]
            for txn in hanging_transactions(candidates, transactional_ids, descriptions)], out)

    @staticmethod
    def _partitions_to_search(admin: Any, args: argparse.Namespace) -> list[Any]:
        from kafka import TopicPartition as KpTopicPartition
        from kafka.errors import KafkaError as KpError

        if args.partition is not None:
            return [KpTopicPartition(args.topic, args.partition)]
        try:
            topics = [args.topic] if args.topic is not None else admin.list_topics()
            described = admin.describe_topics(topics)
        except KpError as e:
            raise failed("Failed to describe topics", e) from None
        return [KpTopicPartition(topic["name"], p["partition_index"])
                for topic in described for p in topic["partitions"]
                if args.broker_id is None or args.broker_id in p["replica_nodes"]]

    def _candidates(self, admin: Any, args: argparse.Namespace, partitions: list[Any]) -> list[OpenTransaction]:
        from kafka.errors import KafkaError as KpError

        if not partitions:
            return []
        try:
            producers = admin.describe_producers(partitions, broker_id=args.broker_id)
        except KpError as e:
            raise failed(f"Failed to describe producers for {len(partitions)} partitions on broker"
                         f" {args.broker_id}", e) from None
        return candidate_open_transactions(producers, self._time_ms(), args.max_transaction_timeout * 60_000)

    @staticmethod
    def _transactional_ids(admin: Any, producer_ids: set[int]) -> dict[int, str]:
        from kafka.errors import KafkaError as KpError

        try:
            by_broker = admin.list_transactions(producer_id_filters=sorted(producer_ids))
        except KpError as e:
            raise failed(f"Failed to list transactions for {len(producer_ids)} producers", e) from None
        return {listing.producer_id: listing.transactional_id for listings in by_broker.values()
                for listing in listings if listing.producer_id in producer_ids}

    @staticmethod
    def _describe(admin: Any, transactional_id: str) -> Any:
        """The id's description, None when its coordinator does not know it (Kafka's tool: hanging)."""
        from kafka.errors import KafkaError as KpError
        from kafka.errors import TransactionalIdNotFoundError

        try:
            return admin.describe_transactions([transactional_id])[transactional_id]
        except TransactionalIdNotFoundError:
            return None
        except KpError as e:
            raise failed("Failed to describe 1 transactions", e) from None


class AbortTransactionCommand:
    name = "abort"
    help = "abort a hanging transaction (requires administrative privileges)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--topic", required=True, help="topic name")
        parser.add_argument("--partition", type=int, required=True, help="partition number")
        newer = parser.add_argument_group(
            "Brokers on versions 3.0 and above",
            "For newer brokers, only the start offset of the transaction to be aborted is required")
        newer.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
        older = parser.add_argument_group("Brokers on versions older than 3.0",
                                          "For older brokers, you must provide all of these arguments")
        older.add_argument("--producer-id", type=int, help="producer id")
        older.add_argument("--producer-epoch", type=int, help="producer epoch")
        older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    def execute(self, admin: Any, args: argparse.Namespace, out: IO[str]) -> None:
        from kafka.admin import AbortTransactionSpec
        from kafka.errors import KafkaError as KpError

        if args.start_offset is None and args.producer_id is None:
            raise CommandFailedError("The transaction to abort must be identified either with --start-offset (for"
                                     " brokers on 3.0 or above) or with --producer-id, --producer-epoch, and"
                                     " --coordinator-epoch (for older brokers)")
        if args.start_offset is None:
            if args.producer_epoch is None:
                raise CommandFailedError("Missing required argument --producer-epoch")
            if args.coordinator_epoch is None:
                raise CommandFailedError("Missing required argument --coordinator-epoch")
            producer_id, producer_epoch = args.producer_id, args.producer_epoch
            # A transaction hanging before its producer's first marker shows coordinator epoch -1; 0 is at most any
            # leader epoch, as Kafka's tool reasons.
            coordinator_epoch = max(args.coordinator_epoch, 0)
        else:
            producer_id, producer_epoch, coordinator_epoch = self._open_at(admin, args)
        spec = AbortTransactionSpec(self._tp(args), producer_id, producer_epoch, coordinator_epoch)
        try:
            admin.abort_transaction(spec)
        except KpError as e:
            raise failed(f"Failed to abort transaction AbortTransactionSpec(topicPartition={args.topic}-"
                         f"{args.partition}, producerId={producer_id}, producerEpoch={producer_epoch},"
                         f" coordinatorEpoch={coordinator_epoch})", e) from None

    @staticmethod
    def _tp(args: argparse.Namespace) -> Any:
        from kafka import TopicPartition as KpTopicPartition

        return KpTopicPartition(args.topic, args.partition)

    def _open_at(self, admin: Any, args: argparse.Namespace) -> tuple[int, int, int]:
        """The producer whose open transaction starts at --start-offset (Kafka's buildAbortSpec)."""
        from kafka.errors import KafkaError as KpError

        tp = self._tp(args)
        try:
            state = admin.describe_producers([tp])[tp]
        except KpError as e:
            raise failed(f"Failed to validate producer state for partition {args.topic}-{args.partition}",
                         e) from None
        for producer in state.active_producers:
            if producer.current_transaction_start_offset == args.start_offset:
                return producer.producer_id, producer.producer_epoch, max(producer.coordinator_epoch, 0)
        raise CommandFailedError(f"Could not find any open transactions starting at offset {args.start_offset} on"
                                 f" partition {args.topic}-{args.partition}")


def failed(message: str, error: Any) -> CommandFailedError:
    """Kafka's printErrorAndExit(message, cause)."""
    return CommandFailedError(f"{message}: {kafka_error(error)}. Enable debug logging for additional detail.")


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


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# Kafka's order of the verbs.
COMMANDS: tuple[TransactionsCommand, ...] = (
    ListTransactionsCommand(), DescribeTransactionsCommand(wall_clock_ms), DescribeProducersCommand(),
    AbortTransactionCommand(), FindHangingTransactionsCommand(wall_clock_ms))


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
