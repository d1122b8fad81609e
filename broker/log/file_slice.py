"""Open files shared between a segment and the reads served from it.

A fetch hands out a FileSlice (fd, position, size) that the network layer sends
with `os.sendfile`, so record bytes never pass through Python buffers. The
slice may outlive its segment's place in the log (retention or truncation can
run while a response is on the wire); it keeps the descriptor open by holding
the SharedFile, so the read sees the bytes that were there, or stops short if
they were truncated away, and never hits a closed or reused descriptor.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileSlice", "SharedFile"]


class SharedFile:
    """A file descriptor closed when its last holder (segment, index, slice) lets go of it."""

    __slots__ = ("__weakref__", "_finalizer", "fd", "path")

    def __init__(self, path: Path, flags: int, mode: int = 0o644) -> None:
        self.path = path
        self.fd = os.open(path, flags | os.O_CLOEXEC, mode)
        self._finalizer = weakref.finalize(self, os.close, self.fd)

    def __repr__(self) -> str:
        return f"SharedFile({str(self.path)!r}, fd={self.fd})"

    def rename(self, target: Path) -> None:
        os.rename(self.path, target)
        self.path = target

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def fsync(self) -> None:
        os.fsync(self.fd)


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`size` bytes of a file from `position`: whole record batches, ready for sendfile."""

    file: SharedFile
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    @property
    def fd(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        """The slice's bytes (short only if the segment was truncated under the reader)."""
        chunks: list[bytes] = []
        done = 0
        while done < self.size:
            chunk = os.pread(self.fd, self.size - done, self.position + done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def sendfile(self, out_fd: int, offset: int = 0) -> int:
        """Send the slice from `offset` within it to `out_fd`; return the bytes sent.

        Fewer than requested when a non-blocking `out_fd` would block (call
        again with the new offset once it is writable) or when the file was
        truncated under the reader.
        """
        sent = offset
        while sent < self.size:
            try:
                n = os.sendfile(out_fd, self.fd, self.position + sent, self.size - sent)
            except BlockingIOError:
                break
            if n == 0:
                break
            sent += n
        return sent - offset
