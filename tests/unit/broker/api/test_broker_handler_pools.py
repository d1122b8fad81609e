"""HandlerPools: a request's ZooKeeper calls and disk work on threads of their own. A ZooKeeper call whose request
timed out while it was still queued is dropped, not run once ZooKeeper is back (Kafka stops work for a request
that has already expired rather than doing it for nobody)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.api.handler_pools import HandlerPools
from proto.errors import ErrorCode, KafkaError


def test_a_zookeeper_call_whose_request_timed_out_in_the_queue_never_runs() -> None:
    pools = HandlerPools(zookeeper_threads=1, io_threads=1)
    zookeeper_back = threading.Event()
    ran: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        blocking = loop.run_in_executor(pools.zookeeper_executor, zookeeper_back.wait)  # the one thread, held
        with pytest.raises(KafkaError) as timed_out:
            await pools.zookeeper_bound(lambda: ran.append("late"), timeout_ms=50)
        assert timed_out.value.code is ErrorCode.REQUEST_TIMED_OUT
        # Disk work does not queue behind ZooKeeper's.
        assert await asyncio.wait_for(pools.disk(lambda: "read"), 10) == "read"
        zookeeper_back.set()
        await blocking
        assert await pools.zookeeper(lambda: "after") == "after"  # the thread is free again

    try:
        asyncio.run(scenario())
    finally:
        zookeeper_back.set()
        pools.shutdown()
    assert ran == [], "the timed-out call ran once ZooKeeper was back"
