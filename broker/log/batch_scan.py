"""Walk the batches of a segment file in bounded chunks, through any positional reader.

Shared by `dump-log` (local files, os.pread) and the Spark audit (files of any
filesystem pyarrow can open): both need the same answer to "where are the
batches, and where does the file stop being batches". A segment is read
`chunk_size` bytes at a time, so a file larger than memory streams; only a
single batch larger than a chunk is read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from common.record import HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, BatchHeader, parse_header

# (position, size) -> up to `size` bytes from `position`; fewer only at the end of the file.
ReadAt = Callable[[int, int], bytes | memoryview]

DEFAULT_CHUNK_SIZE = 8 << 20


class ScannedBatch(NamedTuple):
    """A batch found at `position`, or (with `problem` set) the place where the file stops being batches.

    `data` is the whole batch (valid until the scan moves on by a chunk; copy it
    to keep it); None with a problem. With a problem, `header` is whatever the
    bytes there decode to, zero-padded when fewer than a header remain.
    """

    position: int
    header: BatchHeader
    data: memoryview | None
    problem: str | None


def scan_batches(read_at: ReadAt, size: int, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[ScannedBatch]:
    """Every batch of a file of `size` bytes, in order; a problem ends the scan.

    Only structure is checked here (enough bytes, magic 2, a batchLength that
    fits in the file): a batch with a wrong CRC is still a batch, and callers
    decide what to do with it, as Kafka's DumpLogSegments prints `isvalid: false`.
    """
    chunk = memoryview(b"")
    chunk_start = 0
    position = 0
    while position < size:
        at = position - chunk_start
        if len(chunk) - at < HEADER_SIZE:
            chunk = memoryview(read_at(position, min(max(chunk_size, HEADER_SIZE), size - position)))
            chunk_start, at = position, 0
            if len(chunk) < HEADER_SIZE:
                head = bytes(chunk) + bytes(HEADER_SIZE - len(chunk))
                yield ScannedBatch(position, parse_header(head), None,
                                   f"{len(chunk)} bytes at position {position} are too few for a batch header")
                return
        header = parse_header(chunk, at)
        if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH:
            yield ScannedBatch(position, header, None, f"no valid batch at position {position}"
                               f" (magic {header.magic}, batchLength {header.batch_length})")
            return
        batch_size = header.size
        if position + batch_size > size:
            yield ScannedBatch(position, header, None, f"batch at position {position} declares {batch_size}"
                               f" bytes but only {size - position} remain")
            return
        if len(chunk) - at < batch_size:
            chunk = memoryview(read_at(position, min(max(chunk_size, batch_size), size - position)))
            chunk_start, at = position, 0
            if len(chunk) < batch_size:
                yield ScannedBatch(position, header, None, f"batch at position {position} declares {batch_size}"
                                   f" bytes but only {len(chunk)} could be read")
                return
        yield ScannedBatch(position, header, chunk[at : at + batch_size], None)
        position += batch_size
