"""RequestBudget: what one Kafka connection may hold (requests read ahead of their answers, and their bytes).
Kafka mutes a connection while one of its requests is handled; here a few are read ahead, no more."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from broker.api.kafka.connection import RequestBudget


async def admitted(budget: RequestBudget, size: int) -> bool:
    """Whether acquire(size) returns without waiting for a release."""
    try:
        await asyncio.wait_for(budget.acquire(size), 0.05)
    except TimeoutError:
        return False
    return True


def run(scenario: Callable[[RequestBudget], Awaitable[None]], **limits: int) -> None:
    async def main() -> None:
        await scenario(RequestBudget(**limits))

    asyncio.run(main())


def test_requests_beyond_the_count_wait() -> None:
    async def scenario(budget: RequestBudget) -> None:
        assert await admitted(budget, 10) and await admitted(budget, 10)
        assert not await admitted(budget, 10)
        budget.release(10)
        assert await admitted(budget, 10)

    run(scenario, max_requests=2, max_bytes=1000)


def test_bytes_beyond_the_budget_wait_but_one_request_always_fits() -> None:
    async def scenario(budget: RequestBudget) -> None:
        assert await admitted(budget, 500), "alone, a request over the budget is admitted (socket.request.max.bytes)"
        assert not await admitted(budget, 1)
        budget.release(500)
        assert await admitted(budget, 60)
        assert not await admitted(budget, 60)
        assert await admitted(budget, 40)

    run(scenario, max_requests=5, max_bytes=100)


def test_a_waiting_reader_gives_up_when_answers_stop() -> None:
    async def scenario(budget: RequestBudget) -> None:
        await budget.acquire(10)
        waiting = asyncio.ensure_future(budget.acquire(10))
        await asyncio.sleep(0)
        budget.close()
        with pytest.raises(ConnectionError):
            await waiting

    run(scenario, max_requests=1, max_bytes=100)
