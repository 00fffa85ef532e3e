"""Stopping for sure: ending a background task, and saying what a stop is waiting
for when it takes too long.

``end_task`` cancels a task until it has ended. Once is not always enough: on Python
3.11, ``asyncio.wait_for`` returns the awaited result instead of raising when the
cancellation arrives as what it awaits completes (python/cpython#86296, fixed in 3.12
by rewriting it on ``asyncio.timeout``). Clients wait that way inside — psycopg_pool
for a free connection, our own waits for a wake-up — so a loop cancelled at such a
moment simply goes on, and a stop awaiting it waits forever (a revisit feeder did,
in a CI run).

A stopped crawl or worker finishes its requests in flight (a few seconds at most)
and commits them. If it is still running ``SLOW_STOP_S`` later, something it awaits
is stuck: one warning names where each of its tasks waits (file, line, function),
so the operator — or a test's log — sees the culprit instead of a silent hang. If
the event loop itself is blocked (a synchronous call that never returns), that
warning cannot run; the interpreter's own watchdog (faulthandler) then prints every
thread's stack a little later instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import sys
from collections.abc import Coroutine, Generator
from typing import Any

log = logging.getLogger("trawler")

SLOW_STOP_S = 15.0
RECANCEL_S = 0.2  # how long a cancelled task has to end before it is cancelled again
BLOCKED_LOOP_S = 20.0  # > SLOW_STOP_S: the warning, when the loop runs, cancels the dump


async def end_task(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling it again each
    ``RECANCEL_S`` while a cancellation was swallowed. What it ended with is logged
    (debug), never raised: the caller is stopping it."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_S)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.debug("%s ended with %r", task.get_name(), exc)


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Until ``event`` is set or ``timeout_s`` has passed. On ``asyncio.timeout``, not
    ``wait_for``: a cancellation arriving as the event is set is not lost."""
    if event.is_set():
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


def watch_stop(after_s: float = SLOW_STOP_S) -> asyncio.Task[None]:
    """Start watching a stop that has just begun; cancel the task once it is done."""
    with contextlib.suppress(ValueError, RuntimeError, OSError):  # no usable stderr
        faulthandler.dump_traceback_later(BLOCKED_LOOP_S, file=sys.stderr)
    return asyncio.create_task(_warn_when_slow(after_s))


async def _warn_when_slow(after_s: float) -> None:
    try:
        await asyncio.sleep(after_s)
        faulthandler.cancel_dump_traceback_later()  # the loop runs: tasks say more
        me = asyncio.current_task()
        waits = sorted({where(task) for task in asyncio.all_tasks() if task is not me})
        log.warning("still stopping after %.0f s; waiting in: %s", after_s, "; ".join(waits))
    finally:
        faulthandler.cancel_dump_traceback_later()


def where(task: asyncio.Task[Any]) -> str:
    """The innermost place a task's coroutine chain is suspended at, and the
    innermost of Trawler's own frames above it when that is another one."""
    coro: Any = task.get_coro()
    places: list[str] = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            path = frame.f_code.co_filename
            places.append(f"{frame.f_code.co_name} ({_short(path)}:{frame.f_lineno})")
        coro = _awaited(coro)
    if not places:
        return "?"
    ours = [p for p in places if p.split("(", 1)[1].startswith("trawler/")]
    if ours and ours[-1] != places[-1]:
        return f"{places[-1]} in {ours[-1]}"
    return places[-1]


def _awaited(coro: Coroutine[Any, Any, Any] | Generator[Any, Any, Any] | Any) -> Any:
    awaited = getattr(coro, "cr_await", None)
    if awaited is None:
        awaited = getattr(coro, "gi_yieldfrom", None)
    return awaited if hasattr(awaited, "cr_frame") or hasattr(awaited, "gi_frame") else None


def _short(path: str) -> str:
    marker = "/trawler/"
    index = path.rfind(marker)
    if index >= 0:
        return "trawler/" + path[index + len(marker) :]
    return path.rsplit("/site-packages/", 1)[-1]
