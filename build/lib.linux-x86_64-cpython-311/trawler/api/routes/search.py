"""Full-text search over the jobs' pages: the engine of `trawler search`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from trawler.api.deps import JobService, NoCrawlData, SearchUnavailable, Service, unix
from trawler.api.routes.jobs import NOT_FOUND
from trawler.api.schemas import Problem, Responses, SearchResult, SearchResults

router = APIRouter(tags=["search"])
JOBS_SEARCHED_MAX = 1000


NO_INDEX: Responses = {
    501: {"model": Problem, "description": "This backend has no full-text index"}
}


@router.get("/search", response_model=SearchResults, responses={**NOT_FOUND, **NO_INDEX})
async def search(
    service: Service,
    q: Annotated[
        str, Query(max_length=2000, description='Words (AND), "phrases", -excluded, prefix*.')
    ],
    job: Annotated[str | None, Query(max_length=200, description="Only this job [all].")] = None,
    host: Annotated[str | None, Query(max_length=1000, description="host[:port] only.")] = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10,
) -> SearchResults:
    """Best match first; noindex pages and duplicates left out, as `trawler search`."""
    if not getattr(service, "searchable", True):  # whatever the jobs: the backend can't
        raise SearchUnavailable(getattr(service, "search_unavailable", "no full-text index"))
    if job is not None:
        job_ids = [(await service.get_job(job)).id]
    else:
        jobs, _ = await service.list_jobs(None, 0, JOBS_SEARCHED_MAX)
        job_ids = [info.id for info in jobs]
    results: list[SearchResult] = []
    total = 0
    for job_id in job_ids:
        found, count = await _search_job(service, job_id, q, limit, host, unix(since), unix(until))
        results += found
        total += count
    results.sort(key=lambda hit: -hit.score)  # scores of one query: comparable enough
    return SearchResults(results=results[:limit], total=total)


async def _search_job(
    service: JobService, job_id: str, q: str, limit: int, host: str | None,
    since: float | None, until: float | None,
) -> tuple[list[SearchResult], int]:  # fmt: skip
    from starlette.concurrency import run_in_threadpool

    def run() -> tuple[list[SearchResult], int]:
        try:
            with service.reader(job_id) as reader:
                hits, count = reader.search(q, limit, host, since, until)
        except NoCrawlData:
            return [], 0  # nothing stored yet
        found = [SearchResult(url=h.url, title=h.title, snippet=h.snippet, fetched_at=h.fetched_at,
                              host=h.host, score=h.score, job=job_id) for h in hits]  # fmt: skip
        return found, count

    return await run_in_threadpool(run)
