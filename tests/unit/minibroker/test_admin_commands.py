"""The admin commands' input parsing: Kafka's offset JSON (kafka-delete-records.sh) and GetOffsetShell's --time
and --partitions, each bad input refused with the tool's message."""

from __future__ import annotations

import pytest

from minibroker.commands.delete_records import AdminCommandFailedError, parse_offset_json
from minibroker.commands.get_offsets import TerseError, parse_partitions, parse_time
from proto.types import TopicPartition


def test_offset_json_in_kafkas_format() -> None:
    text = '{"partitions":[{"topic":"t","partition":0,"offset":10},{"topic":"t","partition":1,"offset":-1}]}'
    assert parse_offset_json(text) == [(TopicPartition("t", 0), 10), (TopicPartition("t", 1), -1)]


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "The input string is not a valid JSON"),
    ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
    ('{"version":1}', "Missing partitions field"),
    ('{"partitions":[{"topic":"t","partition":0}]}', "it needs topic, partition and offset"),
    ('{"partitions":[{"topic":"t","partition":"0","offset":1}]}', "partition and offset are integers"),
    ('{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,"offset":2}]}',
     "Offset json file contains duplicate topic partitions: t-0"),
])
def test_bad_offset_json_is_refused(text: str, message: str) -> None:
    with pytest.raises(AdminCommandFailedError, match=message):
        parse_offset_json(text)


def test_get_offsets_times_and_partitions() -> None:
    assert [parse_time(t) for t in ("latest", "-1", "earliest", "-2", "1700000000000")] == \
        [-1, -1, -2, -2, 1700000000000]
    assert parse_partitions("0,2") == {0, 2} and parse_partitions(None) == set()
    for bad in ("-3", "yesterday"):
        with pytest.raises(TerseError, match=f"Malformed time argument {bad}"):
            parse_time(bad)
    with pytest.raises(TerseError, match="--partitions expects a comma separated list of numeric partition ids"):
        parse_partitions("0,one")
