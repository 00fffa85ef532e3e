"""A stop that takes too long says where its tasks wait (slowstop.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from trawler.slowstop import watch_stop, where


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
