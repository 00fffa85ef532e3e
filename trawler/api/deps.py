"""What the routes depend on: the settings, the bearer token check, and the one
protocol the API drives jobs through (``JobService``).

``JobService`` is deliberately small so that the job store and the job runner can
be plugged in behind it: every route reaches jobs through these methods and reads
a job's crawl data from the directory ``data_dir`` names (the embedded layout:
``trawler.db``, WARC files). ``DataDirJobs`` (datadir.py) backs it with today's
layout, one job per data directory, and has no runner: its job-control methods
validate the transition, then raise ``JobControlUnavailable`` (501).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from trawler.config import CrawlConfig
from trawler.jobs.model import JobInfo, JobState


class JobControlUnavailable(RuntimeError):
    """This server cannot start or steer jobs (no runner): the API answers 501."""


class StoreUnavailable(RuntimeError):
    """The job store cannot be read (the API answers 503); the message says why."""


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

    def data_dir(self, job_id: str) -> Path:
        """The directory holding the job's crawl data; ``UnknownJob`` if none."""

    async def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the job store answers."""

    async def workers(self) -> list[dict]:
        """The processes crawling: id, state, current_url, pages, uptime_s, last_heartbeat."""


@dataclass(slots=True, frozen=True)
class ApiSettings:
    token: str  # every /api/v1 request must carry "Authorization: Bearer <token>"
    allow_private: bool = False  # may a job ask to fetch private addresses?


def get_service(request: Request) -> JobService:
    return request.app.state.service


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
