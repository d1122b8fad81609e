"""The `minibroker-log` Spark data source: brokers' log dirs as DataFrames.

    spark.dataSource.register(MinibrokerLogDataSource)
    spark.read.format("minibroker-log").option("rows", "batches").load("/data/b1,/data/b2")

The driver only lists the log dirs: one input partition per `<topic>-<partition>`
directory of each broker, plus one per log dir for its own files. Executors
read the files (through spark_jobs.files, so any filesystem pyarrow reaches),
walk segments in bounded chunks with broker.log.batch_scan and yield Arrow
record batches. Three kinds of rows (`rows` option):

- `batches` (default): one row per record batch, the header as
  common/record.py decodes it plus the CRC computed over the bytes; where a
  segment stops being batches, one row with `problem` set (Kafka's "invalid
  bytes at the end of the file").
- `records`: one row per record (offset, timestamp, key, value size, headers),
  for ad-hoc SQL; batches whose records do not decode are left out (their
  batch rows say why).
- `replicas`: one row per partition directory with what its small files say
  (checkpoint entries, index entries, segment sizes, files that should not be
  there), and one per log dir (topic null) for the log dir's own files.

Compacted partitions (cleanup.policy=compact) hold offset gaps and each replica
cleans on its own schedule, so the audit compares their records, not their bytes.
A partition counts as compacted when its topic is named in the `compactedTopics`
option (the topic config lives in ZooKeeper, which an offline audit cannot ask)
or when any log dir's `cleaner-offset-checkpoint` lists it (a cleaner ran on it).
For those, batch rows carry their records' (offset, key, CRC32C of the value,
null for a tombstone) and replica rows the partition's cleaner checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from broker.log.batch_scan import scan_batches
from broker.log.checkpoint import CorruptCheckpointError, LeaderEpochCheckpointFile, OffsetCheckpointFile
from broker.log.files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_FILE_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_DIR_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
)
from broker.log.index import CorruptIndexError, decode_offset_index, decode_time_index
from broker.log.manager import parse_meta_properties
from broker.log.transaction_index import ABORTED_TXN_SIZE, decode_entries
from common.record import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CompressionType,
    crc32c,
    decode_records,
    read_end_txn_marker,
    validate_batch,
)
from proto.errors import KafkaError
from proto.types import TopicPartition
from spark_jobs.files import Location, file_identity, identity_across, list_dir, positional_reader, read_file

FORMAT = "minibroker-log"
ROW_KINDS = ("batches", "records", "replicas")
# Rows per Arrow batch handed to Spark: big enough to amortise the hand-over, small enough to stream.
ARROW_BATCH_ROWS = 8192

_REPLICA = "broker int, log_dir string, topic string, partition int"
BATCH_SCHEMA = (
    f"{_REPLICA}, segment string, position long, base_offset long, last_offset long, record_count int, size int,"
    " magic int, crc long, computed_crc long, partition_leader_epoch int, codec string, timestamp_type string,"
    " base_timestamp long, max_timestamp long, producer_id long, producer_epoch int, base_sequence int,"
    " is_transactional boolean, is_control boolean, error string, problem string,"
    " records array<struct<offset: long, key: binary, value_crc: long>>, segment_id string, control_type string"
)
RECORD_SCHEMA = (
    f"{_REPLICA}, segment string, batch_position long, offset long, timestamp long, key binary, value_size int,"
    " headers array<struct<key: string, value: binary>>"
)
REPLICA_SCHEMA = (
    f"{_REPLICA}, high_watermark long, log_start_offset long, compacted boolean, cleaner_offset long,"
    " leader_epochs array<struct<epoch: int, start_offset: long>>,"
    " segments array<struct<file: string, base_offset: long, size: long, id: string>>,"
    " offset_index array<struct<file: string, slot: int, offset: long, position: long, log_id: string>>,"
    " time_index array<struct<file: string, slot: int, timestamp: long, offset: long, log_id: string>>,"
    " problems array<struct<check: string, file: string, detail: string>>,"
    " txn_index array<struct<file: string, slot: int, producer_id: long, first_offset: long, last_offset: long,"
    " last_stable_offset: long>>"
)
SCHEMAS = {"batches": BATCH_SCHEMA, "records": RECORD_SCHEMA, "replicas": REPLICA_SCHEMA}

# Files a broker writes in a log dir / a partition dir besides segments and indexes; a `.tmp`
# is what an atomic write leaves when killed before its rename, which the broker ignores too.
_LOG_DIR_FILES = frozenset({META_PROPERTIES, CLEAN_SHUTDOWN_FILE, REPLICATION_OFFSET_CHECKPOINT,
                            RECOVERY_POINT_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                            CLEANER_OFFSET_CHECKPOINT})
# Left by a broker killed mid-write or mid-cleaning; its recovery discards or completes them.
_LEFTOVER_SUFFIXES = (TMP_SUFFIX, DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
_SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
                     SNAPSHOT_SUFFIX)


@dataclass
class ReplicaDir(InputPartition):
    """One input partition: a partition directory of a broker, or (topic None) a log dir's own files."""

    broker: int | None
    log_dir: str
    topic: str | None = None
    partition: int | None = None
    compacted: bool = False

    @property
    def location(self) -> Location:
        root = Location(self.log_dir)
        return root if self.topic is None else root.child(f"{self.topic}-{self.partition}")

    def key(self) -> dict[str, Any]:
        return {"broker": self.broker, "log_dir": self.log_dir, "topic": self.topic, "partition": self.partition}


