"""KafkaScheduler: periodic work in worker threads, never overlapping itself, stopped cleanly."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from broker.server.scheduler import KafkaScheduler


def test_runs_periodically_survives_failures_and_waits_for_a_run_in_progress() -> None:
    runs: list[str] = []
    threads: set[int] = set()

    def work() -> None:
        threads.add(threading.get_ident())
        runs.append("run")
        if len(runs) == 2:
            raise RuntimeError("a failing run is logged, the task keeps its schedule")

    def slow() -> None:
        time.sleep(0.2)
        runs.append("slow done")

    async def scenario() -> None:
        scheduler = KafkaScheduler()
        scheduler.schedule("work", work, delay_ms=0, period_ms=10)
        scheduler.schedule("once", lambda: runs.append("once"), delay_ms=0, period_ms=0)
        while runs.count("run") < 4:
            await asyncio.sleep(0.01)
        scheduler.schedule("slow", slow, delay_ms=0, period_ms=10_000)
        await asyncio.sleep(0.05)
        await scheduler.shutdown()  # returns only after the slow run finished
        assert runs[-1] == "slow done"

    asyncio.run(scenario())
    assert runs.count("once") == 1
    assert threading.get_ident() not in threads  # the work never ran on the event loop's thread


def test_a_long_period_does_not_delay_shutdown() -> None:
    async def scenario() -> None:
        scheduler = KafkaScheduler()
        scheduler.schedule("never", lambda: None, delay_ms=2**62, period_ms=2**62)
        started = time.monotonic()
        await scheduler.shutdown()
        assert time.monotonic() - started < 1

    asyncio.run(scenario())



def test_periodic_work_runs_while_every_default_executor_worker_is_pinned() -> None:
    """ZooKeeper-bound request work stuck in the loop's default executor (an outage: its calls retry until
    reconnected) must not stop the ISR shrink, the HW checkpoint or the flush: they have their own pool."""
    released = threading.Event()
    ran = threading.Event()
    probe = ThreadPoolExecutor(1)  # waits for `ran` without needing the pinned default executor

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        pinned = asyncio.ensure_future(asyncio.to_thread(released.wait))
        try:
            scheduler = KafkaScheduler(threads=1)
            scheduler.schedule("isr-expiration", ran.set, delay_ms=0, period_ms=10_000)
            assert await loop.run_in_executor(probe, ran.wait, 10), "the periodic task never ran"
            await scheduler.shutdown()
        finally:
            released.set()  # whatever failed, no worker stays pinned (asyncio.run would wait for it)
            await pinned

    try:
        asyncio.run(scenario())
    finally:
        probe.shutdown()
