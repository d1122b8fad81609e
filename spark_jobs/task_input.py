"""Whether a Python data source task's input ended because Spark sent all of it, or because its task failed.

PySpark hands a writer its rows as an iterator that simply ends in both cases: when an upstream operator of
the same task raises (a UDF, a shuffle fetch), the JVM closes the Arrow stream as it does after the last row
and never sends the worker's finish signal. A sink that commits something outside Spark at the end of
write() must tell the two apart, or it commits a task's partial output. The signal is the worker protocol's
END_OF_STREAM, which the JVM sends right after the input of a task that read it all: PySpark's worker reads
it only after write() has returned, so this peeks at it in the worker's input stream, without consuming it.
The iterator's own end is no substitute: a generator around it that notes a loop finished without an
exception notes it after a failed upstream too (docs/spark.md: the exactly-once test fails with it), and
PySpark's public API (its Python TaskContext) says nothing of the task's failure.
"""

from __future__ import annotations

import struct
import sys
from types import FrameType
from typing import BinaryIO

from pyspark.serializers import SpecialLengths

_END_OF_STREAM = struct.pack("!i", SpecialLengths.END_OF_STREAM)


def _worker_input() -> BinaryIO:
    # PySpark's worker main(infile, outfile) is a caller of every data source write: its frame holds the stream.
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_code.co_filename.endswith("worker.py") \
                and "infile" in frame.f_locals:
            stream: BinaryIO = frame.f_locals["infile"]
            return stream
        frame = frame.f_back
    raise RuntimeError("not in a PySpark worker: cannot tell whether the task's input is complete")


def input_complete() -> bool:
    """After the writer's iterator has ended: True if Spark sent all of the task's rows, False if it failed.

    Waits for the JVM's next message: the finish signal comes at once after a complete input; after a failure
    the JVM closes the stream (end of file) or destroys the worker.
    """
    stream = _worker_input()
    head = stream.peek(4)  # type: ignore[attr-defined]  # a BufferedReader: reads once if nothing is buffered
    # END_OF_STREAM is the only message that starts with these bytes; fewer than four buffered is its prefix.
    return len(head) > 0 and head[:4] == _END_OF_STREAM[:len(head[:4])]
