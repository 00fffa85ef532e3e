"""Analysis: what a job knows of one URL, and of its hosts."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from starlette.concurrency import run_in_threadpool

from trawler.api.deps import NoCrawlData, Service
from trawler.api.jobspec import invalid_query
from trawler.api.routes.jobs import NOT_FOUND
from trawler.api.schemas_reports import HostList, HostReport, HostRow, UrlReport
from trawler.jobs.model import UnknownJob
from trawler.urls import normalise

router = APIRouter(tags=["analysis"])
JobParam = Annotated[str | None, Query(max_length=200, description="The job [the newest].")]


class HostSort(StrEnum):
    """host: by name; the others biggest first (busiest, most failing, slowest)."""

    host = "host"
    fetched = "fetched"
    queued = "queued"
    errors = "errors"
    error_rate = "error_rate"
    mean_response_s = "mean_response_s"


async def _job_id(service: Service, job: str | None) -> str:
    if job is not None:
        return (await service.get_job(job)).id
    jobs, _ = await service.list_jobs(None, 0, 1)
    if not jobs:
        raise UnknownJob("no job yet")
    return jobs[0].id


@router.get("/urls", response_model=UrlReport, responses=NOT_FOUND)
async def url_report(
    service: Service,
    url: Annotated[str, Query(max_length=8192, description="The URL, as given or normalised.")],
    job: JobParam = None,
) -> UrlReport:
    """Its normalised form, state, fetch history, robots.txt verdict and link counts."""
    normalised = normalise(url)
    if normalised is None:
        raise invalid_query("url", f"not an http(s) URL: {url[:200]!r}")
    job_id = await _job_id(service, job)

    def read() -> dict:
        with service.reader(job_id) as reader:
            return reader.url_report(normalised)

    report = await run_in_threadpool(read)
    return UrlReport(job=job_id, **report)


@router.get("/hosts", response_model=HostList, responses=NOT_FOUND)
async def hosts(
    service: Service,
    job: JobParam = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    sort: HostSort = HostSort.host,
) -> HostList:
    """The job's hosts, by name or biggest first: queued, fetched, errors, error rate,
    mean response time, interval and back-off now, robots.txt."""
    try:
        job_id = await _job_id(service, job)
    except UnknownJob:
        if job is not None:
            raise
        return HostList(hosts=[], total=0, offset=offset, limit=limit)

    def read() -> tuple[list[dict], int]:
        try:
            with service.reader(job_id) as reader:
                return reader.hosts(offset, limit, sort.value)
        except NoCrawlData:
            return [], 0

    rows, total = await run_in_threadpool(read)
    return HostList(hosts=[HostRow(job=job_id, **row) for row in rows], total=total,
                    offset=offset, limit=limit)  # fmt: skip


@router.get("/hosts/{host}", response_model=HostReport, responses=NOT_FOUND)
async def host_report(host: str, service: Service, job: JobParam = None) -> HostReport:
    """One host: its numbers, interval and back-off now, its robots.txt and Crawl-delay."""
    job_id = await _job_id(service, job)

    def read() -> dict | None:
        with service.reader(job_id) as reader:
            return reader.host_report(host)

    report = await run_in_threadpool(read)
    if report is None:
        raise HTTPException(404, f"job {job_id} has no host {host[:200]!r}")
    return HostReport(job=job_id, **report)
