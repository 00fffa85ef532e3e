"""A job's crawl data, opened read-only for one request (a crawl may be writing it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from trawler.api.deps import JobService, StoreUnavailable
from trawler.jobs.model import UnknownJob
from trawler.store.sqlite import NotTrawlerData, connect


class NoCrawlData(UnknownJob):
    """The job exists but has stored nothing yet (the API: 404)."""


def open_job_store(service: JobService, job_id: str) -> sqlite3.Connection:
    """A read-only connection to the job's database; the caller closes it."""
    path = service.data_dir(job_id)
    try:
        return connect(path, readonly=True)
    except FileNotFoundError:
        raise NoCrawlData(f"job {job_id} has no crawl data yet") from None
    except (NotTrawlerData, sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(str(exc)) from None


@contextmanager
def job_store(service: JobService, job_id: str) -> Iterator[sqlite3.Connection]:
    conn = open_job_store(service, job_id)
    try:
        yield conn
    except sqlite3.Error as exc:  # the database failed under us: the store's fault
        raise StoreUnavailable(f"cannot read the data of job {job_id}: {exc}") from None
    finally:
        conn.close()


def unix(moment: datetime | None) -> float | None:
    """A query's date as Unix time (a date without a zone is UTC, as `trawler search`)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
