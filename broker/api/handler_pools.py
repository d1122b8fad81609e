"""The bounded thread pools that do a request's blocking work off the event loop (Kafka's request handler
threads; its network threads never wait on disk or ZooKeeper).

- zookeeper: a request's ZooKeeper reads and writes (DescribeConfigs, CreateTopics, InitProducerId, ACLs...),
  `zookeeper.max.in.flight.requests` threads, Kafka's bound on a ZooKeeperClient's requests in flight. While
  ZooKeeper is away they wait, and only they: requests that need no ZooKeeper never queue behind them.
- disk: reads and writes of log data a request needs off the loop (TLS fetch responses, which cannot use
  sendfile; a coordinator's load of __consumer_offsets; DeleteRecords), `num.io.threads` threads.
- forwarding: requests forwarded to the controller process (ElectLeaders, DescribeEvents; KIP-590's forwarding),
  two threads: a call that waits for the controller (an election takes up to its timeout) holds none of the
  ZooKeeper threads that CreateTopics, InitProducerId and __consumer_offsets creation need.

A ZooKeeper call whose request has timed out is dropped if it has not started (its future is cancelled); one
already running finishes, as a timed-out Kafka request may. The loop's default executor is left to start-up
and shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from proto.errors import ErrorCode, KafkaError

T = TypeVar("T")
FORWARDING_THREADS = 2


class HandlerPools:
    def __init__(self, zookeeper_threads: int, io_threads: int) -> None:
        self.zookeeper_executor = ThreadPoolExecutor(zookeeper_threads, thread_name_prefix="zk-request-handler")
        self.disk_executor = ThreadPoolExecutor(io_threads, thread_name_prefix="disk-request-handler")
        self.forwarding_executor = ThreadPoolExecutor(FORWARDING_THREADS, thread_name_prefix="controller-forwarding")

    async def zookeeper(self, call: Callable[..., T], *args: object) -> T:
        """`call(*args)` on a ZooKeeper thread."""
        return await asyncio.get_running_loop().run_in_executor(self.zookeeper_executor, call, *args)

    async def zookeeper_bound(self, call: Callable[[], T], timeout_ms: float) -> T:
        """`call` on a ZooKeeper thread, waited for no longer than the request may wait. During a ZooKeeper
        outage the call retries until reconnected; the client gets KafkaError(REQUEST_TIMED_OUT) at its timeout
        instead of a wait as long as the outage, and the call is dropped if it is still queued."""
        try:
            return await asyncio.wait_for(self.zookeeper(call), max(timeout_ms, 0) / 1000)
        except TimeoutError:
            raise KafkaError(f"ZooKeeper did not answer within the request's timeout ({timeout_ms:.0f} ms)",
                             ErrorCode.REQUEST_TIMED_OUT) from None

    async def forward(self, call: Callable[..., T], *args: object) -> T:
        """`call(*args)` (a request to the controller process) on a forwarding thread."""
        return await asyncio.get_running_loop().run_in_executor(self.forwarding_executor, call, *args)

    async def disk(self, call: Callable[..., T], *args: object) -> T:
        """`call(*args)` on a disk thread."""
        return await asyncio.get_running_loop().run_in_executor(self.disk_executor, call, *args)

    def shutdown(self) -> None:
        """Queued work is dropped. Disk work under way finishes before this returns (the logs close next); a
        ZooKeeper call is not waited for (ZooKeeper may be away, and the session closes after)."""
        self.zookeeper_executor.shutdown(wait=False, cancel_futures=True)
        self.forwarding_executor.shutdown(wait=False, cancel_futures=True)
        self.disk_executor.shutdown(wait=True, cancel_futures=True)