def segment_base_offset(name: str, suffix: str) -> int | None:
    """The base offset a segment file's name gives (20 digits + suffix), None for any other name."""
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def broker_id_of(log_dir: Location) -> int | None:
    """broker.id from the log dir's meta.properties; None when missing or unreadable (reported by its row)."""
    try:
        value = parse_meta_properties(read_file(log_dir.child(META_PROPERTIES)).decode("utf-8")).get("broker.id")
        return int(value) if value is not None else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def cleaned_partitions(log_dirs: Sequence[str]) -> set[TopicPartition]:
    """Every partition some log dir's cleaner-offset-checkpoint lists: a log cleaner has compacted it."""
    return {tp for uri in log_dirs for tp in _offset_checkpoint(Location(uri), CLEANER_OFFSET_CHECKPOINT)}


def plan(log_dirs: Sequence[str], compacted_topics: Iterable[str] = ()) -> list[ReplicaDir]:
    """The input partitions for `log_dirs` (driver side: lists directories, reads meta.properties and the
    cleaner checkpoints only); partitions of `compacted_topics` or cleaned by a log cleaner are `compacted`."""
    named = set(compacted_topics)
    cleaned = cleaned_partitions(log_dirs)
    parts: list[ReplicaDir] = []
    for uri in log_dirs:
        root = Location(uri)
        broker = broker_id_of(root)
        parts.append(ReplicaDir(broker, uri))
        try:
            entries = list_dir(root)
        except OSError:
            continue  # the log dir's own row reports it
        for entry in entries:
            if not entry.is_dir or entry.name.endswith(DELETE_DIR_SUFFIX):
                continue
            try:
                tp = TopicPartition.parse(entry.name)
            except ValueError:
                continue  # reported as an unknown file by the log dir's row
            parts.append(ReplicaDir(broker, uri, tp.topic, tp.partition, tp.topic in named or tp in cleaned))
    return parts


# --------------------------------------------------------------------------- batches


