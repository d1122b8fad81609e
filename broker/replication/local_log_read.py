"""A fetch's read of its partitions' logs in chunks, the event loop free between them (issue 27).

Kafka's readFromLocalLog reads a fetch's partitions one after another on a request handler thread. Here the
read runs on the event loop (it only places file slices; the bytes leave by sendfile), and a follower's fetch
naming thousands of partitions not read yet (a new topic's, once per follower, and again when its parked
fetch completes) held the loop for seconds in one callback. `LocalLogRead` carries the read's state from one
partition to the next (what is left of the response's max_bytes, KIP-74's first-batch rule), so the read can
stop after any partition and go on later with the same answer as in one go; `ChunkedReader` reads it on the
loop for at most a chunk's time per callback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence

from broker.replication.delayed_fetch import (
    FetchParams,
    FetchResponseCallback,
    FetchResults,
    LogReadResult,
    PartitionFetchInfo,
)

# How long one callback of the loop reads before it lets other callbacks run: well under the 200 ms stall the
# issue allows, and long enough that the yields cost nothing measurable.
CHUNK_SECONDS = 0.01

# (params, partition, bytes left of the response's max_bytes, whether a first batch comes whole) -> its result
ReadOne = Callable[[FetchParams, PartitionFetchInfo, int, bool], LogReadResult]


class LocalLogRead:
    """Kafka's readFromLocalLog over `infos` in request order, within the response's max_bytes; KIP-74: until
    some partition returned data, the first batch comes whole even when larger than the limits."""

    def __init__(self, params: FetchParams, infos: Sequence[PartitionFetchInfo], read_one: ReadOne) -> None:
        self._params = params
        self._infos = infos
        self._read_one = read_one
        self._limit = max(params.max_bytes, 0)
        self._min_one_message = True
        self.results: FetchResults = []

    @property
    def done(self) -> bool:
        return len(self.results) == len(self._infos)

    def read_all(self) -> FetchResults:
        while not self.done:
            self._read_next()
        return self.results

    def read_for(self, clock: Callable[[], float], seconds: float) -> bool:
        """Read partitions until `seconds` passed by `clock` (at least one partition, if any is left); whether
        every partition is read."""
        deadline = clock() + seconds
        while not self.done:
            self._read_next()
            if clock() >= deadline:
                break
        return self.done

    def _read_next(self) -> None:
        info = self._infos[len(self.results)]
        result = self._read_one(self._params, info, self._limit, self._min_one_message)
        if result.size > 0:
            self._min_one_message = False
        self._limit = max(0, self._limit - result.size)
        self.results.append((info, result))


class ChunkedReader:
    """Runs a LocalLogRead on the event loop, a chunk per callback, then hands its results to a callback (on
    the loop). Callable from any thread: a parked fetch is completed by whichever thread satisfies it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.monotonic,
                 chunk_seconds: float = CHUNK_SECONDS) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._clock = clock
        self._chunk_seconds = chunk_seconds

    def read(self, read: LocalLogRead, callback: FetchResponseCallback) -> None:
        if threading.get_ident() == self._loop_thread:
            self._step(read, callback)
        else:
            self._loop.call_soon_threadsafe(self._step, read, callback)

    def _step(self, read: LocalLogRead, callback: FetchResponseCallback) -> None:
        if read.read_for(self._clock, self._chunk_seconds):
            callback(read.results)
        else:
            self._loop.call_soon(self._step, read, callback)
