"""The worker's heartbeat ends when the worker does.

`trawler worker --exit-when-idle` hung for good in 3 of 4 runs on a loaded
machine: the worker cancelled its heartbeat task while a beat was in flight,
and the Redis client turned that cancellation into an ordinary error (a
timeout while connecting), which the beat loop logs and carries on from. The
loop must end because the worker says so, whatever a client does with a
cancellation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from trawler.worker import Worker, WorkerOptions

pytestmark = pytest.mark.timeout(30)


class SwallowingRegistry:
    """A registry whose beat turns a cancellation into an error, as a client may."""

    def __init__(self) -> None:
        self.beats = 0
        self.in_beat = asyncio.Event()

    async def heartbeat(self, *_args: object) -> None:
        self.beats += 1
        self.in_beat.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise RuntimeError("Timeout connecting to server") from None


async def test_the_beat_stops_even_when_a_beat_swallows_the_cancellation(tmp_path: Path) -> None:
    worker = Worker(WorkerOptions("redis://127.0.0.1:1", "postgresql://x@127.0.0.1:1/x",
                                  tmp_path, "w1"), None)  # fmt: skip
    registry = SwallowingRegistry()
    beating = worker.start_heartbeat(registry)  # type: ignore[arg-type]
    await asyncio.wait_for(registry.in_beat.wait(), 5)
    await asyncio.wait_for(worker.stop_heartbeat(beating), 5)
    assert beating.done()
    assert registry.beats == 1