# Codec name by attributes & 0x7 (a table: this runs once per batch).
_CODECS = tuple(CompressionType(i).name if i in CompressionType._value2member_map_ else f"UNKNOWN({i})"
                for i in range(8))
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class _Columns:
    """Column lists filled row by row and cut into Arrow record batches."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.columns: list[list[Any]] = [[] for _ in schema.names]

    def __len__(self) -> int:
        return len(self.columns[0])

    def add(self, values: Sequence[Any]) -> None:
        for column, value in zip(self.columns, values, strict=True):
            column.append(value)

    def flush(self) -> pa.RecordBatch:
        arrays = [pa.array(col, type=field.type) for col, field in zip(self.columns, self.schema, strict=True)]
        self.columns = [[] for _ in self.schema.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _segments(part: ReplicaDir) -> list[tuple[str, int]]:
    try:
        entries = list_dir(part.location)
    except OSError:
        return []  # the replica row reports the directory as unreadable
    found = ((e.name, segment_base_offset(e.name, LOG_FILE_SUFFIX)) for e in entries if not e.is_dir)
    return [(name, base) for name, base in found if base is not None]


def _validate(data: memoryview | None, position: int, stored_crc: int,
              compacted: bool) -> tuple[int | None, str | None]:
    """(computed CRC, what validate_batch finds wrong) for a whole batch; one CRC pass when it is valid.
    A cleaned batch of a compacted log keeps its offsets: fewer records than its offset range is fine there."""
    if data is None:
        return None, None
    try:
        validate_batch(data, allow_gaps=compacted)
    except KafkaError as exc:
        # validate_batch sees the batch alone, at position 0: name its place in the segment instead.
        return crc32c(data[ATTRIBUTES_POS:]), str(exc).replace("at position 0", f"at position {position}", 1)
    return stored_crc, None


def _keyed_records(data: memoryview | None, header: BatchHeader) -> list[dict[str, Any]] | None:
    """What a compacted replica must agree on per record: offset, key and the value's CRC32C (None: tombstone)."""
    if data is None:
        return None
    try:
        records = decode_records(data, header)
    except KafkaError:
        return None  # the batch's own row says why
    return [{"offset": r.offset, "key": r.key, "value_crc": None if r.value is None else crc32c(r.value)}
            for r in records]


def _control_type(data: memoryview | None, header: BatchHeader) -> tuple[str | None, str | None]:
    """(ABORT or COMMIT, what is wrong with its record) of a valid control batch: its one record decoded, once per
    marker; (None, None) for any other batch or a control record of another type."""
    if data is None or not header.attributes & CONTROL_MASK:
        return None, None
    try:
        marker = read_end_txn_marker(data, 0, header)
    except KafkaError as exc:
        return None, str(exc)
    return (None if marker is None else marker.control_type.name), None


def batch_rows(part: ReplicaDir, chunk_size: int) -> Iterator[tuple[Any, ...]]:
    """The partition's `batches` rows, in BATCH_SCHEMA's column order (checks.Batch's fields)."""
    replica = (part.broker, part.log_dir, part.topic, part.partition)
    for name, _ in _segments(part):
        location = part.location.child(name)
        # Which generation of the segment these rows come from (the file opened: the same before and after
        # the open): the index checks compare it with the one the replica row's indexes were read beside.
        generation = file_identity(location)
        try:
            with positional_reader(location) as (read_at, size):
                generation = identity_across(location, generation)
                for position, h, data, problem in scan_batches(read_at, size, chunk_size):
                    computed, error = _validate(data, position, h.crc, part.compacted)
                    control_type, marker_error = _control_type(data, h) if error is None else (None, None)
                    error = error or marker_error
                    attributes = h.attributes
                    yield (*replica, name, position, h.base_offset, h.base_offset + h.last_offset_delta,
                           h.record_count, h.batch_length + LOG_OVERHEAD, h.magic, h.crc, computed,
                           h.partition_leader_epoch, _CODECS[attributes & COMPRESSION_MASK],
                           _TIMESTAMP_TYPES[bool(attributes & TIMESTAMP_TYPE_MASK)], h.base_timestamp,
                           h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
                           bool(attributes & TRANSACTIONAL_MASK), bool(attributes & CONTROL_MASK), error, problem,
                           _keyed_records(data, h) if part.compacted and error is None else None, generation,
                           control_type)
        except OSError as exc:
            # base_offset .. error unknown; the problem; no records, generation or control type.
            yield (*replica, name, 0, *([None] * 18), f"cannot read {name}: {exc}", None, None, None)


def read_batches(part: ReplicaDir, schema: pa.Schema, chunk_size: int) -> Iterator[pa.RecordBatch]:
    out = _Columns(schema)
    for row in batch_rows(part, chunk_size):
        out.add(row)
        if len(out) >= ARROW_BATCH_ROWS:
            yield out.flush()
    if len(out):
        yield out.flush()


