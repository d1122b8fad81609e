"""Kafka's checkpoint files, and the one atomic file replacement every state file uses.

A checkpoint is a small text file (kafka.server.checkpoints.CheckpointFile):

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- one entry per line, fields separated by a space
    orders 1 987

Kinds, by their Kafka file names:

- `replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
  `log-start-offset-checkpoint`: one per log directory, entries
  `topic partition offset` (OffsetCheckpointFile).
- `leader-epoch-checkpoint`: one per partition directory, entries
  `epoch startOffset` (LeaderEpochCheckpointFile).

Every write replaces the whole file through `atomic_write`, so a reader sees
the old content or the new one, never a mix, whatever instant the broker dies.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Generic, NamedTuple, Protocol, TypeVar

from broker.log.files import TMP_SUFFIX
from proto.errors import ErrorCode, KafkaError, KafkaStorageError
from proto.types import TopicPartition

CHECKPOINT_VERSION = 0  # the only version Kafka has ever written for these files



_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
# Java's Integer.parseInt accepts a sign and ASCII digits only; Python's int() would
# also take "1_000", " 7" or Unicode digits, which no Kafka broker ever wrote.
_INTEGER = re.compile(r"[+-]?[0-9]+")

T = TypeVar("T")


class CorruptCheckpointError(KafkaError):
    """A checkpoint file that cannot be parsed; Kafka fails the log directory with a storage error."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


