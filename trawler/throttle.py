"""Limits on requests in flight: the process's, which can change while requests
wait on it, and the slot a crawl task holds while it talks to a host; and the
bytes of the pages waiting for their analysis (``ByteBudget``).

``Throttle``: ``asyncio.Semaphore`` has a fixed size; an operator lowering or raising the
concurrency of a running service (Services.politeness) needs the waiting
requests to follow the new size at once. FIFO, so no job starves the others.
With no limit (None) ``acquire`` returns without suspending: the single-job
crawl pays a call per request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

# Pages waiting for their analysis, or for room in the batch after it (engine_url.py), in a
# process: bounded by their bytes, not by task slots. Besides its bodies a page holds
# ~8 KB (its task, records, headers, its pickled copy for the parser): ~3,500 of the
# benchmark's pages, about 2 s of its crawl.
ANALYSIS_QUEUE_BYTES = 48 << 20
PAGE_OVERHEAD_BYTES = 8192


class Throttle:
    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.in_use = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if not self._waiting and (self.limit is None or self.in_use < self.limit):
            self.in_use += 1
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted as the waiter was cancelled: give it back
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def resize(self, limit: int | None) -> None:
        self.limit = limit
        self._wake()

    def _wake(self) -> None:
        while self._waiting and (self.limit is None or self.in_use < self.limit):
            future = self._waiting.popleft()
            if not future.done():
                self.in_use += 1
                future.set_result(None)


class RequestSlot:
    """One of ``concurrency`` request slots, and the process's throttle, held by a
    task while it talks to the host; released once, whichever path ends first."""

    __slots__ = ("_release", "held")

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._release()


class ByteBudget:
    """Bytes held by the tasks of one stage (pages waiting for their analysis):
    ``take`` waits while they would go over ``limit_bytes``. FIFO, woken one by one
    as bytes are given back (not every waiter at each ``give``). One task alone may
    go over the limit, so a page larger than it still passes."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def take(self, size: int) -> None:
        if not self._waiting and self._fits(size):
            self.used += size
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((size, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.give(size)  # granted as the waiter was cancelled: give it back
            raise

    def give(self, size: int) -> None:
        self.used -= size
        while self._waiting:
            wanted, future = self._waiting[0]
            if not future.done() and not self._fits(wanted):
                return
            self._waiting.popleft()
            if not future.done():  # else cancelled while it waited
                self.used += wanted
                future.set_result(None)

    def _fits(self, size: int) -> bool:
        return not self.used or self.used + size <= self.limit_bytes
