"""What `minibroker dump-log` prints: Kafka's DumpLogSegments, line for line where Kafka has a line.

Segment files are read batch by batch with pread, so a multi-gigabyte segment
streams; damage is reported with its position and the dump stops there, never
with a traceback. Nothing here writes: the files may be a running broker's, so
logs are opened O_RDONLY and indexes read-only (no trim, no padding, no resize).
A file that cannot be dumped at all (missing, not named by a base offset) or an
index that fails `--index-sanity-check` raises DumpLogError, which the command
reports on stderr with a non-zero exit, as Kafka's tool fails with an exception.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.log.batch_scan import scan_batches
from broker.log.files import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX
from broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from broker.log.transaction_index import ABORTED_TXN_VERSION, decode_entries
from common.record import BatchHeader, TimestampType, crc32c, decode_records, read_end_txn_marker
from proto.errors import KafkaError


class DumpLogError(Exception):
    """A file dump-log cannot dump, or an index that failed its sanity check."""


def _base_offset(path: Path) -> int:
    """The base offset a segment file is named by (Kafka: the name up to the first dot, as a long)."""
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise DumpLogError(
            f"{path}: not a segment file name: the name before the suffix must be the segment's base offset"
            f" (as in 00000000000000000000{path.suffix}), not {stem!r}")
    return int(stem)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _time_field(header: BatchHeader) -> str:
    kind = "LogAppendTime" if header.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    return f"{kind}: {header.max_timestamp}"


def scan_log(path: Path) -> Iterator[tuple[int, BatchHeader, bytes | None, str | None]]:
    """(position, header, batch bytes or None, problem) for every batch; a problem ends the scan.

    A batch whose structure is fine but whose CRC is wrong is still yielded
    (Kafka prints it with `isvalid: false`); bytes that do not form a batch stop it.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for position, header, data, problem in scan_batches(lambda pos, n: os.pread(fd, n, pos), size):
            yield position, header, None if data is None else bytes(data), problem
    finally:
        os.close(fd)


def dump_log(path: Path, print_data_log: bool) -> Iterator[str]:
    yield f"Starting offset: {_base_offset(path)}"
    valid_bytes = 0
    size = path.stat().st_size
    for position, header, data, problem in scan_log(path):
        if problem is not None:
            yield f"Found corrupt data in {path.name}: {problem}"
            break
        assert data is not None
        crc_ok = crc32c(memoryview(data)[21:]) == header.crc
        yield (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.record_count}"
            f" baseSequence: {header.base_sequence} lastSequence: {header.last_sequence}"
            f" producerId: {header.producer_id} producerEpoch: {header.producer_epoch}"
            f" partitionLeaderEpoch: {header.partition_leader_epoch}"
            f" isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)}"
            f" position: {position} {_time_field(header)} size: {header.size} magic: {header.magic}"
            f" compresscodec: {_codec_name(header)} crc: {header.crc} isvalid: {_bool(crc_ok)}"
        )
        valid_bytes = position + header.size
        if print_data_log and crc_ok:
            yield from _dump_records(header, data)
    trailing = size - valid_bytes
    if trailing > 0:
        yield f"Found {trailing} invalid bytes at the end of {path.name}"


def _codec_name(header: BatchHeader) -> str:
    try:
        return header.compression.name
    except KafkaError:
        return f"UNKNOWN({header.attributes & 0x7})"


def _dump_records(header: BatchHeader, data: bytes) -> Iterator[str]:
    try:
        records = decode_records(data, header)
    except KafkaError as exc:
        yield f"| cannot decode the records of the batch at baseOffset {header.base_offset}: {exc}"
        return
    kind = "LogAppendTime" if header.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    for i, record in enumerate(records):
        sequence = -1 if header.base_sequence < 0 else (header.base_sequence + i) % (1 << 31)
        line = (
            f"| offset: {record.offset} {kind}: {record.timestamp}"
            f" keysize: {-1 if record.key is None else len(record.key)}"
            f" valuesize: {-1 if record.value is None else len(record.value)}"
            f" sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
        )
        if header.is_control:
            # Kafka prints what a marker says instead of its key and value.
            try:
                marker = read_end_txn_marker(data, 0, header)
            except KafkaError as exc:
                yield f"{line} | cannot decode the control record: {exc}"
                continue
            type_id = -1 if record.key is None or len(record.key) < 4 else int.from_bytes(record.key[2:4], "big")
            yield (f"{line} controlType: UNKNOWN({type_id})" if marker is None else
                   f"{line} endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}")
            continue
        if record.key is not None:
            line += f" key: {record.key.decode('utf-8', 'replace')}"
        line += f" payload: {'null' if record.value is None else record.value.decode('utf-8', 'replace')}"
        yield line


