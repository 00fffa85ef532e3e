"""The crawl's dispatcher: one task per leased URL, within its throttles.

``concurrency`` bounds the requests in flight: a task holds a request slot
(``RequestSlot``) only while it talks to the host (robots.txt, the page and its
same-host redirect hops), never while it waits out the host's interval (a host
not ready yet after its robots.txt goes back to the frontier, whose ready-heap
does the waiting) nor while its page is analysed. Up to ``TASKS_PER_SLOT``
times as many URLs may be between lease and analysis; a page waiting for its
analysis (or for room in the batch) holds no task slot but its bytes, up to
``throttle.ANALYSIS_QUEUE_BYTES`` in the process: a host whose turn has come is
not kept waiting behind pages that only wait for the parser. A URL is leased
only when it can be sent at once, while --max-pages leaves room for it, and
not while the crawl is paused. On stop, the tasks in flight get
``SHUTDOWN_GRACE_S`` to finish; the rest are cancelled, their URLs left queued.

``Dispatcher`` is a part of ``Crawler`` (engine.py), which builds the state
declared below; its methods are the crawler's own, not a layer in front of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from trawler.throttle import RequestSlot, Throttle

if TYPE_CHECKING:
    from trawler.commits import Commits
    from trawler.config import CrawlConfig
    from trawler.frontier.base import Frontier
    from trawler.records import CrawlRequest
    from trawler.services import Services

SHUTDOWN_GRACE_S = 5.0
# Leased URLs per request slot, not yet analysed: the others wait for their host's
# answer or for room in the analysis queue.
TASKS_PER_SLOT = 4


class Dispatcher:
    """Leasing URLs and running one task each, then draining them (module doc)."""

    # Built by Crawler (engine.py); ``frontier`` once run() has opened it.
    config: CrawlConfig
    services: Services
    frontier: Frontier
    commits: Commits
    pages_stored: int
    exhausted: bool
    _tasks: set[asyncio.Task[None]]
    _stopping: bool
    _running: asyncio.Event  # clear while paused
    # One URL's task (engine_url.py).
    _process: Callable[[CrawlRequest, RequestSlot, RequestSlot], Coroutine[Any, Any, None]]

    async def _dispatch(self) -> None:
        concurrency = self.config.concurrency
        # Throttles, not asyncio.Semaphores: one waiter (this loop), and an acquire that
        # does not suspend is a comparison, not Semaphore.locked()'s scan of its waiters.
        requests = Throttle(concurrency)  # requests in flight (this job)
        tasks = Throttle(concurrency * TASKS_PER_SLOT)  # URLs leased, not in a batch
        throttle = self.services.throttle  # the process's limit over all jobs

        def release_request() -> None:
            requests.release()
            throttle.release()

        while not self._stopping:
            await tasks.acquire()
            await requests.acquire()  # a URL is leased only when it can be sent at once
            request = await self._lease()
            if request is None:
                requests.release()
                tasks.release()
                return
            await throttle.acquire()
            task_slot = RequestSlot(tasks.release)  # given up once its page is analysed
            task = asyncio.create_task(
                self._process(request, RequestSlot(release_request), task_slot)
            )
            self._tasks.add(task)
            task.add_done_callback(partial(self._task_done, task_slot))

    def _task_done(self, slot: RequestSlot, task: asyncio.Task[None]) -> None:
        """A task ended: out of the set, and its slot given back if it still holds it
        (it ended before its page's analysis: robots.txt, handed back, retried; or
        was cancelled before it ran)."""
        self._tasks.discard(task)
        slot.release()

    async def _lease(self) -> CrawlRequest | None:
        """The next URL to crawl, or None: stopping, budget spent, frontier exhausted."""
        if not self._running.is_set():
            await self._running.wait()
            if self._stopping:
                return None
        if self.config.max_pages is not None and not await self._within_budget():
            return None
        request = await self.frontier.next()
        if request is None:
            self.exhausted = not self._stopping
        return request

    async def _within_budget(self) -> bool:
        """Wait while in-flight pages could still use up --max-pages."""
        max_pages = self.config.max_pages
        while max_pages is not None and not self._stopping:
            if self._budget_spent():
                return False
            if self._pages_counted() + len(self._tasks) < max_pages:
                return True
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
        return not self._stopping

    def _pages_counted(self) -> int:
        return self.pages_stored + self.commits.batch.pages

    def _budget_spent(self) -> bool:
        max_pages = self.config.max_pages
        return max_pages is not None and self._pages_counted() >= max_pages

    async def _drain(self) -> None:
        """Let in-flight requests finish (bounded when stopping), then cancel the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(
            set(self._tasks), timeout=SHUTDOWN_GRACE_S if self._stopping else None
        )
        await self._cut(pending)

    @staticmethod
    async def _cut(tasks: set[asyncio.Task[None]]) -> None:
        """Cancel requests still in flight; their URLs stay queued (fetched again on
        resume). The commit loop ends only once no task is left."""
        pending = set(tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
