"""Jobs: create, list, show, pause, resume, cancel."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query

from trawler.api.deps import Service, Settings
from trawler.api.jobspec import as_options, job_config, job_seeds
from trawler.api.schemas import Job, JobList, JobRequest, Problem, Responses
from trawler.jobs.model import JobInfo, JobState

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
    config = job_config(body, settings.allow_private)
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


@router.post("/{job_id}/cancel", response_model=Job, responses=CONTROL)
async def cancel_job(job_id: str, service: Service) -> Job:
    """Stop for good; what was stored is kept."""
    return job_view(await service.change_state(job_id, JobState.CANCELLED))
