"""Operators' views: totals over every job, a per-second series, workers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from trawler.api.deps import JobReader, JobService, Service
from trawler.api.schemas import AdminStats, Throughput, Timeseries, Worker
from trawler.jobs.model import JobInfo, UnknownJob

router = APIRouter(prefix="/admin", tags=["admin"])
JOBS_MAX = 10_000
SERIES_S = 600  # the last 10 minutes
T = TypeVar("T")
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx", "none")


async def all_jobs(service: JobService) -> list[JobInfo]:
    """Every job (up to JOBS_MAX), newest first."""
    jobs, _ = await service.list_jobs(None, 0, JOBS_MAX)
    return jobs


def job_states(jobs: list[JobInfo]) -> dict[str, int]:
    states: dict[str, int] = {}
    for job in jobs:
        states[job.state.value] = states.get(job.state.value, 0) + 1
    return states


def each_job(service: JobService, job_ids: list[str], read: Callable[[JobReader], T]) -> list[T]:
    """``read(reader)`` on every job that has stored something."""
    found = []
    for job_id in job_ids:
        try:
            with service.reader(job_id) as reader:
                found.append(read(reader))
        except UnknownJob:  # nothing stored yet (NoCrawlData), or gone since listed
            continue
    return found


@router.get("/stats", response_model=AdminStats)
async def stats(service: Service) -> AdminStats:
    """Workers, queue, throughput now and over 1 and 5 minutes, errors of the last hour, storage."""
    return await collect_stats(service, await all_jobs(service), await service.workers())


async def collect_stats(
    service: JobService, jobs: list[JobInfo], workers: list[dict], now: float | None = None
) -> AdminStats:
    """/admin/stats over ``jobs`` (``all_jobs``) and ``workers`` (``service.workers``)."""
    moment = time.time() if now is None else now
    job_ids = [job.id for job in jobs]
    parts = await run_in_threadpool(
        each_job, service, job_ids, lambda reader: reader.activity(moment)
    )
    total = {"now": 0.0, "last_1m": 0.0, "last_5m": 0.0}
    sums = {"pending": 0, "visited": 0, "pages": 0, "bytes": 0, "last_hour": 0,
            "fetched_last_hour": 0}  # fmt: skip
    for part in parts:
        for key in total:
            total[key] += part["throughput"][key]
        for group in ("queue", "storage", "errors"):
            for key, value in part[group].items():
                sums[key] += value
    fetched = sums["fetched_last_hour"]
    rate = round(sums["last_hour"] / fetched, 4) if fetched else 0.0
    active = sum(1 for worker in workers if worker.get("state") == "live")
    return AdminStats(
        workers={"active": active, "total": len(workers)},
        queue={"pending": sums["pending"], "visited": sums["visited"]},
        throughput=Throughput(**{key: round(value, 3) for key, value in total.items()}),
        errors={"last_hour": sums["last_hour"], "rate": rate},
        storage={"pages": sums["pages"], "bytes": sums["bytes"]},
        jobs=job_states(jobs),
    )


@router.get("/stats/timeseries", response_model=Timeseries)
async def timeseries(service: Service) -> Timeseries:
    """Per second, the last 10 minutes: pages stored, errors, pages by status class,
    body bytes fetched."""
    return await collect_series(service, await all_jobs(service))


async def collect_series(
    service: JobService, jobs: list[JobInfo], now: float | None = None
) -> Timeseries:
    """/admin/stats/timeseries over ``jobs`` (``all_jobs``)."""
    end = int(time.time() if now is None else now) + 1
    start = end - SERIES_S
    parts = await run_in_threadpool(
        each_job, service, [job.id for job in jobs], lambda reader: reader.per_second(start, end)
    )
    pages, errors, size = [0] * SERIES_S, [0] * SERIES_S, [0] * SERIES_S
    classes = {name: [0] * SERIES_S for name in STATUS_CLASSES}
    for rows in parts:
        for second, status_class, failed, count, body_bytes in rows:
            index = second - start
            if not 0 <= index < SERIES_S:
                continue
            pages[index] += count
            errors[index] += count if failed else 0
            size[index] += body_bytes
            name = f"{status_class}xx" if 1 <= status_class <= 5 else "none"
            classes[name][index] += count
    return Timeseries(start=start, step_s=1, pages=pages, errors=errors, status_classes=classes,
                      bytes=size)  # fmt: skip


@router.get("/workers", response_model=list[Worker])
async def workers(service: Service) -> list[Worker]:
    """The processes crawling: the embedded runner, or `trawler worker`s."""
    return [Worker(**worker) for worker in await service.workers()]
