"""KafkaScheduler: the broker's periodic tasks, on its event loop (Kafka's utils/KafkaScheduler.scala).

Each task's work is blocking file I/O (fsync, checkpoint writes, segment
deletion), so it runs in a worker thread and the loop keeps serving requests
meanwhile. The threads are the scheduler's own (Kafka's background.threads),
not the loop's default executor: request handlers park ZooKeeper-bound calls
there, and during a ZooKeeper outage those can hold every default worker while
the ISR shrink, the HW checkpoint and the flush must go on.

A run never overlaps the previous run of the same task; a failing run is
logged and the task keeps its schedule. Shutdown lets a run in progress
finish, so nothing writes behind the back of the shutdown sequence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)


class KafkaScheduler:
    def __init__(self, threads: int = 10) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="kafka-scheduler")

    def schedule(self, name: str, work: Callable[[], object], delay_ms: int, period_ms: int) -> None:
        """Run `work` after `delay_ms`, then every `period_ms` (period <= 0: once)."""
        if name in self._tasks:
            raise ValueError(f"task {name} is already scheduled")
        self._tasks[name] = asyncio.get_running_loop().create_task(
            self._run(name, work, delay_ms, period_ms), name=name)

    async def _run(self, name: str, work: Callable[[], object], delay_ms: int, period_ms: int) -> None:
        if await self._stopped_within(delay_ms):
            return
        while True:
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, work)
            except Exception:
                logger.exception("Uncaught exception in scheduled task '%s'", name)
            if period_ms <= 0 or await self._stopped_within(period_ms):
                return

    async def _stopped_within(self, ms: int) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), max(ms, 0) / 1000)
        except TimeoutError:
            return False
        return True

    async def shutdown(self) -> None:
        self._stop.set()
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._executor.shutdown(wait=False)  # every run has finished: the gather waited for them