def read_records(part: ReplicaDir, schema: pa.Schema, chunk_size: int) -> Iterator[pa.RecordBatch]:
    out = _Columns(schema)
    replica = (part.broker, part.log_dir, part.topic, part.partition)
    for name, _ in _segments(part):
        try:
            with positional_reader(part.location.child(name)) as (read_at, size):
                for position, header, data, _problem in scan_batches(read_at, size, chunk_size):
                    if data is None:
                        continue
                    try:
                        records = decode_records(data, header)
                    except KafkaError:
                        continue
                    for r in records:
                        out.add((*replica, name, position, r.offset, r.timestamp, r.key,
                                 -1 if r.value is None else len(r.value),
                                 [{"key": k, "value": v} for k, v in r.headers]))
                    if len(out) >= ARROW_BATCH_ROWS:
                        yield out.flush()
        except OSError:
            continue
    if len(out):
        yield out.flush()


# --------------------------------------------------------------------------- replicas


def _problem(check: str, file: str | None, detail: str) -> dict[str, Any]:
    return {"check": check, "file": file, "detail": detail}


def _offset_checkpoint(log_dir: Location, name: str, problems: list[dict[str, Any]] | None = None,
                       missing_is_a_problem: bool = True) -> dict[TopicPartition, int]:
    """A log dir's offset checkpoint; `problems` (when given) get why it could not be read."""
    location = log_dir.child(name)
    try:
        return OffsetCheckpointFile(location.uri).parse(read_file(location))
    except FileNotFoundError:
        if problems is not None and missing_is_a_problem:
            problems.append(_problem("missing_checkpoint", name, f"{location.uri} does not exist"))
    except OSError as exc:
        if problems is not None:
            problems.append(_problem("unreadable_file", name, f"cannot read {location.uri}: {exc}"))
    except CorruptCheckpointError as exc:
        if problems is not None:
            problems.append(_problem("corrupt_checkpoint", name, str(exc)))
    return {}


def read_log_dir(part: ReplicaDir) -> dict[str, Any]:
    """The log dir's own row: what is wrong with meta.properties, its checkpoints and its entries."""
    root = part.location
    problems: list[dict[str, Any]] = []
    try:
        entries = list_dir(root)
    except OSError as exc:
        problems.append(_problem("unreadable_file", None, f"cannot list log dir {root.uri}: {exc}"))
        entries = []
    else:
        if part.broker is None:
            problems.append(_problem("missing_broker_id", META_PROPERTIES,
                                     f"{root.child(META_PROPERTIES).uri} is missing or names no broker.id"))
        _offset_checkpoint(root, REPLICATION_OFFSET_CHECKPOINT, problems)
        # Written every log.flush.offset.checkpoint.interval.ms (a minute): a broker killed sooner has none yet.
        for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT):
            _offset_checkpoint(root, name, problems, missing_is_a_problem=False)
        for entry in entries:
            if entry.is_dir:
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    continue
                try:
                    TopicPartition.parse(entry.name)
                    continue
                except ValueError:
                    pass
            elif entry.name in _LOG_DIR_FILES or entry.name.endswith(TMP_SUFFIX):
                continue
            problems.append(_problem("unknown_file", entry.name, f"unknown file {root.child(entry.name).uri}"))
    return {**part.key(), "high_watermark": None, "log_start_offset": None, "compacted": False,
            "cleaner_offset": None, "leader_epochs": None,
            "segments": [], "offset_index": [], "time_index": [], "problems": problems, "txn_index": []}


