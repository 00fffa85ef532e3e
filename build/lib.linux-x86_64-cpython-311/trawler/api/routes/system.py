"""``/health`` and ``/metrics``: for probes and Prometheus, without the token."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from trawler.api.deps import JobService, Service, StoreUnavailable
from trawler.api.metrics import LATENCY_BOUNDS_S, JobNumbers, render
from trawler.api.schemas import Health
from trawler.jobs.model import UnknownJob

router = APIRouter(tags=["service"])
JOBS_MAX = 10_000


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "The job store cannot be read"}},
)
async def health(service: Service) -> Health | JSONResponse:
    """Whether the job store answers (200) or not (503)."""
    try:
        await service.check()
    except StoreUnavailable as exc:
        body = Health(status="unavailable", detail=" ".join(str(exc).split()))
        return JSONResponse(body.model_dump(), status_code=503)
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
            "description": "Prometheus text format",
        }
    },  # fmt: skip
)
async def metrics(service: Service) -> Response:
    """Pages, responses by status class, errors by code, robots denials, bytes, fetch
    latency, frontier size, active hosts: each labelled by job."""
    jobs, _ = await service.list_jobs(None, 0, JOBS_MAX)
    states = {job.id: job.state.value for job in jobs}
    numbers = await run_in_threadpool(_read_numbers, service, states)
    workers = await service.workers()
    active = sum(1 for worker in workers if worker.get("state") == "live")
    return Response(render(numbers, active), media_type=CONTENT_TYPE_LATEST)


def _read_numbers(service: JobService, states: dict[str, str]) -> list[JobNumbers]:
    numbers = []
    for job_id, state in states.items():
        try:
            with service.reader(job_id) as reader:
                totals, buckets, total_s, count = reader.metric_numbers(LATENCY_BOUNDS_S)
        except (UnknownJob, StoreUnavailable):  # gone since listed, nothing stored, unreadable
            continue  # /health says why; the other jobs are still worth a scrape
        numbers.append(JobNumbers(job_id, state, totals, buckets, total_s, count))
    return numbers
