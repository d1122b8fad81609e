"""`minibroker delete-records`: Kafka's kafka-delete-records.sh (DeleteRecordsCommand).

    minibroker delete-records (--bootstrap-server H:P | --data-dir D) --offset-json-file F

F is Kafka's JSON, `{"partitions":[{"topic":"t","partition":0,"offset":10}],"version":1}`;
offset -1 means the partition's high watermark. Each partition's leader moves
its log start offset there and answers once every in-sync replica has; whole
segments below it are deleted, and consumers reading below it get
OFFSET_OUT_OF_RANGE. Output lines are Kafka's: `partition: t-0\tlow_watermark: 10`,
or `partition: t-0\terror: ...`; any error makes the exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from client import Admin, KafkaError, TopicPartition
from minibroker.commands.client_options import UsageError, add_cluster_options, bootstrap_servers, client_security

EARLIEST_VERSION = 1


class AdminCommandFailedError(Exception):
    """Kafka's AdminOperationException / AdminCommandFailedException."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("delete-records", help="delete records below offsets (kafka-delete-records.sh)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    parser.add_argument("--offset-json-file", required=True, type=Path, metavar="FILE",
                        help='REQUIRED: The JSON file with offset per partition. The format to use is:'
                             ' {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version":1}')
    parser.set_defaults(func=run)


def parse_offset_json(text: str) -> list[tuple[TopicPartition, int]]:
    """DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup, then the duplicate check."""
    try:
        data = json.loads(text)
    except ValueError:
        raise AdminCommandFailedError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise AdminCommandFailedError("The input string is not a valid JSON object")
    version = data.get("version", EARLIEST_VERSION)
    if version != 1:
        raise AdminCommandFailedError(f"Not supported version field value {version}")
    partitions = data.get("partitions")
    if not isinstance(partitions, list):
        raise AdminCommandFailedError("Missing partitions field")
    offsets = []
    for entry in partitions:
        try:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError):
            raise AdminCommandFailedError(f"Invalid partition entry {json.dumps(entry)}: it needs topic, partition"
                                          " and offset") from None
        if not isinstance(topic, str) or type(partition) is not int or type(offset) is not int:
            raise AdminCommandFailedError(f"Invalid partition entry {json.dumps(entry)}: topic is a string,"
                                          " partition and offset are integers")
        offsets.append((TopicPartition(topic, partition), offset))
    duplicates = [str(tp) for tp, count in Counter(tp for tp, _ in offsets).items() if count > 1]
    if duplicates:
        raise AdminCommandFailedError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return offsets


def run(args: argparse.Namespace) -> int:
    try:
        try:
            text = args.offset_json_file.read_text()
        except OSError as e:
            raise AdminCommandFailedError(f"cannot read {args.offset_json_file}: {e.strerror}") from None
        offsets = parse_offset_json(text)
        with Admin(bootstrap_servers(args), client_id="adminclient-delete-records",
                   channel_factory=client_security(args).channel_factory) as admin:
            print("Executing records delete operation")
            results = admin.try_delete_records(dict(offsets))
    except (AdminCommandFailedError, UsageError, KafkaError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    print("Records delete operation completed:")
    failed = False
    for tp, _ in offsets:
        result = results[tp]
        if isinstance(result, KafkaError):
            failed = True
            print(f"partition: {tp}\terror: {result}")
        else:
            print(f"partition: {tp}\tlow_watermark: {result}")
    return 1 if failed else 0
