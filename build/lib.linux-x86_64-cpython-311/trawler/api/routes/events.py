"""The dashboard's live stream: a snapshot of the API's numbers every 0.5 s, as
server-sent events (the broadcasting: api/live.py).

Each piece of a snapshot is what its own route answers, read by the same code
(routes/admin.py ``collect_stats``, ``collect_series``; routes/jobs.py
``job_view``), over one listing of the jobs.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from trawler.api.deps import JobReader, JobService
from trawler.api.live import Event, LiveEvents
from trawler.api.routes.admin import all_jobs, collect_series, collect_stats, each_job
from trawler.api.routes.jobs import job_view
from trawler.api.schemas import FeedError, Responses, Snapshot, Worker
from trawler.jobs.model import JobInfo, JobState

router = APIRouter(tags=["live"])
JOBS_SHOWN = 100
ERRORS_SHOWN = 100
FEED_STATES = frozenset({JobState.RUNNING, JobState.PAUSED})
# Under the router's own prefix and token check (app.py): the API's shared error
# answers would be documented as text/event-stream here, and they are JSON.
STREAMED: Responses = {
    200: {
        "description": "Server-sent events, endless: `event: snapshot` at once, then every"
        " 0.5 s, its `data` one line of JSON: `at` (Unix time), `stats` (as /admin/stats),"
        " `series` (as /admin/stats/timeseries), `jobs` (as /jobs/{id}, newest first, at"
        " most 100), `workers` (as /admin/workers), `errors` (rows of /jobs/{id}/errors with"
        " their `job`, newest first, at most 100: of the running and paused jobs, or else of"
        ' the newest). `event: problem` with `{"detail"}` while the job store cannot be'
        " read: the stream goes on.",
    },
    401: {
        "description": "No or wrong bearer token",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    },
}


class EventStream(StreamingResponse):
    media_type = "text/event-stream"


@router.get("/events", response_class=EventStream, responses=STREAMED)
async def events(request: Request) -> EventStream:
    """The dashboard's live numbers. Read it with `fetch` (it needs the token)."""
    live: LiveEvents = request.app.state.live
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy buffering
    return EventStream(live.stream(), headers=headers)


def live_events(service: JobService) -> LiveEvents:
    """The app's one producer of snapshots (create_app keeps it)."""

    async def produce() -> Event:
        return Event("snapshot", (await snapshot(service)).model_dump_json())

    return LiveEvents(produce)


async def snapshot(service: JobService) -> Snapshot:
    jobs = await all_jobs(service)
    workers = await service.workers()
    now = time.time()
    stats = await collect_stats(service, jobs, workers, now)
    series = await collect_series(service, jobs, now)
    errors = await run_in_threadpool(feed_errors, service, jobs)
    return Snapshot(
        at=now, stats=stats, series=series, jobs=[job_view(job, now) for job in jobs[:JOBS_SHOWN]],
        workers=[Worker(**worker) for worker in workers], errors=errors,
    )  # fmt: skip


def feed_errors(service: JobService, jobs: list[JobInfo]) -> list[FeedError]:
    """The latest errors of the running and paused jobs (or else of the newest job),
    newest first."""
    watched = [job.id for job in jobs if job.state in FEED_STATES] or [job.id for job in jobs[:1]]

    def latest(reader: JobReader) -> list[dict]:
        return reader.errors(ERRORS_SHOWN, counted=False)[0]  # the feed shows no counts

    rows = []
    for job_id in watched:
        for found in each_job(service, [job_id], latest):  # none: nothing stored yet
            rows += [FeedError(job=job_id, **row) for row in found]
    rows.sort(key=lambda row: row.fetched_at or 0.0, reverse=True)
    return rows[:ERRORS_SHOWN]
