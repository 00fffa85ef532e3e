"""ByteBudget (throttle.py): the bound on the bytes of the pages waiting for analysis."""

from __future__ import annotations

import asyncio

import pytest

from trawler.throttle import ByteBudget

pytestmark = pytest.mark.timeout(30)


async def test_waiters_go_in_order_as_the_bytes_they_need_are_given_back() -> None:
    budget = ByteBudget(100)
    await budget.take(60)
    await budget.take(40)
    granted: list[int] = []

    async def take(size: int) -> None:
        await budget.take(size)
        granted.append(size)

    waiters = [asyncio.create_task(take(size)) for size in (50, 30, 20)]
    await asyncio.sleep(0.01)
    assert granted == [] and budget.used == 100
    budget.give(40)  # room for none: the first in line needs 50
    await asyncio.sleep(0.01)
    assert granted == []
    budget.give(60)  # room for all three, in order
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert granted == [50, 30, 20] and budget.used == 100


async def test_one_page_larger_than_the_limit_still_passes_alone() -> None:
    budget = ByteBudget(10)
    await asyncio.wait_for(budget.take(50), 1)
    waiter = asyncio.create_task(budget.take(1))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    budget.give(50)
    await asyncio.wait_for(waiter, 1)
    assert budget.used == 1


async def test_a_cancelled_waiter_takes_nothing() -> None:
    budget = ByteBudget(10)
    await budget.take(10)
    waiter = asyncio.create_task(budget.take(5))
    await asyncio.sleep(0.01)
    waiter.cancel()
    budget.give(10)
    await asyncio.sleep(0.01)
    assert budget.used == 0


async def test_a_cancelled_waiter_first_in_line_holds_up_nobody() -> None:
    budget = ByteBudget(10)
    await budget.take(8)
    big = asyncio.create_task(budget.take(9))
    small = asyncio.create_task(budget.take(2))
    await asyncio.sleep(0.01)
    big.cancel()
    await asyncio.sleep(0.01)
    budget.give(0)  # any give: the cancelled one is dropped, the next one fits
    await asyncio.wait_for(small, 1)
    assert budget.used == 10
