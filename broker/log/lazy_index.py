"""LazyIndex: a segment's index file, mapped on first use (Kafka's kafka.log.LazyIndex).

A broker holds thousands of segments whose indexes nobody reads: every inactive segment of every partition
that no consumer is behind on. Loading a log makes each segment's indexes lazy; the first lookup maps the file,
and it stays mapped until the segment closes or is deleted. Until then a rename or a delete works on the path
alone. A look that only computes something the segment then caches (recovery's sanity check, the segment's
next offset, its largest timestamp) uses `peek`, which leaves an unmapped index unmapped.

Not thread-safe: the segment calls it under its log's lock; `flush` (outside it) only touches a loaded index.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Generic, TypeVar

from broker.log.index import AbstractIndex

__all__ = ["LazyIndex"]

I = TypeVar("I", bound=AbstractIndex)  # noqa: E741  # Kafka's LazyIndex[T <: AbstractIndex]


class LazyIndex(Generic[I]):
    """The index at `path`, built by `open_index(path)` when first needed."""

    def __init__(self, path: Path, open_index: Callable[[Path], I], *, load: bool = False) -> None:
        self._path = path
        self._open_index = open_index
        self._index: I | None = open_index(path) if load else None

    def __repr__(self) -> str:
        return f"LazyIndex({self._index!r})" if self._index is not None else f"LazyIndex({str(self._path)!r})"

    @property
    def path(self) -> Path:
        return self._index.path if self._index is not None else self._path

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> I:
        """The index, mapped now if it was not yet."""
        if self._index is None:
            self._index = self._open_index(self._path)
        return self._index

    @contextmanager
    def peek(self) -> Iterator[I]:
        """The index for one look that leaves it as it was: the loaded one, else one mapped for the look only."""
        if self._index is not None:
            yield self._index
            return
        index = self._open_index(self._path)
        try:
            yield index
        finally:
            index.close_handler()

    def rename(self, target: Path) -> None:
        if self._index is not None:
            self._index.rename(target)
        else:
            # An unloaded index whose file is missing stays missing: opening it later creates it empty, and the
            # segment's sanity check then has it rebuilt from the log (as before the index was lazy).
            with suppress(FileNotFoundError):
                os.rename(self._path, target)
        self._path = target

    def flush(self) -> None:
        """Only a loaded index can have pages to write back."""
        index = self._index
        if index is not None:
            index.flush()

    def close(self) -> None:
        """Trim and unmap a loaded index; an unloaded one was sealed when its segment stopped being active."""
        if self._index is not None:
            self._index.close()

    def close_handler(self) -> None:
        """Unmap without touching the file (a segment being deleted)."""
        if self._index is not None:
            self._index.close_handler()
