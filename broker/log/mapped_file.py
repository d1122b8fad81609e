"""MappedFile: a shared read-write mapping of a file that holds no file descriptor (Java's MappedByteBuffer).

Python's `mmap.mmap` keeps a duplicate of the file's descriptor until the mapping is closed (3.13 adds
`trackfd=False`; this runs on 3.11), so each mapped index would cost a descriptor: two per partition, 20,000
for a broker holding 10,000 replicas, the whole of its fd limit. Kafka's AbstractIndex maps the file and closes
its RandomAccessFile at once; the kernel keeps the mapping without a descriptor. This does the same through
libc's mmap/msync/munmap. Not thread-safe: the owning index serialises remapping, flushing and unmapping.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref

__all__ = ["MappedFile"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # <sys/mman.h> on Linux


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unmap(address: int, length: int) -> None:
    _check(_libc.munmap(address, length), "munmap")


class MappedFile:
    """The first `length` (> 0) bytes of the file open as `fd`, mapped shared; `fd` may be closed at once."""

    def __init__(self, fd: int, length: int) -> None:
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            _check(-1, "mmap")
        self._address: int = address
        self.length = length
        # What struct reads and writes entries through; released before the unmap, so a view still exported
        # (a bug) is an error rather than a read of unmapped memory.
        self.view = memoryview((ctypes.c_ubyte * length).from_address(address)).cast("B")
        # A mapping dropped without close() is unmapped with it.
        self._finalizer = weakref.finalize(self, _unmap, address, length)

    def __len__(self) -> int:
        return self.length

    def flush(self) -> None:
        """msync(MS_SYNC): write the dirty pages back and wait (Java's MappedByteBuffer.force)."""
        _check(_libc.msync(self._address, self.length, _MS_SYNC), "msync")

    def close(self) -> None:
        self.view.release()
        self._finalizer()
