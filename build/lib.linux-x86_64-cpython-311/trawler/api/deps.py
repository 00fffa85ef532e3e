"""What the routes depend on: the settings, the bearer token check, and the
protocols the API reaches jobs through, kept small so that the job store and the
job runner plug in behind them:

- ``JobService``: list, show, create, pause/resume/cancel jobs, open a job's
  ``JobReader``, check the store, list workers;
- ``JobReader``: one job's stored data (``SqliteJobReader`` for the embedded
  layout: sqlitereader.py, calling the store's own read functions);
- ``OperatorControls``: the blocklist and live politeness (the runner's).

``DataDirJobs`` (datadir.py) backs ``JobService`` with today's layout, one job
per data directory, and has no runner: its job-control methods validate the
transition, then raise ``JobControlUnavailable`` (501); ``NoRunner`` does the same
for ``OperatorControls``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from trawler.config import CrawlConfig
from trawler.jobs.model import JobInfo, JobState, UnknownJob
from trawler.recrawl import RevisitWindow
from trawler.store.search import SearchHit
from trawler.store.sqlite_read import PageFilter


class JobControlUnavailable(RuntimeError):
    """This server cannot start or steer jobs (no runner): the API answers 501."""


class SearchUnavailable(JobControlUnavailable):
    """This backend has no full-text index (the API answers 501)."""


class StoreUnavailable(RuntimeError):
    """The job store cannot be read (the API answers 503); the message says why."""


class NoCrawlData(UnknownJob):
    """The job exists but has stored nothing yet (the API: 404)."""


class JobReader(Protocol):
    """One job's stored data, for one request; a context manager that closes it.
    Blocking: routes call it on a worker thread."""

    def __enter__(self) -> JobReader: ...

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None: ...

    def close(self) -> None: ...

    def export_rows(
        self, include_noindex: bool, kinds: frozenset[str], versions: str = "latest"
    ) -> Iterator[dict]:
        """The rows of `trawler export --versions`, streamed (reading stops at ``close``):
        a revisited page's latest version, or ``all`` of them."""

    def export_columns(self) -> tuple[str, ...]:
        """The export's columns (``version`` too once a page has a later version)."""

    def versions(self, url: str, text: bool) -> list[dict]:
        """A normalised URL's versions, oldest first, as `trawler versions URL` (empty
        when not stored or not revisited yet)."""

    def pages(
        self, wanted: PageFilter, offset: int, limit: int, newest_first: bool = False
    ) -> tuple[list[dict], int]:
        """Export rows ``wanted`` keeps, in commit order (or its reverse), and how many
        match in all."""

    def errors(
        self, limit: int, code: str | None = None, host: str | None = None, counted: bool = True
    ) -> tuple[list[dict], dict[str, int]]:
        """The latest failed fetches (of that error code, that host), newest first; the
        count of each error code over the whole job (none unless ``counted``)."""

    def search(
        self, query: str, limit: int, host: str | None, since: float | None, until: float | None
    ) -> tuple[list[SearchHit], int]:
        """The engine of `trawler search`: the best hits, and how many match in all."""

    def url_report(self, url: str) -> dict:
        """State, fetch history, robots.txt verdict and link counts of a normalised URL."""

    def hosts(self, offset: int, limit: int, sort: str = "host") -> tuple[list[dict], int]:
        """A page of the job's hosts in ``sort`` order (sqlite_hosts.HOST_ORDERS), with
        interval, back-off and robots.txt; and how many hosts in all."""

    def host_report(self, host: str) -> dict | None: ...

    def activity(self, now: float) -> dict:
        """Throughput, errors of the last hour, storage, queue (sqlite_read.activity)."""

    def per_second(self, start: float, end: float) -> list[tuple]:
        """(second, status class, failed, pages, body bytes) rows for [start, end)."""

    def metric_numbers(self, bounds: tuple[float, ...]) -> tuple[dict, list, float, int]:
        """Totals for /metrics, and the fetch-duration histogram at ``bounds``."""


