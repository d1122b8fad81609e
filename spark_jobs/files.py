"""Files of any filesystem the executors can reach, through pyarrow.fs.

A log dir is a local path or a URI (`file://`, `hdfs://`, `s3://`, `gs://`
and `s3a://`, which names the same buckets as `s3://` for Hadoop users), so
the same job audits a local cluster and a snapshot copied to object storage.
Reads are positional (`read_at`), so a segment streams in chunks whatever the
filesystem.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyarrow import fs

from broker.log.batch_scan import ReadAt
from spark_jobs.checks import CHANGED_WHILE_READ, MISSING

# Hadoop's names for the schemes pyarrow knows under another one.
_SCHEME_ALIASES = {"s3a://": "s3://", "s3n://": "s3://"}


@dataclass(frozen=True)
class Location:
    """A directory or file: its filesystem and its path there (picklable: it travels to executors)."""

    uri: str

    def filesystem(self) -> tuple[fs.FileSystem, str]:
        uri = self.uri
        for alias, scheme in _SCHEME_ALIASES.items():
            if uri.startswith(alias):
                uri = scheme + uri[len(alias):]
        if "://" not in uri:
            return fs.LocalFileSystem(), posixpath.abspath(uri)
        return fs.FileSystem.from_uri(uri)

    def child(self, name: str) -> Location:
        return Location(self.uri.rstrip("/") + "/" + name)

    @property
    def name(self) -> str:
        return posixpath.basename(self.uri.rstrip("/"))


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int


def list_dir(location: Location) -> list[Entry]:
    """The directory's entries, sorted by name; OSError (FileNotFoundError, ...) when it cannot be listed."""
    filesystem, path = location.filesystem()
    infos = filesystem.get_file_info(fs.FileSelector(path, recursive=False))
    return sorted((Entry(posixpath.basename(i.path), i.type == fs.FileType.Directory, i.size or 0) for i in infos),
                  key=lambda e: e.name)


def exists(location: Location) -> bool:
    filesystem, path = location.filesystem()
    return filesystem.get_file_info(path).type != fs.FileType.NotFound


def file_identity(location: Location) -> str | None:
    """Device and inode of a local file (MISSING when there is none), None for another filesystem. A log
    cleaner swap renames a new file over a segment's name and never writes one in place, so a new identity
    is a new generation of the segment (Kafka's LogCleaner replaceSegments; broker/log/log.py)."""
    filesystem, path = location.filesystem()
    if not isinstance(filesystem, fs.LocalFileSystem):
        return None
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return MISSING
    return f"{stat.st_dev}:{stat.st_ino}"


def identity_across(location: Location, before: str | None) -> str | None:
    """The identity of what was read from (or beside) `location` since `before` was taken: `before` when the
    file is still the same, CHANGED_WHILE_READ when it was replaced meanwhile."""
    return before if file_identity(location) == before else CHANGED_WHILE_READ


def read_file(location: Location) -> bytes:
    """A small file's whole content (checkpoints, indexes, meta.properties); OSError when unreadable."""
    filesystem, path = location.filesystem()
    with filesystem.open_input_file(path) as f:
        return f.read()


@contextmanager
def positional_reader(location: Location) -> Iterator[tuple[ReadAt, int]]:
    """(read_at, size) of a file, for broker.log.batch_scan; OSError when it cannot be opened."""
    filesystem, path = location.filesystem()
    with filesystem.open_input_file(path) as f:
        yield (lambda position, n: memoryview(f.read_at(n, position))), f.size()
