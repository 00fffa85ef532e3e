"""One job's crawl data in ``DATA/jobs/<id>/``: its backend, and its run recorded in
its own database. Shared by `trawler crawl` and the serve process's ``LocalJobs``
(jobs/local.py), so a job runs the same whichever process runs it.

The job's own database keeps a row for the job (read by `trawler stats` and the
API's readers): ``seeding`` until the engine has added every new seed, then
``running``, and at the run's end ``finished`` or ``stopped``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trawler.config import CrawlConfig
from trawler.jobs.embedded import mark_seeding
from trawler.jobs.layout import job_dir
from trawler.store.embedded import EmbeddedBackend


def seeds_added_hook(data_dir: Path, job_id: str) -> Callable[[], None]:
    """For the backend's writer thread: the registry's seeding flag off."""
    return lambda: mark_seeding(data_dir, job_id, False)


def job_backend(data_dir: Path, job_id: str) -> EmbeddedBackend:
    """The backend of the job's directory (opened: raises OSError, sqlite3.Error,
    NotTrawlerData when it cannot be used)."""
    return EmbeddedBackend(job_dir(data_dir, job_id), seeds_added_hook(data_dir, job_id))


def record_run_start(backend: EmbeddedBackend, job_id: str, config: CrawlConfig, state: str) -> int:
    """The job's row in its own database for this run (``seeding`` or ``running``);
    the pages it stored before (what --max-pages counts from)."""
    store = backend.store
    if store.current_job() is None:  # also: an older job's seeds become its scope
        store.create_job(config, state, job_id)
    else:
        store.update_job(job_id, config=config, state=state)
    return int(backend.conn.execute("SELECT count(*) FROM pages").fetchone()[0])


def record_run_end(data_dir: Path, job_id: str, complete: bool) -> None:
    """The run's end in the job's own database: ``finished`` or ``stopped``."""
    from trawler.store.sqlite import SqliteStore, connect

    conn = connect(job_dir(data_dir, job_id))
    try:
        SqliteStore(conn).end_run(job_id, "finished" if complete else "stopped")
    finally:
        conn.close()