class JobService(Protocol):
    async def list_jobs(
        self, states: frozenset[JobState] | None, offset: int, limit: int
    ) -> tuple[list[JobInfo], int]:
        """Jobs newest first (``states`` None: all), and how many match in all."""

    async def get_job(self, job_id: str) -> JobInfo:
        """One job with its numbers; ``UnknownJob`` if there is none of that id."""

    async def create_job(self, config: CrawlConfig, seeds: list[str]) -> JobInfo:
        """Create a job from checked, normalised seeds and start it."""

    async def change_state(self, job_id: str, wanted: JobState) -> JobInfo:
        """Pause (PAUSED), resume (RUNNING) or cancel (CANCELLED) a job;
        ``InvalidTransition`` when its state does not allow it."""

    async def recrawl_job(self, job_id: str, window: RevisitWindow) -> JobInfo:
        """Start a revisit pass of the job's stored pages (jobs/local.py ``recrawl``; for
        the workers, jobs/postgres_passes.py ``start_pass``); ``InvalidTransition`` when
        the job's state does not allow it,
        ``JobControlUnavailable`` where this backend has none."""

    def reader(self, job_id: str) -> JobReader:
        """The job's stored data; ``UnknownJob`` if there is no such job, ``NoCrawlData``
        if it stored nothing yet, ``StoreUnavailable`` if it cannot be read."""

    async def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the job store answers."""

    async def workers(self) -> list[dict]:
        """The processes crawling: id, state, current_url, pages, uptime_s, last_heartbeat."""


class OperatorControls(Protocol):
    """Process-wide controls over every job: the domain blocklist and live politeness
    (the job runner's). Without a runner, each raises ``JobControlUnavailable``."""

    async def blocklist(self) -> list[dict]:
        """Entries: domain, reason, added_at (Unix time)."""

    async def block(self, domain: str, reason: str) -> dict:
        """Block ``domain`` and its subdomains at once (queued URLs and new links);
        ValueError (one line) for a name that is no domain."""

    async def unblock(self, domain: str) -> bool:
        """False when ``domain`` was not blocked."""

    async def politeness(self) -> dict:
        """delay, max_crawl_delay, concurrency: each None while jobs keep their own."""

    async def set_politeness(
        self, delay: float | None, max_crawl_delay: float | None, concurrency: int | None
    ) -> dict:
        """Apply to every running job at once, without restarting it."""


class NoRunner:
    """``OperatorControls`` of a server without a job runner: 501 for each."""

    def _unavailable(self) -> JobControlUnavailable:
        return JobControlUnavailable("this server has no job runner to apply it to")

    async def blocklist(self) -> list[dict]:
        raise self._unavailable()

    async def block(self, domain: str, reason: str) -> dict:
        raise self._unavailable()

    async def unblock(self, domain: str) -> bool:
        raise self._unavailable()

    async def politeness(self) -> dict:
        raise self._unavailable()

    async def set_politeness(
        self, delay: float | None, max_crawl_delay: float | None, concurrency: int | None
    ) -> dict:
        raise self._unavailable()


@dataclass(slots=True, frozen=True)
class ApiSettings:
    token: str  # every /api/v1 request must carry "Authorization: Bearer <token>"
    allow_private: bool = False  # may a job ask to fetch private addresses?
    # Jobs render in this process (`trawler serve --data`): a job asking for --render
    # needs Playwright and chromium here. Distributed: the workers render, not the server.
    renders_here: bool = False


def get_service(request: Request) -> JobService:
    return request.app.state.service


def get_operations(request: Request) -> OperatorControls:
    return request.app.state.operations


def get_settings(request: Request) -> ApiSettings:
    return request.app.state.settings


_bearer = HTTPBearer(
    auto_error=False, description="The token `trawler serve` printed or was given."
)


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the request carries the server's bearer token (compared in constant time)."""
    expected = get_settings(request).token.encode()
    given = credentials.credentials.encode() if credentials is not None else b""
    if credentials is None or not secrets.compare_digest(given, expected):
        raise HTTPException(
            401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )


Service = Annotated[JobService, Depends(get_service)]
Settings = Annotated[ApiSettings, Depends(get_settings)]
Operations = Annotated[OperatorControls, Depends(get_operations)]


def unix(moment: datetime | None) -> float | None:
    """A query's date as Unix time (a date without a zone is UTC, as `trawler search`)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