def read_replica(part: ReplicaDir) -> dict[str, Any]:
    """A partition directory's row: checkpoint entries, segment sizes, index entries, stray files."""
    tp = TopicPartition(part.topic or "", part.partition or 0)
    root = Location(part.log_dir)
    directory = part.location
    problems: list[dict[str, Any]] = []
    high_watermarks = _offset_checkpoint(root, REPLICATION_OFFSET_CHECKPOINT)
    hw = high_watermarks.get(tp)
    if high_watermarks and hw is None:
        problems.append(_problem("missing_checkpoint", REPLICATION_OFFSET_CHECKPOINT,
                                 f"no high watermark for {tp} in {root.child(REPLICATION_OFFSET_CHECKPOINT).uri}"))
    start = _offset_checkpoint(root, LOG_START_OFFSET_CHECKPOINT).get(tp)
    cleaner_offset = _offset_checkpoint(root, CLEANER_OFFSET_CHECKPOINT).get(tp)
    segments: list[dict[str, Any]] = []
    offset_index: list[dict[str, Any]] = []
    time_index: list[dict[str, Any]] = []
    txn_index: list[dict[str, Any]] = []
    epochs: list[dict[str, Any]] | None = None
    try:
        entries = list_dir(directory)
    except OSError as exc:
        problems.append(_problem("unreadable_file", None, f"cannot list {directory.uri}: {exc}"))
        entries = []
    for entry in entries:
        name = entry.name
        if name == LEADER_EPOCH_CHECKPOINT:
            try:
                parsed = LeaderEpochCheckpointFile(directory.child(name).uri).parse(read_file(directory.child(name)))
                epochs = [{"epoch": e.epoch, "start_offset": e.start_offset} for e in parsed]
            except OSError as exc:
                problems.append(_problem("unreadable_file", name, f"cannot read {directory.child(name).uri}: {exc}"))
            except CorruptCheckpointError as exc:
                problems.append(_problem("corrupt_checkpoint", name, str(exc)))
            continue
        suffix = next((s for s in _SEGMENT_SUFFIXES if segment_base_offset(name, s) is not None), None)
        if entry.is_dir or (suffix is None and not name.endswith(_LEFTOVER_SUFFIXES)):
            problems.append(_problem("unknown_file", name, f"unknown file {directory.child(name).uri}"))
            continue
        if suffix is None or suffix == SNAPSHOT_SUFFIX:
            continue
        base = segment_base_offset(name, suffix)
        assert base is not None
        if suffix == LOG_FILE_SUFFIX:
            segments.append({"file": name, "base_offset": base, "size": entry.size,
                             "id": file_identity(directory.child(name))})
            continue
        if suffix == TXN_INDEX_FILE_SUFFIX:
            _read_txn_index(directory, name, txn_index, problems)
            continue
        _read_index(directory, name, base, suffix, offset_index, time_index, problems)
    if epochs is None and segments and not any(p["file"] == LEADER_EPOCH_CHECKPOINT for p in problems):
        problems.append(_problem("missing_checkpoint", LEADER_EPOCH_CHECKPOINT,
                                 f"{directory.child(LEADER_EPOCH_CHECKPOINT).uri} does not exist"))
    return {**part.key(), "high_watermark": hw, "log_start_offset": start, "compacted": part.compacted,
            "cleaner_offset": cleaner_offset, "leader_epochs": epochs,
            "segments": segments, "offset_index": offset_index, "time_index": time_index, "problems": problems,
            "txn_index": txn_index}


def _read_index(directory: Location, name: str, base: int, suffix: str, offset_index: list[dict[str, Any]],
                time_index: list[dict[str, Any]], problems: list[dict[str, Any]]) -> None:
    # The generation of the segment this index belongs to: its `.log`'s identity, unchanged across the read.
    # A swap renames the old `.log` away before its indexes and the new indexes in before the new `.log`,
    # so an index read while the `.log` stayed one file is that file's index.
    log = directory.child(f"{base:020d}{LOG_FILE_SUFFIX}")
    log_id = file_identity(log)
    try:
        raw = read_file(directory.child(name))
    except OSError as exc:
        problems.append(_problem("unreadable_file", name, f"cannot read {directory.child(name).uri}: {exc}"))
        return
    log_id = identity_across(log, log_id)
    entry_size = 8 if suffix == INDEX_FILE_SUFFIX else 12
    if len(raw) % entry_size:
        problems.append(_problem("index_size", name, f"Index file {name} is corrupt, found {len(raw)} bytes which"
                                 f" is not a multiple of {entry_size}"))
    if suffix == INDEX_FILE_SUFFIX:
        offset_index.extend({"file": name, "slot": slot, "offset": e.offset, "position": e.position, "log_id": log_id}
                            for slot, e in enumerate(decode_offset_index(raw, base)))
    else:
        time_index.extend({"file": name, "slot": slot, "timestamp": e.timestamp, "offset": e.offset,
                           "log_id": log_id}
                          for slot, e in enumerate(decode_time_index(raw, base)))