def atomic_write(path: str | os.PathLike[str], data: bytes, sync: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    Write `<path>.tmp`, fsync it, rename it over `path`, then fsync the directory
    so the rename itself survives a power cut (Utils.atomicMoveWithFallback).
    A `.tmp` left by an earlier crash is simply overwritten. With `sync` False nothing is
    fsynced: the caller flushes later (`fsync_file`) and copes with a torn file after a crash.
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_file(os.path.dirname(os.path.abspath(target)))


def fsync_file(path: str | os.PathLike[str]) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_int(token: str, name: str, bounds: tuple[int, int] = _INT64) -> int:
    """Parse a decimal field as Java would for an int/long, naming the field when it is not one."""
    if not _INTEGER.fullmatch(token):
        raise ValueError(f"{name} {token!r} is not an integer")
    value = int(token)
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{name} {value} is out of range")
    return value


class CheckpointFileFormatter(Protocol[T]):
    def to_line(self, entry: T) -> str: ...

    def from_line(self, line: str) -> T:
        """Parse one entry line; raise ValueError saying what is wrong with it."""
        ...


class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's checkpoint text format."""

    def __init__(self, path: str | os.PathLike[str], version: int, formatter: CheckpointFileFormatter[T]) -> None:
        self.path = os.fspath(path)
        self._version = version
        self._formatter = formatter
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T], sync: bool = True) -> None:
        """Replace the file with `entries`; with `sync` False nothing is fsynced (`sync` later makes it durable)."""
        lines = [self._formatter.to_line(e) for e in entries]
        text = "".join(f"{line}\n" for line in [str(self._version), str(len(lines)), *lines])
        with self._lock:
            try:
                atomic_write(self.path, text.encode("utf-8"), sync=sync)
            except OSError as exc:
                raise KafkaStorageError(f"Error while writing to checkpoint file {self.path}: {exc}") from exc

    def sync(self) -> None:
        """fsync a write made with `sync` False: the file, then its directory (the rename)."""
        with self._lock:
            try:
                fsync_file(self.path)
                fsync_file(os.path.dirname(os.path.abspath(self.path)))
            except OSError as exc:
                raise KafkaStorageError(f"Error while flushing checkpoint file {self.path}: {exc}") from exc

    def create_if_missing(self) -> None:
        """Kafka's CheckpointFile constructor (Files.createFile): the file, empty, which reads as no entries. No
        content and no fsync: it was two fsyncs (the file's, its dir's) for each of a new topic's partitions."""
        with self._lock:
            try:
                open(self.path, "xb").close()
            except FileExistsError:
                pass
            except OSError as exc:
                raise KafkaStorageError(f"Error while creating checkpoint file {self.path}: {exc}") from exc

    def read(self) -> list[T]:
        """The file's entries; none if it does not exist or is empty (Kafka creates it empty)."""
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise KafkaStorageError(f"Error while reading checkpoint file {self.path}: {exc}") from exc
        return self.parse(raw)

    def parse(self, raw: bytes) -> list[T]:
        """The entries of the file's content `raw` (for readers that fetch the bytes themselves, e.g. the audit)."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"not UTF-8 text ({exc})") from None
        if not text:
            return []
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the newline that ends the last line
        version = self._header_field(lines, 0, "version")
        if version != self._version:
            raise self._corrupt(f"line 1: unrecognized version {version}, expected {self._version}")
        expected = self._header_field(lines, 1, "entry count")
        if expected < 0:
            raise self._corrupt(f"line 2: negative entry count {expected}")
        entries = []
        for lineno, line in enumerate(lines[2:], start=3):
            try:
                entries.append(self._formatter.from_line(line))
            except ValueError as exc:
                raise self._corrupt(f"line {lineno}: malformed entry {line!r}: {exc}") from None
        if len(entries) != expected:
            raise self._corrupt(f"expected {expected} entries, found {len(entries)}")
        return entries

    def _header_field(self, lines: list[str], index: int, name: str) -> int:
        # Kafka reads a file cut after the version line as empty; only a torn non-atomic
        # write can produce one, so here it is reported like any other damage.
        if index >= len(lines):
            raise self._corrupt(f"line {index + 1}: missing {name}")
        try:
            return _parse_int(lines[index], name, _INT32)
        except ValueError as exc:
            raise self._corrupt(f"line {index + 1}: {exc}") from None

    def _corrupt(self, detail: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"Malformed checkpoint file {self.path}: {detail}")


def _split_fields(line: str, count: int, names: str) -> list[str]:
    # Java's split("\\s+") as Kafka uses it: runs of whitespace separate fields.
    fields = line.split()
    if len(fields) != count:
        raise ValueError(f"expected {count} fields ({names}), found {len(fields)}")
    return fields


class _OffsetFormatter:
    def to_line(self, entry: tuple[TopicPartition, int]) -> str:
        tp, offset = entry
        return f"{tp.topic} {tp.partition} {offset}"

    def from_line(self, line: str) -> tuple[TopicPartition, int]:
        topic, partition, offset = _split_fields(line, 3, "topic partition offset")
        return TopicPartition(topic, _parse_int(partition, "partition", _INT32)), _parse_int(offset, "offset")


class OffsetCheckpointFile:
    """`topic partition offset` per line: high watermarks, recovery points, log start offsets."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._checkpoint = CheckpointFile(path, CHECKPOINT_VERSION, _OffsetFormatter())

    @property
    def path(self) -> str:
        return self._checkpoint.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        # Kafka writes in hash-map order; sorted keeps the file diffable and deterministic.
        self._checkpoint.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._checkpoint.read())

    def parse(self, raw: bytes) -> dict[TopicPartition, int]:
        return dict(self._checkpoint.parse(raw))


class EpochEntry(NamedTuple):
    """A leader epoch and the offset of the first record written in it."""

    epoch: int
    start_offset: int


class _EpochFormatter:
    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry:
        epoch, start_offset = _split_fields(line, 2, "epoch startOffset")
        return EpochEntry(_parse_int(epoch, "epoch", _INT32), _parse_int(start_offset, "start offset"))


class LeaderEpochCheckpointFile:
    """`epoch startOffset` per line: a partition's `leader-epoch-checkpoint`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._checkpoint = CheckpointFile(path, CHECKPOINT_VERSION, _EpochFormatter())

    @property
    def path(self) -> str:
        return self._checkpoint.path

    def write(self, entries: Iterable[EpochEntry], sync: bool = True) -> None:
        self._checkpoint.write(entries, sync)

    def sync(self) -> None:
        self._checkpoint.sync()

    def read(self) -> list[EpochEntry]:
        return self._checkpoint.read()

    def create_if_missing(self) -> None:
        self._checkpoint.create_if_missing()

    def parse(self, raw: bytes) -> list[EpochEntry]:
        return self._checkpoint.parse(raw)
