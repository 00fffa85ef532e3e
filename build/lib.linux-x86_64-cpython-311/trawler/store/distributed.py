"""The distributed backend: Redis frontier, PostgreSQL metadata, WARC files per worker.

``commit()`` keeps the crawl's commit point across three systems by ordering,
not by a distributed transaction (docs/architecture.md):

1. the batch's WARC records are written to this worker's own file and fsynced;
2. the page rows, counters and attempts go to PostgreSQL in one transaction
   (``ON CONFLICT (job_id, url) DO NOTHING``: a page is stored at most once),
   a page whose rows are rejected kept as a ``store_error`` row; the batch's
   ``CommitKey``, made before its first try, is recorded in the same transaction,
   so a retry after an unknown outcome applies nothing twice;
3. one Redis script adds the discovered URLs to the seen set and the host
   queues (within --max-pages-per-host), the job's pages stored as 2 counted
   them are recorded (--max-pages), and the leases of the batch's URLs are
   acknowledged (frontier/redis_budget.py: budgets exact over all workers).

A continuous job's or a revisit pass's revisits (dist_revisits.py) ride the same
three steps: their WARC records in 1, their visits, versions and state in 2's
transaction, their leases ended after 3.

A worker killed between 2 and 3 leaves its leases to expire: the URLs are
fetched again by some worker and their pages are not stored twice. A kill
between 1 and 2 leaves WARC records no row points to, which is harmless.

Through an outage of Redis or PostgreSQL (outage.py) the commit waits, its
results kept in memory, and the frontier hands out no new URL while the store
is down. Only a worker told to stop during an outage gives its uncommitted
results up (``ServiceUnavailable``): their URLs stay leased and are fetched
again; nothing committed is lost.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trawler import __version__
from trawler.config import CrawlConfig
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions
from trawler.outage import OutageAbandoned, ServiceHealth, ServiceUnavailable
from trawler.politeness import PolitenessPolicy
from trawler.recrawl import RevisitWindow
from trawler.store import pg_passes
from trawler.store.base import CommitBatch, archive_batch
from trawler.store.dist_revisits import DistributedRevisits
from trawler.store.pg_dedup import SharedDedup
from trawler.store.pg_provenance import provenance_writes
from trawler.store.postgres import CommitKey, PostgresStore
from trawler.store.warc import WarcWriter, recover


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class DistributedBackend:
    def __init__(
        self,
        store: PostgresStore,
        redis_url: str,
        job_id: str,
        warc_dir: Path,
        worker_id: str,
        lease_timeout_s: float = 60.0,
        redis_health: ServiceHealth | None = None,
    ) -> None:
        self.lease_timeout_s = lease_timeout_s
        self.redis_health = redis_health
        self.store = store
        self.redis_url = redis_url
        self.job_id = job_id
        self.warc_dir = warc_dir
        self.worker_id = worker_id
        # This backend's commits, one at a time: their ids in applied_commits.
        self.writer = f"{worker_id}-{uuid.uuid4().hex[:8]}"
        self.frontier: RedisFrontier | None = None
        self.warc: WarcWriter | None = None
        # Duplicates are marked in the commit's transaction against every worker's
        # pages (store/pg_dedup.py), not by this worker's WARC thread.
        self.dedup = SharedDedup()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="trawler-warc")
        self._closed = False
        self.revisits: DistributedRevisits | None = None  # open_revisits: continuous or a pass
        self.pass_due_at: float | None = None  # an on-demand pass's pages: due by then
        self._warc_max_bytes = 2**30

    async def open(self, config: CrawlConfig) -> RedisFrontier:
        policy = PolitenessPolicy.from_config(config)
        options = RedisFrontierOptions(
            job_id=self.job_id, worker_id=self.worker_id, lease_timeout_s=self.lease_timeout_s,
            max_pages=config.max_pages, max_pages_per_host=config.max_pages_per_host,
        )  # fmt: skip
        self.frontier = await RedisFrontier.connect(
            self.redis_url, policy, options, self.redis_health
        )
        self.frontier.gate = self.store.health  # no new URLs while the store is down
        self.warc_dir.mkdir(parents=True, exist_ok=True)
        self.dedup = SharedDedup(config.near_duplicate_bits)
        self._warc_max_bytes = config.warc_max_bytes
        self.warc = WarcWriter(
            self.warc_dir, prefix=f"trawler-{self.worker_id}",
            max_bytes=config.warc_max_bytes, software=f"Trawler/{__version__}",
        )  # fmt: skip
        return self.frontier

    async def commit(self, batch: CommitBatch) -> None:
        assert self.frontier is not None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._write_warc, batch)
        done = [outcome.request for outcome in batch.outcomes if outcome.finished]
        revisits = self.revisits
        if revisits is None:  # kept for a pass some day (a continuous job's are in its seeds)
            also = pg_passes.validator_writes(self.job_id, batch.outcomes)
        else:
            also = revisits.rows_of(batch.outcomes, batch.revisits)
        also = provenance_writes(self.job_id, batch.outcomes, also)
        commit = CommitKey.new(self.writer)  # before the first try: its retries share it
        try:
            pages_stored = await self.store.store_outcomes(
                self.job_id, batch.outcomes, batch.outcome_counters(), batch.robots_records,
                also, commit, self.dedup,
            )  # fmt: skip
            await self.frontier.commit(batch.all_new_requests(), done, pages_stored)
            await self._count_budget_refusals()
            if batch.revisits:  # their rows are committed: end their leases last
                await self.frontier.revisits.done([r.request for r in batch.revisits])
        except OutageAbandoned as exc:  # a CancelledError: the engine must see a failure
            raise ServiceUnavailable(
                f"{exc}; {len(done)} results not committed (their URLs will be fetched again)"
            ) from None

    async def _count_budget_refusals(self) -> None:
        """The job's URLs refused for their host's budget, counted once each in Redis
        (frontier/redis_budget.py), into its ``rejected.host_budget`` counter."""
        assert self.frontier is not None
        if self.frontier.budget_refusals:
            total = await self.frontier.host_budget_refused()
            await self.store.raise_counter(self.job_id, "rejected.host_budget", total)
            self.frontier.budget_refusals = 0  # after: a commit retried raises it again

    def _write_warc(self, batch: CommitBatch) -> None:
        assert self.warc is not None
        archive_batch(batch, self.warc, None)  # duplicates: in store_outcomes
        if batch.revisits:
            assert self.revisits is not None
            self.revisits.archive(batch.revisits)

    # -- revisits of a continuous job or a pass (recrawl_flow.py; dist_revisits.py) --
    async def open_revisits(self, window: RevisitWindow) -> None:
        self.revisits = DistributedRevisits.open(
            self.store, self.job_id, window, self.warc_dir, self.worker_id,
            self._warc_max_bytes, claim_s=self.lease_timeout_s, pass_due_at=self.pass_due_at,
        )  # fmt: skip

    async def feed_revisits(self, frontier: RedisFrontier) -> None:
        """Queue due pages in the hosts' revisit lanes in Redis, until cancelled."""
        assert self.revisits is not None
        await self.revisits.feed(frontier)

    async def host_url_counts(self) -> None:
        # --max-pages-per-host is kept, and its refusals counted, for the job in Redis
        # (redis_budget.py): the link filter leaves it to the frontier.
        return None

    async def scope_hosts(self) -> list[str]:
        return await self.store.scope_hosts(self.job_id)

    async def add_scope_hosts(self, hosts: list[str]) -> None:
        await self.store.add_scope_hosts(self.job_id, hosts)

    async def seeds_added(self) -> None:
        pass  # `trawler submit` seeds a distributed job, whole, before it is committed

    async def close(self) -> None:
        if self._closed:  # the worker closes it again when the crawl could not start
            return
        self._closed = True
        try:
            loop = asyncio.get_running_loop()
            if self.warc is not None:
                await loop.run_in_executor(self._writer, self.warc.close)
            if self.revisits is not None:
                await loop.run_in_executor(self._writer, self.revisits.close)
            if self.frontier is not None:
                await self.frontier.aclose()
        finally:
            self._writer.shutdown()


def repair_dead_workers_warc(warc_dir: Path) -> list[str]:
    """Close WARC files left open by crashed workers (complete records kept).

    Whatever a worker is called: each writer holds a lock on its open file for as
    long as it runs (trawler.locks), so a file whose lock is free lost its writer
    and is repaired, under the final name its stored rows point to; a live
    worker's file sharing the directory is left alone. Records a row points to
    were fsynced before the row was committed, so the scan keeps all of them.
    """
    return recover(warc_dir)