def _read_txn_index(directory: Location, name: str, txn_index: list[dict[str, Any]],
                    problems: list[dict[str, Any]]) -> None:
    """A `.txnindex`'s entries (Kafka's 34-byte AbortedTxn), each slot on its own: an entry of an unknown
    version is a problem of its slot, not of the whole file."""
    try:
        raw = read_file(directory.child(name))
    except OSError as exc:
        problems.append(_problem("unreadable_file", name, f"cannot read {directory.child(name).uri}: {exc}"))
        return
    if len(raw) % ABORTED_TXN_SIZE:
        problems.append(_problem("index_size", name, f"Index file {name} is corrupt, found {len(raw)} bytes which"
                                 f" is not a multiple of {ABORTED_TXN_SIZE}"))
    for slot in range(len(raw) // ABORTED_TXN_SIZE):
        try:
            [entry] = decode_entries(raw[slot * ABORTED_TXN_SIZE:(slot + 1) * ABORTED_TXN_SIZE], name)
        except CorruptIndexError as exc:
            problems.append(_problem("txn_index_mismatch", name, f"entry {slot}: {exc}"))
            continue
        txn_index.append({"file": name, "slot": slot, **entry._asdict()})


# --------------------------------------------------------------------------- the data source


class MinibrokerLogDataSource(DataSource):
    """Options: `paths` (comma-separated log dirs; or give them to load()), `rows` (batches | records |
    replicas), `chunkSize` (bytes read from a segment at a time, default 8 MiB), `compactedTopics`
    (comma-separated topics with cleanup.policy=compact)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _rows(self) -> str:
        rows = self.options.get("rows", "batches")
        if rows not in ROW_KINDS:
            raise ValueError(f"option rows={rows!r}: expected one of {', '.join(ROW_KINDS)}")
        return rows

    def schema(self) -> str:
        return SCHEMAS[self._rows()]

    def reader(self, schema: StructType) -> DataSourceReader:
        paths = self.options.get("paths") or self.options.get("path") or ""
        # load([...]) passes a JSON list as `paths`; the option and load("D1,D2") a comma-separated string.
        listed = json.loads(paths) if paths.startswith("[") else paths.split(",")
        log_dirs = [p.strip() for p in listed if p.strip()]
        if not log_dirs:
            raise ValueError("no log dirs: give them with .option('paths', 'D1,D2') or .load('D1,D2')")
        compacted = [t.strip() for t in self.options.get("compactedTopics", "").split(",") if t.strip()]
        return _Reader(log_dirs, self._rows(), int(self.options.get("chunkSize", 8 << 20)), schema, compacted)


class _Reader(DataSourceReader):
    def __init__(self, log_dirs: list[str], rows: str, chunk_size: int, schema: StructType,
                 compacted_topics: list[str]) -> None:
        self.log_dirs = log_dirs
        self.compacted_topics = compacted_topics
        self.rows = rows
        self.chunk_size = chunk_size
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        parts = plan(self.log_dirs, self.compacted_topics)
        if self.rows != "replicas":
            parts = [p for p in parts if p.topic is not None]
        return parts or [ReplicaDir(None, "", None, None)]  # Spark wants at least one; it yields nothing

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReplicaDir)
        if not partition.log_dir:
            return
        schema = to_arrow_schema(self.schema)
        readers: dict[str, Callable[[ReplicaDir, pa.Schema, int], Iterator[pa.RecordBatch]]] = {
            "batches": read_batches, "records": read_records}
        if self.rows in readers:
            yield from readers[self.rows](partition, schema, self.chunk_size)
            return
        row = read_replica(partition) if partition.topic is not None else read_log_dir(partition)
        yield pa.RecordBatch.from_pylist([row], schema=schema)
