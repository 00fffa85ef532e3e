"""RedisClock: host times passed between workers through Redis are never early,
however slow the round trips that measured the offset (under load: tens of ms)."""

from __future__ import annotations

import asyncio
import time

import pytest

from trawler.frontier.redis_conn import RedisClock

REDIS_AHEAD_S = 1000.0  # the fake server's clock: local monotonic + this


class SlowTime:
    """A Redis whose TIME reply is slow on one leg of the trip only: the midpoint
    estimate is then off by half the trip, the worst case the round trip allows."""

    def __init__(self, before_s: float, after_s: float) -> None:
        self.before_s, self.after_s = before_s, after_s

    async def time(self) -> tuple[int, int]:
        await asyncio.sleep(self.before_s)
        now = time.monotonic() + REDIS_AHEAD_S
        await asyncio.sleep(self.after_s)
        return int(now), round((now % 1) * 1e6)


@pytest.mark.parametrize(("before_s", "after_s"), [(0.0, 0.04), (0.04, 0.0)])
async def test_conversions_err_on_the_late_side(before_s: float, after_s: float) -> None:
    clock = RedisClock()
    await clock.measure(SlowTime(before_s, after_s))  # type: ignore[arg-type]
    assert clock.error_s >= 0.02
    local = time.monotonic() + 5.0
    true_redis_ms = (local + REDIS_AHEAD_S) * 1000
    # Written by one worker: not before the true Redis time of that local instant.
    assert clock.to_redis(local) >= true_redis_ms
    # Read by another: a Redis time is not reached locally before it truly is.
    assert clock.to_local(true_redis_ms) >= local - 1e-6


async def test_a_fast_trip_costs_next_to_nothing() -> None:
    clock = RedisClock()
    await clock.measure(SlowTime(0.0, 0.0))  # type: ignore[arg-type]
    local = time.monotonic() + 5.0
    assert clock.to_redis(local) - (local + REDIS_AHEAD_S) * 1000 < 5  # ms
    assert clock.to_redis(0.0) == 0 and clock.to_local(0.0) == 0.0
