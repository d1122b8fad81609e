"""A valid request of every version of every API, built with kio, the project's codec, generated from Kafka's own
JSON message schemas: it has a class for every version of every API the broker advertises.

Every field of the version's schema is filled: a value this module names for it (by field name, or a dotted
path's tail for the names that mean different things in different places), else the schema's default, else a
neutral value of its type. Every array of structs gets one element, so each nested field of the version is on
the wire and reaches the handler (a handler reading a field its version lacks fails on any non-empty request).
The values aim at a topic and a group the test set up, or at names nobody made where the request would change
the cluster (DeleteTopics, DeleteGroups), and ask validate_only where the API has it.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from typing import Any

from kio.index import load_request_schema
from kio.static.primitive import Records, i32Timedelta, i64Timedelta

from common.record import ProducerRecord, build_batch

TOPIC = "walk"
GROUP = "walk-group"
ABSENT = "walk-absent"
JOIN_GROUP_KEY = 11

# Values by field path tail; the longest matching tail wins ("configs.name" before "name").
_COMMON: dict[str, Any] = {
    "name": TOPIC,
    "topic": TOPIC,
    "topic_names": (TOPIC,),
    "partition_index": 0,
    "partition_indexes": (0,),
    "group_id": GROUP,
    "groups": (GROUP,),
    "key": GROUP,
    "member_id": "",
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "replica_id": -1,
    "current_leader_epoch": -1,
    "leader_epoch": 0,
    "committed_leader_epoch": -1,
    "timeout": datetime.timedelta(seconds=5),
    "timeout_ms": datetime.timedelta(seconds=5),
    "transactional_id": None,
    "validate_only": True,
    "session_timeout": datetime.timedelta(seconds=10),
    "rebalance_timeout": datetime.timedelta(seconds=10),
    "protocol_type": "consumer",
    "protocols.name": "range",
    "configs.name": "retention.ms",
    "configs.value": "604800000",
    "configuration_keys": None,
    "resource_type": 2,  # TOPIC
    "resource_name": TOPIC,
    "group_instance_id": None,
    "rack_id": "",
}

# Per API key, on top of _COMMON.
_BY_API: dict[int, dict[str, Any]] = {
    0: {"acks": 1},  # Produce: acks=0 has no answer to check
    1: {"max_wait": datetime.timedelta(0), "min_bytes": 0, "session_id": 0, "session_epoch": -1,
        "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20, "forgotten_topics_data": ()},
    2: {"timestamp": -1, "max_num_offsets": 1},  # ListOffsets: the latest offset
    3: {"allow_auto_topic_creation": False},
    8: {"retention_time": -1, "committed_offset": 0, "committed_metadata": ""},
    15: {"groups": (GROUP,)},
    16: {"states_filter": ()},
    17: {"mechanism": "PLAIN"},
    19: {"name": "walk-created", "num_partitions": 1, "replication_factor": 1, "assignments": ()},
    20: {"topic_names": (ABSENT,), "name": ABSENT},
    22: {"transaction_timeout": datetime.timedelta(minutes=1), "producer_id": -1, "producer_epoch": -1},
    23: {"replica_id": -1},
    # The transaction APIs: an id no coordinator holds yet (NOT_COORDINATOR), no producer.
    24: {"v3_and_below_transactional_id": "walk-txn", "v3_and_below_producer_id": -1,
         "v3_and_below_producer_epoch": -1, "partitions": (0,)},
    25: {"transactional_id": "walk-txn", "producer_id": -1, "producer_epoch": -1},
    26: {"transactional_id": "walk-txn", "producer_id": -1, "producer_epoch": -1, "committed": False},
    # TxnOffsetCommit: a producer's offsets, pending in the walk's group until a marker nobody sends.
    28: {"transactional_id": "walk-txn", "producer_id": 1000, "producer_epoch": 0, "committed_offset": 0,
         "committed_metadata": ""},
    65: {"transactional_ids": ("walk-txn",)},  # DescribeTransactions: NOT_COORDINATOR or a known id's state
    # The ACL APIs: a filter matching anything; a creation of one literal topic ACL.
    29: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
         "host_filter": None, "operation": 1, "permission_type": 1},
    30: {"resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3, "principal": "User:walk",
         "host": "*", "operation": 3, "permission_type": 3},
    31: {"resource_type_filter": 1, "resource_name_filter": ABSENT, "pattern_type_filter": 3,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
    36: {"auth_bytes": b"\x00walk\x00walk"},
    42: {"groups_names": (ABSENT,)},
    44: {"config_operation": 0},  # SET
    50: {"users": None},
    51: {"deletions.name": ABSENT, "upsertions.name": "walk-user", "mechanism": 1, "iterations": 8192,
         "salt": b"salt", "salted_password": b"x" * 32},
    18: {"client_software_name": "walk", "client_software_version": "1"},
}


def request(api_key: int, version: int) -> Any:
    """A kio request entity of this version, every field filled."""
    values = {**_COMMON, **_BY_API.get(api_key, {})}
    if api_key == JOIN_GROUP_KEY:
        # A group of its own per version: a new member of a group whose earlier joiner never rejoins would wait
        # out the rebalance timeout.
        values["group_id"] = f"{GROUP}-join-v{version}"
    return _fill(load_request_schema(api_key, version), (), values)


def _named(path: tuple[str, ...], values: dict[str, Any]) -> tuple[bool, Any]:
    for start in range(len(path)):
        tail = ".".join(path[start:])
        if tail in values:
            return True, values[tail]
    return False, None


def _fill(cls: type[Any], path: tuple[str, ...], values: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        here = (*path, f.name)
        found, value = _named(here, values)
        kwargs[f.name] = _value(hints[f.name], f, here, values, found, value)
    return cls(**kwargs)


def _value(hint: Any, f: dataclasses.Field[Any], path: tuple[str, ...], values: dict[str, Any], found: bool,
           value: Any) -> Any:
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        if dataclasses.is_dataclass(item):
            # A named value of a struct array can only empty it (forgotten_topics_data, assignments).
            return () if found and value == () else (_fill(item, path, values),)  # type: ignore[arg-type]
        return value if found else ()
    if hint is Records:
        return Records(build_batch([ProducerRecord(b"walked", b"k")]))
    if found:
        return _coerce(hint, value)
    if f.default is not dataclasses.MISSING:
        return f.default
    if optional:
        return None
    return _coerce(hint, _NEUTRAL.get(hint, 0))


_NEUTRAL: dict[Any, Any] = {str: "walk", bool: False, bytes: b""}


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if hint in (i32Timedelta, i64Timedelta):
        return hint.parse(value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value))
    if hint in (str, bool, bytes) or isinstance(value, str | bytes | bool):
        return value
    return hint(value)
