"""``LiveEvents``: the dashboard's live stream (``GET /api/v1/events``), one
producer for every listener.

While at least one client listens, one task per app computes an event every
``interval_s`` (``produce``: a snapshot of the API's numbers) and offers it to
each listener's queue. A queue holds a few events; a listener too slow to take
them loses the oldest, so it never holds up the others nor grows the server's
memory. A new listener gets the latest event at once (or the first one, computed
at once, when it is the only listener). When the last listener leaves, the task
stops: an idle server reads nothing.

A snapshot that takes longer than half the interval is followed by a rest as
long as it took (at most half of one thread's time goes to it).

A store that cannot be read (``StoreUnavailable``) is an event ``problem`` with
its one-line ``detail``, and the stream goes on: it shows the store's recovery.
``close`` ends every stream (the server is stopping: an endless answer would
keep it waiting for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from trawler.api.deps import StoreUnavailable

log = logging.getLogger("trawler")
INTERVAL_S = 0.5
QUEUE_EVENTS = 4  # per listener: about 2 s of events


@dataclass(slots=True, frozen=True)
class Event:
    name: str
    data: str  # JSON, on one line

    def encode(self) -> bytes:
        """The event in the text/event-stream format (HTML Living Standard §9.2.5)."""
        return f"event: {self.name}\ndata: {self.data}\n\n".encode()


def problem(detail: str) -> Event:
    return Event("problem", json.dumps({"detail": " ".join(detail.split())}))


class LiveEvents:
    def __init__(
        self,
        produce: Callable[[], Awaitable[Event]],
        interval_s: float = INTERVAL_S,
        queue_events: int = QUEUE_EVENTS,
    ) -> None:
        self._produce = produce
        self.interval_s = interval_s
        self._queue_events = queue_events
        self._listeners: set[asyncio.Queue[Event | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._latest: Event | None = None
        self._failing = False

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    @property
    def producing(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stream(self) -> AsyncIterator[bytes]:
        """One listener's events, encoded, until it leaves or ``close``."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue(self._queue_events)
        self._listeners.add(queue)
        if self._latest is not None:
            queue.put_nowait(self._latest)
        if not self.producing:
            self._task = asyncio.create_task(self._run(), name="trawler-live-events")
        try:
            while (event := await queue.get()) is not None:
                yield event.encode()
        finally:  # the client left (the stream is cancelled) or the server closes
            self._leave(queue)

    def close(self) -> None:
        """End every stream now, and the producer."""
        for queue in list(self._listeners):
            _offer(queue, None)
        self._stop()

    def _leave(self, queue: asyncio.Queue[Event | None]) -> None:
        self._listeners.discard(queue)
        if not self._listeners:
            self._stop()

    def _stop(self) -> None:
        task, self._task, self._latest = self._task, None, None
        if task is not None:
            task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        log.debug("live events: producing")
        while self._listeners:
            started = loop.time()
            event = await self._next()
            self._latest = event
            for queue in list(self._listeners):
                _offer(queue, event)
            took = loop.time() - started
            # A snapshot slower than half the interval (many jobs, a loaded machine; a
            # job of 1 M pages takes under 0.1 s: bench/bench_live.py) is followed by as
            # long a rest: the stream slows down rather than keep a thread reading
            # without pause beside the crawl.
            await asyncio.sleep(max(self.interval_s - took, took))
        log.debug("live events: no listener left")

    async def _next(self) -> Event:
        try:
            event = await self._produce()
        except StoreUnavailable as exc:
            if not self._failing:  # once an outage, not twice a second
                log.warning("live events: job store unavailable: %s", exc)
            self._failing = True
            return problem(str(exc))
        except Exception:  # a bug: logged with its traceback, and the stream goes on
            if not self._failing:
                log.exception("live events: the snapshot failed")
            self._failing = True
            return problem("the snapshot failed; the server's log says why")
        if self._failing:
            log.warning("live events: job store readable again")
        self._failing = False
        return event


def _offer(queue: asyncio.Queue[Event | None], event: Event | None) -> None:
    """Put without waiting: a full queue loses its oldest event (a slow listener)."""
    if queue.full():
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(event)
