"""Jobs: create, list, show, pause, resume, cancel, recrawl (a revisit pass)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from trawler.api.deps import Service, Settings
from trawler.api.jobspec import as_options, job_config, job_seeds
from trawler.api.schemas import Job, JobList, JobRequest, Problem, RecrawlRequest, Responses
from trawler.jobs.model import JobInfo, JobState
from trawler.recrawl import DEFAULT_REVISIT_MAX_S, DEFAULT_REVISIT_MIN_S, RevisitWindow

router = APIRouter(prefix="/jobs", tags=["jobs"])
NOT_FOUND: Responses = {404: {"model": Problem, "description": "No job of that id"}}
CONTROL: Responses = {
    **NOT_FOUND,
    409: {"model": Problem, "description": "The job's state does not allow it"},
    501: {"model": Problem, "description": "This server cannot steer jobs"},
}


def job_view(info: JobInfo, now: float | None = None) -> Job:
    return Job(
        id=info.id, state=info.state, seeding=info.seeding, pages_crawled=info.pages_crawled,
        urls_queued=info.urls_queued, errors=info.errors, pages_per_s=info.pages_per_s,
        created_at=info.created_at, started_at=info.started_at, finished_at=info.finished_at,
        estimated_completion=estimated_completion(info, time.time() if now is None else now),
        options=as_options(info.options),
    )  # fmt: skip


def estimated_completion(info: JobInfo, now: float) -> float | None:
    """When a running job will be done at its current pace: its queue, or what is left
    of its page budget if smaller. None when it is not running or has no pace yet."""
    if info.state != JobState.RUNNING or info.seeding or info.pages_per_s <= 0:
        return None
    left = info.urls_queued
    budget = info.options.get("max_pages")
    if isinstance(budget, int):
        left = min(left, max(budget - info.pages_crawled, 0))
    return round(now + left / info.pages_per_s, 3)


@router.post("", status_code=201, response_model=Job, responses=CONTROL)
async def create_job(body: JobRequest, service: Service, settings: Settings) -> Job:
    """Start a crawl: `seeds` and any option of `trawler crawl` by its name with underscores."""
    config = job_config(body, settings.allow_private, settings.renders_here)
    seeds = job_seeds(body, config)
    return job_view(await service.create_job(config, seeds))


@router.get("", response_model=JobList)
async def list_jobs(
    service: Service,
    state: Annotated[list[JobState] | None, Query(description="Only jobs in these states.")] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JobList:
    """Jobs, newest first."""
    states = frozenset(state) if state else None
    jobs, total = await service.list_jobs(states, offset, limit)
    now = time.time()
    return JobList(jobs=[job_view(j, now) for j in jobs], total=total, offset=offset, limit=limit)


@router.get("/{job_id}", response_model=Job, responses=NOT_FOUND)
async def get_job(job_id: str, service: Service) -> Job:
    return job_view(await service.get_job(job_id))


@router.post("/{job_id}/pause", response_model=Job, responses=CONTROL)
async def pause_job(job_id: str, service: Service) -> Job:
    """No new request starts; those in flight finish and are stored."""
    return job_view(await service.change_state(job_id, JobState.PAUSED))


@router.post("/{job_id}/resume", response_model=Job, responses=CONTROL)
async def resume_job(job_id: str, service: Service) -> Job:
    return job_view(await service.change_state(job_id, JobState.RUNNING))


@router.post("/{job_id}/recrawl", status_code=202, response_model=Job, responses=CONTROL)
async def recrawl_job(job_id: str, service: Service, body: RecrawlRequest | None = None) -> Job:
    """Revisit the job's stored pages once, now, with conditional GET (`trawler recrawl
    --job ID`): changed pages become new versions. The job, finished or cancelled, is
    running while the pass lasts, then back to the state it had. 409 for a job in
    another state, with no stored page, or with no free slot."""
    given = body or RecrawlRequest()
    job = await service.get_job(job_id)  # 404 before the body's window is judged
    window = recrawl_window(given, job.options)
    return job_view(await service.recrawl_job(job_id, window))


def recrawl_window(body: RecrawlRequest, options: dict) -> RevisitWindow:
    """The body's bounds, each one missing the job's own; 422 naming the field when
    the window does not hold (its max below its min)."""
    low = body.revisit_min_s or float(options.get("revisit_min_s") or DEFAULT_REVISIT_MIN_S)
    high = body.revisit_max_s or float(options.get("revisit_max_s") or DEFAULT_REVISIT_MAX_S)
    if high < low:
        field = "revisit_max_s" if body.revisit_max_s is not None else "revisit_min_s"
        msg = f"revisit_max_s ({high:g}) must not be below revisit_min_s ({low:g})"
        raise RequestValidationError([{"loc": ("body", field), "msg": msg, "type": "value_error"}])
    return RevisitWindow(low, high)


@router.post("/{job_id}/cancel", response_model=Job, responses=CONTROL)
async def cancel_job(job_id: str, service: Service) -> Job:
    """Stop for good; what was stored is kept."""
    return job_view(await service.change_state(job_id, JobState.CANCELLED))
