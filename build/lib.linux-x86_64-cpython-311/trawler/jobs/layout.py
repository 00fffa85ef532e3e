"""Where a data directory keeps its jobs, and the one-time move from the single-job layout.

::

    DATA/jobs.db              the registry: jobs and job_events (jobs/embedded.py)
    DATA/trawler.lock         flock held by the one process writing DATA
    DATA/jobs/<id>/           one job's crawl data: trawler.db, seen-<seq>.fp, warc/

A data directory of the single-job layout (``DATA/trawler.db`` at the top, as
Trawler wrote before jobs) becomes job ``<its id>`` of the new one, moved
once by the first process that writes the directory. Readers never move
anything: they read the old layout where it is.

The move is renames within one file system, the database last: it is what
marks the old layout, so a move cut short by a kill is finished by the next
writer (the registry row is inserted once, the files left are moved). The
database's WAL is checkpointed into it first, so the file moved last is whole
without its WAL.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from trawler.jobs.model import JobState, UnknownJob
from trawler.store import sqlite_totals
from trawler.store.sqlite import DB_NAME

REGISTRY_NAME = "jobs.db"
JOBS_DIR = "jobs"
LEGACY_JOB_ID = "legacy"  # a single-job database that never recorded a job row

# The old layout's job states (store/sqlite.py before jobs): anything unfinished
# becomes paused, resumable by `trawler crawl --data DIR`.
_OLD_STATES = {"finished": JobState.FINISHED}


class LayoutError(RuntimeError):
    """The data directory cannot be moved to the jobs layout now; the message says why."""


def job_dir(data_dir: Path, job_id: str) -> Path:
    return data_dir / JOBS_DIR / job_id


def has_single_job_layout(data_dir: Path) -> bool:
    return (data_dir / DB_NAME).exists()


def move_single_job_layout(data_dir: Path) -> str | None:
    """Move ``DATA/trawler.db`` and its files into ``DATA/jobs/<id>/``; the job's id,
    or None when there was nothing to move. The caller holds the directory's lock."""
    from trawler.jobs.embedded import insert_job, open_registry, write_transaction
    from trawler.store.sqlite import connect

    if not has_single_job_layout(data_dir):
        return None
    conn = connect(data_dir)  # refuses another program's database (NotTrawlerData)
    try:
        row = conn.execute(
            "SELECT id, config, state, created_at FROM jobs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    if busy:
        raise LayoutError(f"cannot move {data_dir / DB_NAME}: a reader has it open; try again")
    job_id, options, old_state, created_at = row or (LEGACY_JOB_ID, "{}", "stopped", time.time())
    registry = open_registry(data_dir)
    try:
        with write_transaction(registry):
            known = registry.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if known is None:
                state = _OLD_STATES.get(old_state, JobState.PAUSED)
                reason = f"moved from the single-job layout (was {old_state})"
                insert_job(registry, job_id, state, options, created_at, reason,
                           seeding=old_state == "seeding")  # fmt: skip
    finally:
        registry.close()
    _move_files(data_dir, job_dir(data_dir, job_id))
    return job_id


def _move_files(data_dir: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    names = [f"{DB_NAME}-wal", f"{DB_NAME}-shm", "warc"]
    names += sorted(p.name for p in data_dir.glob("seen-*.fp"))
    for name in [*names, DB_NAME]:  # the database last: it marks the old layout
        source = data_dir / name
        if source.is_dir() and (target / name).is_dir():  # a move cut short: its remainder
            for child in source.iterdir():
                os.replace(child, target / name / child.name)
            source.rmdir()
        elif source.exists():
            os.replace(source, target / name)
    _fsync_dir(target)
    _fsync_dir(data_dir)


def _fsync_dir(directory: Path) -> None:
    from trawler.locks import fsync_dir

    fsync_dir(directory)


def find_job_dir(data_dir: Path, job_id: str | None) -> Path:
    """A job's directory for reading: ``job_id``'s, else the newest job's. A data
    directory of the single-job layout is read where it is.

    Raises FileNotFoundError (no crawl data) or UnknownJob."""
    registry_path = data_dir / REGISTRY_NAME
    if registry_path.exists():
        conn = sqlite3.connect(f"file:{registry_path}?mode=ro", uri=True, timeout=10)
        try:
            if job_id is None:
                row = conn.execute("SELECT id FROM jobs ORDER BY seq DESC LIMIT 1").fetchone()
            else:
                row = conn.execute("SELECT id FROM jobs WHERE id = ?", (job_id,)).fetchone()
        finally:
            conn.close()
        if row is not None:
            return job_dir(data_dir, row[0])
        if job_id is not None:
            raise UnknownJob(job_id)
    elif has_single_job_layout(data_dir) and job_id is None:
        return data_dir
    elif job_id is not None and has_single_job_layout(data_dir):
        if job_id == _single_job_id(data_dir):
            return data_dir
        raise UnknownJob(job_id)
    raise FileNotFoundError(f"no crawl data in {data_dir} (missing {DB_NAME})")


def _single_job_id(data_dir: Path) -> str | None:
    conn = sqlite3.connect(f"file:{data_dir / DB_NAME}?mode=ro", uri=True, timeout=10)
    try:
        row = conn.execute("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return row[0] if row else None


def job_numbers(directory: Path) -> tuple[int, int, int]:
    """(pages crawled, URLs queued, errors) of a job's database; zeros before it has one."""
    path = directory / DB_NAME
    if not path.exists():
        return 0, 0, 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        kept = sqlite_totals.totals(conn)  # None: a database no writer has migrated yet
        pages, errors = (kept["pages"], kept["failed"]) if kept else conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE error IS NOT NULL AND error != 'not_html')"
            " FROM pages"
        ).fetchone()  # fmt: skip
        queued = conn.execute("SELECT coalesce(sum(queued), 0) FROM host_queues").fetchone()[0]
    except sqlite3.Error:  # a database still being created, or of an older Trawler
        return 0, 0, 0
    finally:
        conn.close()
    return pages, queued, errors