def _batch_ends(log_path: Path) -> dict[int, int]:
    """Position of each whole batch in the log -> its last offset (what an index entry must name)."""
    return {position: header.last_offset for position, header, data, problem in scan_log(log_path) if data}


def dump_index(path: Path, sanity_check_only: bool) -> Iterator[str]:
    base_offset = _base_offset(path)
    log_path = path.with_suffix(LOG_FILE_SUFFIX)
    index = OffsetIndex(path, base_offset, 0, read_only=True)
    try:
        if sanity_check_only:
            yield from _sanity(path, lambda: index.sanity_check(log_path.stat().st_size if log_path.exists() else 0))
            return
        batch_ends = _batch_ends(log_path) if log_path.exists() else {}
        mismatches: list[str] = []
        for slot in range(index.entries):
            entry = index.entry(slot)
            yield f"offset: {entry.offset} position: {entry.position}"
            if log_path.exists():
                actual = batch_ends.get(entry.position)
                if actual != entry.offset:
                    found = f"no batch starts at position {entry.position}" if actual is None else actual
                    mismatches.append(f"  Index offset: {entry.offset}, log offset: {found}")
        if mismatches:
            yield f"Mismatches in :{path}"
            yield from mismatches
    finally:
        index.close()


def dump_time_index(path: Path, sanity_check_only: bool) -> Iterator[str]:
    base_offset = _base_offset(path)
    log_path = path.with_suffix(LOG_FILE_SUFFIX)
    index = TimeIndex(path, base_offset, 0, read_only=True)
    try:
        if sanity_check_only:
            next_offset = base_offset
            if log_path.exists():
                next_offset = max((h.next_offset for _, h, data, _ in scan_log(log_path) if data), default=base_offset)
            yield from _sanity(path, lambda: index.sanity_check(next_offset))
            return
        problems: list[str] = []
        previous = -1
        batches = [(h.last_offset, h.max_timestamp) for _, h, data, _ in scan_log(log_path) if data] \
            if log_path.exists() else []
        for slot in range(index.entries):
            entry = index.entry(slot)
            yield f"timestamp: {entry.timestamp} offset: {entry.offset}"
            if entry.timestamp <= previous:
                problems.append(f"Found out of order timestamp in :{path}\n"
                                f"  Index timestamp: {entry.timestamp}, Previously indexed timestamp: {previous}")
            previous = entry.timestamp
            if batches:
                # The entry names the batch where this max timestamp was first reached.
                seen = max((ts for last, ts in batches if last <= entry.offset), default=-1)
                if seen != entry.timestamp:
                    problems.append(f"Found timestamp mismatch in :{path}\n"
                                    f"  Index timestamp: {entry.timestamp}, log timestamp: {seen}")
        yield from problems
    finally:
        index.close()


def _sanity(path: Path, check: Callable[[], None]) -> Iterator[str]:
    try:
        check()
    except CorruptIndexError as exc:
        raise DumpLogError(f"{path} failed sanity check: {exc}") from exc
    yield f"{path} passed sanity check."


def dump_txn_index(path: Path) -> Iterator[str]:
    """Kafka's dumpTxnIndex: one line per aborted transaction."""
    _base_offset(path)
    try:
        entries = decode_entries(path.read_bytes(), path)
    except CorruptIndexError as exc:
        raise DumpLogError(str(exc)) from exc
    for entry in entries:
        yield (f"version: {ABORTED_TXN_VERSION} producerId: {entry.producer_id} firstOffset: {entry.first_offset}"
               f" lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}")


def dump_file(path: Path, print_data_log: bool = False, index_sanity_check: bool = False) -> Iterator[str]:
    """Every line `dump-log` prints for one file; DumpLogError for a file it cannot dump."""
    yield f"Dumping {path}"
    if not path.is_file():
        # Kafka's tool dies of java.io.FileNotFoundException with this message.
        raise DumpLogError(f"{path} (No such file or directory)" if not path.exists() else f"{path} (Is a directory)")
    if path.name.endswith(LOG_FILE_SUFFIX):
        yield from dump_log(path, print_data_log)
    elif path.name.endswith(INDEX_FILE_SUFFIX):
        yield from dump_index(path, index_sanity_check)
    elif path.name.endswith(TIME_INDEX_FILE_SUFFIX):
        yield from dump_time_index(path, index_sanity_check)
    elif path.name.endswith(TXN_INDEX_FILE_SUFFIX):
        yield from dump_txn_index(path)
    else:
        yield f"Ignoring unknown file {path}"

