"""One crawl's commit cadence and its back-pressure.

Results collect in a batch (store/base.py ``CommitBatch``) that a commit makes
durable every ``COMMIT_INTERVAL_S``, or sooner once it holds
``COMMIT_MAX_ITEMS`` rows; only in the backend's commit are discovered URLs
scheduled and leases acknowledged. While one commit runs, the next batch grows
up to ``limit`` rows or ``limit_bytes`` of pages; then the tasks that would add
to it wait for the commit (``room``): discovery never outruns the commit, memory
never outruns the writer, and tasks with nothing to add go on fetching meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from trawler.slowstop import wait_event
from trawler.store.base import Backend, CommitBatch, UrlOutcome

# 0.5 s and 5,000 rows cut the writer's CPU a page by 13 % in bench/bench_commit.py,
# but not in the crawl benchmark, where they raised peak RSS by ~25 MB and delayed
# the end (bench/RESULTS.md, issue 14, session 35).
COMMIT_INTERVAL_S = 0.25
COMMIT_MAX_ITEMS = 2000  # commit early when a batch grows past this
# While a commit runs, the next batch grows up to this many rows, then the tasks that
# would add to it wait for the commit.
BATCH_LIMIT_ITEMS = 20 * COMMIT_MAX_ITEMS
# ... and up to this many bytes of pages (CommitBatch.size_bytes). Rows alone let it hold
# ~20,000 pages: on the 2,000-host benchmark beside a busy loop (the writer behind)
# commits of up to 7,361 pages came 6 s apart and the crawl process peaked at 445-535
# MB, against 311-334 with this bound (bench/RESULTS.md, issue 14, session 42). A
# batch of the benchmark's 0.25 s holds ~6 MB.
BATCH_LIMIT_BYTES = 16 << 20


class Commits:
    def __init__(self, backend: Backend, take_counters: Callable[[], dict[str, int]]) -> None:
        """``take_counters``: the crawl's counters since the last call (each commit
        stores them with its batch)."""
        self.backend = backend
        self.take_counters = take_counters
        self.batch = CommitBatch()
        self.limit = BATCH_LIMIT_ITEMS
        self.limit_bytes = BATCH_LIMIT_BYTES
        self._wanted = asyncio.Event()
        self._taken = asyncio.Event()  # set (and replaced) when a commit takes the batch

    def add(self, outcome: UrlOutcome, size: int = 0) -> None:
        """A URL's whole outcome, at once (no await between its parts); ``size``: the
        bytes its page holds (throttle.py's estimate)."""
        self.batch.add(outcome, size)
        if len(self.batch) >= COMMIT_MAX_ITEMS:
            self._wanted.set()

    def want(self) -> None:
        """Commit now rather than at the next interval."""
        self._wanted.set()

    async def room(self) -> None:
        """Back-pressure: a full batch waits for the commit (the one running, then its own)."""
        while len(self.batch) >= self.limit or self.batch.size_bytes >= self.limit_bytes:
            self._wanted.set()
            await self._taken.wait()

    async def wanted(self) -> None:
        """Until a commit is wanted or the interval has passed."""
        await wait_event(self._wanted, COMMIT_INTERVAL_S)
        self._wanted.clear()

    async def commit(self) -> int:
        """Make the batch durable; returns its pages."""
        batch, self.batch = self.batch, CommitBatch()
        self._taken.set()
        self._taken = asyncio.Event()
        batch.counters = self.take_counters()
        if not len(batch):
            return 0
        await self.backend.commit(batch)
        return batch.pages
