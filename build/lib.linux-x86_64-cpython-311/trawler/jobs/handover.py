"""Jobs handed from one process to another: a job's seeds put into its frontier by
the process that accepts it, to be crawled by whichever process starts it
(``seed_job``); jobs left ``running`` by a process that died (``mark_orphans``);
and why a job may not start now (``NoFreeSlot``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path

from trawler.config import CrawlConfig
from trawler.engine import Crawler
from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.jobdata import job_backend, record_run_start
from trawler.jobs.layout import job_dir
from trawler.jobs.model import InvalidTransition, JobState
from trawler.locks import JobBusy, lock_job
from trawler.seeds import CHUNK
from trawler.services import Services
from trawler.urls import Normaliser


class NoFreeSlot(InvalidTransition):
    """Every slot (``max_running_jobs``) is taken: the job stays as it is (the API: 409)."""

    def __init__(self, job_id: str, current: JobState, limit: int) -> None:
        super().__init__(job_id, current, JobState.RUNNING)
        self.args = (f"job {job_id} stays {current}: {limit} job(s) run already"
                     " (--max-running-jobs); it starts when a slot frees",)  # fmt: skip

    def __str__(self) -> str:
        return str(self.args[0])


def seed_chunks(seeds: Iterable[str], config: CrawlConfig) -> list[list[str]]:
    """The seeds normalised, each once, in frontier-sized chunks; ValueError (one line)
    for one that is not an http(s) URL."""
    normalise = Normaliser(config.tracking_params)
    urls = list(dict.fromkeys(_normalised(normalise, seeds)))
    return [urls[i : i + CHUNK] for i in range(0, len(urls), CHUNK)]


async def seed_job(
    data_dir: Path, job_id: str, config: CrawlConfig, chunks: list[list[str]], services: Services
) -> None:
    """The seeds into the job's frontier, without a request: a crawler stopped
    before it runs adds its seeds, commits them and ends."""
    backend = await asyncio.to_thread(job_backend, data_dir, job_id)
    await asyncio.to_thread(record_run_start, backend, job_id, config, "seeding")
    crawler = Crawler(config, backend, seeds=chunks, services=services)
    crawler.stop()
    await crawler.run(0)


async def mark_orphans(store: EmbeddedJobStore, reason: str) -> None:
    """Jobs ``running`` whose process is gone (their lock is free) become paused,
    with ``reason``: the reason that lets a runner resume them."""
    orphans, _ = await store.list([JobState.RUNNING], 0, 1_000_000)
    for info in orphans:
        try:
            lock = await asyncio.to_thread(lock_job, job_dir(store.data_dir, info.id), info.id)
        except JobBusy:
            continue  # a live process runs it
        try:
            with contextlib.suppress(InvalidTransition):
                await store.transition(info.id, JobState.PAUSED, reason)
        finally:
            lock.close()


def _normalised(normalise: Normaliser, seeds: Iterable[str]) -> Iterable[str]:
    for seed in seeds:
        url = normalise(seed.strip())
        if url is None:
            raise ValueError(f"{seed[:200]!r} is not an http(s) URL")
        yield url


def one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
