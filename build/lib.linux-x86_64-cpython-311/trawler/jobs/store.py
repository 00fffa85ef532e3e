"""The job store contract: one class per backend with these methods, one contract
test suite run against both (tests/unit/test_job_store.py).

- embedded: ``EmbeddedJobStore`` (jobs/embedded.py), the registry ``DATA/jobs.db``;
- distributed: ``PostgresJobStore`` (jobs/postgres.py), the ``jobs`` and
  ``job_events`` tables.

Every change of state goes through ``transition``: checked with
``check_transition`` (``InvalidTransition`` otherwise) and recorded as a
``JobEvent`` in the same transaction, so a job's events always end in its state.
A job's first event (``from_state`` None) is its creation.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Protocol

from trawler.config import CrawlConfig
from trawler.jobs.model import JobEvent, JobInfo, JobState

# Unfinished jobs: `trawler crawl --data DIR` with no seeds resumes the newest of them.
UNFINISHED = (JobState.PENDING, JobState.RUNNING, JobState.PAUSED)
DEFAULT_PAGE = 50


class JobStore(Protocol):
    async def create(self, config: CrawlConfig, *, seeding: bool = False) -> str:
        """A new ``pending`` job with these options (never its seeds); its id."""
        ...

    async def get(self, job_id: str) -> JobInfo:
        """The job with its events; ``UnknownJob`` when there is none."""
        ...

    async def list(
        self, states: Sequence[JobState] | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> tuple[builtins.list[JobInfo], int]:
        """Jobs in ``states`` (all when None), newest first, a page of them, and how
        many there are in all. Listed jobs carry no events."""
        ...

    async def transition(self, job_id: str, state: JobState, reason: str = "") -> JobInfo:
        """Move the job to ``state``; ``InvalidTransition`` when its state does not allow it."""
        ...

    async def events(self, job_id: str) -> builtins.list[JobEvent]:
        """Every change of state of the job, oldest first."""
        ...

    async def state(self, job_id: str) -> JobState:
        """The job's state alone (cheap: a running crawl polls it)."""
        ...

    async def config(self, job_id: str) -> CrawlConfig:
        """The job's crawl options."""
        ...

    async def set_seeding(self, job_id: str, seeding: bool) -> None:
        """Seeds are (no longer) going into the job's frontier."""
        ...


def job_options(config: CrawlConfig) -> dict:
    """A config as the JSON-able values a JobInfo shows."""
    return config.model_dump(mode="json")
