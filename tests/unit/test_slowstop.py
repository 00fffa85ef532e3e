"""A stop that takes too long says where its tasks wait (slowstop.py)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from trawler.slowstop import end_task, wait_event, watch_stop, where


async def _stuck_in_commit(event: asyncio.Event) -> None:
    await _inner_wait(event)


async def _inner_wait(event: asyncio.Event) -> None:
    await event.wait()


def test_a_slow_stop_names_the_innermost_wait(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        event = asyncio.Event()
        stuck = asyncio.create_task(_stuck_in_commit(event))
        await asyncio.sleep(0)
        assert where(stuck).startswith("wait (")  # asyncio's Event.wait, innermost
        watch = watch_stop(after_s=0.05)
        await asyncio.sleep(0.2)
        assert watch.done()
        event.set()
        await stuck

    with caplog.at_level(logging.WARNING, logger="trawler"):
        asyncio.run(main())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("still stopping after 0 s; waiting in: ")
    assert "wait (" in warnings[0]


def test_a_stop_done_in_time_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        watch = watch_stop(after_s=0.2)
        await asyncio.sleep(0.01)
        watch.cancel()
        await asyncio.sleep(0.3)

    with caplog.at_level(logging.WARNING, logger="trawler"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def _feed_waiting_for_a_connection(ready: asyncio.Event) -> None:
    """A feeder parked as psycopg_pool parks a client waiting for a free connection:
    in ``asyncio.wait_for`` on an event."""
    while True:
        await asyncio.wait_for(ready.wait(), 10)
        ready.clear()
        await asyncio.sleep(0.25)


async def _loop_on_wait_event(ready: asyncio.Event) -> None:
    """The same loop waiting through ``wait_event``."""
    while True:
        await wait_event(ready, 10)
        ready.clear()
        await asyncio.sleep(0.25)


def _ended_by_one_cancel(loop: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> bool:
    """Whether ``loop`` ends on one cancel arriving as the event it waits on is set."""

    async def main() -> bool:
        ready = asyncio.Event()
        task = asyncio.create_task(loop(ready))
        await asyncio.sleep(0.01)
        ready.set()
        task.cancel()
        await asyncio.wait({task}, timeout=0.5)
        ended = task.done()
        await end_task(task)
        return ended

    return asyncio.run(main())


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for rewritten in 3.12")
def test_one_cancel_can_be_swallowed_on_3_11() -> None:
    """The premise of end_task: a single cancel arriving as the awaited event is set
    does not end the task (python/cpython#86296)."""
    assert _ended_by_one_cancel(_feed_waiting_for_a_connection) is False


def test_end_task_ends_a_task_that_swallowed_a_cancel() -> None:
    async def main() -> asyncio.Task[None]:
        ready = asyncio.Event()
        task = asyncio.create_task(_feed_waiting_for_a_connection(ready))
        await asyncio.sleep(0.01)
        ready.set()
        async with asyncio.timeout(5):
            await end_task(task)
        return task

    assert asyncio.run(main()).cancelled()


def test_end_task_logs_what_a_failed_task_ended_with(caplog: pytest.LogCaptureFixture) -> None:
    async def fail() -> None:
        raise ValueError("broken")

    async def main() -> None:
        task = asyncio.create_task(fail(), name="feeder")
        await asyncio.sleep(0)
        await end_task(task)

    with caplog.at_level(logging.DEBUG, logger="trawler"):
        asyncio.run(main())
    assert "feeder ended with ValueError('broken')" in caplog.text


class _Frontier:
    def set_revisit_mode(self, continuous: bool, discovery: bool) -> None:
        pass


class _SwallowingBackend:
    """Distributed-like: feeds the frontier itself, waiting as psycopg_pool waits."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()

    async def open_revisits(self, window: object) -> None:
        pass

    async def feed_revisits(self, frontier: object) -> None:
        await _feed_waiting_for_a_connection(self.ready)


def test_revisit_flow_stops_although_its_feeder_swallowed_the_cancel() -> None:
    """CI, distributed: a worker's stop waited forever in RevisitFlow.stop for a
    feeder that had swallowed its cancellation (still stopping after 15 s)."""
    from collections import Counter

    from trawler.recrawl_flow import RevisitFlow, RevisitOptions

    async def main() -> None:
        backend = _SwallowingBackend()
        discovery: Any = None
        flow = RevisitFlow(RevisitOptions(continuous=True), backend, discovery, Counter())  # type: ignore[arg-type]
        await flow.start(_Frontier())  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        backend.ready.set()  # a connection comes free as the stop begins
        async with asyncio.timeout(5):
            await flow.stop()

    asyncio.run(main())


def test_wait_event_keeps_a_cancel_that_arrives_as_the_event_is_set() -> None:
    """The same moment as test_one_cancel_can_be_swallowed_on_3_11: one cancel ends it."""
    assert _ended_by_one_cancel(_loop_on_wait_event) is True


def test_wait_event_returns_when_set_or_timed_out() -> None:
    async def main() -> tuple[float, float]:
        event = asyncio.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await wait_event(event, 0.05)
        timed_out = loop.time() - started
        loop.call_later(0.01, event.set)
        started = loop.time()
        await wait_event(event, 10)
        return timed_out, loop.time() - started

    timed_out, set_after = asyncio.run(main())
    assert 0.04 <= timed_out < 1 and set_after < 1
