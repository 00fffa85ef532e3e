"""A job's states and the transitions between them, as plain records.

::

    pending ──▶ running ⇄ paused
       │           │         │
       └───────────┴─────────┴──▶ finished | cancelled | failed

``pending``: created, not yet started by a runner or worker (its seeds may still
be going in). ``running``: a runner or workers are crawling it. ``paused``: no
new request is started; what is in flight finishes and is stored; ``resume``
carries on with nothing lost or fetched twice. ``finished``: nothing left to
crawl (or its page budget spent). ``cancelled``: stopped for good by a user;
what was stored is kept. ``failed``: it cannot go on (its data cannot be
written, say); the reason is in its last event.

Every change of state is validated here and recorded with its time by the
store that keeps the job (``JobEvent``). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def ended(self) -> bool:
        return self in ENDED


ENDED = frozenset({JobState.FINISHED, JobState.CANCELLED, JobState.FAILED})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.PAUSED, *ENDED}),
    JobState.RUNNING: frozenset({JobState.PAUSED, *ENDED}),
    JobState.PAUSED: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.FINISHED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.FAILED: frozenset(),
}


class InvalidTransition(ValueError):
    """A change of state the job's current state does not allow (the API: 409)."""

    def __init__(self, job_id: str, current: JobState, wanted: JobState) -> None:
        super().__init__(f"job {job_id} is {current}: it cannot become {wanted}")
        self.job_id, self.current, self.wanted = job_id, current, wanted


class UnknownJob(KeyError):
    """No job has this id (the API: 404)."""


# A revisit pass (POST /jobs/{id}/recrawl, issue 15) reopens a job whose crawl is over:
# it runs, then goes back to the state it had. Not pending, running or paused jobs
# (their crawl is not over: one run of a job at a time), nor failed ones (whatever
# failed them is still there).
REVISITABLE = frozenset({JobState.FINISHED, JobState.CANCELLED})


class NotRevisitable(InvalidTransition):
    """The job cannot have a revisit pass now (the API: 409); the message says why."""

    def __init__(self, job_id: str, current: JobState, why: str) -> None:
        super().__init__(job_id, current, JobState.RUNNING)
        self.args = (f"job {job_id} is {current}: {why}",)

    def __str__(self) -> str:
        return str(self.args[0])


def check_revisit(job_id: str, current: JobState) -> None:
    """Raise ``NotRevisitable`` unless a job in ``current`` may start a revisit pass."""
    if current not in REVISITABLE:
        raise NotRevisitable(job_id, current, "a recrawl pass needs a finished or cancelled"
                             " job (the crawl is over)")  # fmt: skip


def check_transition(job_id: str, current: JobState, wanted: JobState) -> None:
    """Raise ``InvalidTransition`` unless ``current`` may become ``wanted``."""
    if wanted not in TRANSITIONS[current]:
        raise InvalidTransition(job_id, current, wanted)


@dataclass(slots=True)
class JobEvent:
    """One recorded change of state."""

    job_id: str
    from_state: JobState | None  # None: the job's creation
    to_state: JobState
    at: float  # Unix time
    reason: str = ""  # "user", "complete", "max_pages", an error's one line...


@dataclass(slots=True)
class JobInfo:
    """What a job store says of one job: the API's and `trawler jobs show`'s view."""

    id: str
    state: JobState
    options: dict  # the job's CrawlConfig, as JSON-able values (never its seeds)
    created_at: float
    started_at: float | None = None  # first time it became running
    finished_at: float | None = None  # when it ended (finished, cancelled or failed)
    seeding: bool = False  # seeds still going into its frontier
    pages_crawled: int = 0
    urls_queued: int = 0
    errors: int = 0
    pages_per_s: float = 0.0  # over the last minute of its running
    events: list[JobEvent] = field(default_factory=list)
