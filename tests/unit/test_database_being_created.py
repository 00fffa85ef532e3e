"""A job's database read while its crawl is creating it.

The API reads a job's `trawler.db` read-only whenever a client asks, and a job
created a moment ago may have its file but not yet its tables: the crawl's
first connection creates the file, then the schema. Such a database is "no
crawl data yet" (a job that has stored nothing), never "not a Trawler
database" (which the API answered as 503: `GET /api/v1/jobs` right after
`POST /api/v1/jobs` failed about once in five runs of the dashboard's tests).
A database of tables that are not ours is still refused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trawler.api.deps import NoCrawlData, StoreUnavailable
from trawler.api.sqlitereader import SqliteJobReader
from trawler.store.sqlite import DB_NAME, NotTrawlerData, connect


def _file_without_tables(data_dir: Path) -> None:
    """What the crawl's first connection leaves before its schema: a WAL database."""
    data_dir.mkdir()
    conn = sqlite3.connect(data_dir / DB_NAME)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


def test_a_database_without_tables_is_no_crawl_data_yet(tmp_path: Path) -> None:
    _file_without_tables(tmp_path / "job")
    with pytest.raises(FileNotFoundError, match="no crawl data"):
        connect(tmp_path / "job", readonly=True)
    with pytest.raises(NoCrawlData):
        SqliteJobReader.open(tmp_path / "job", "j1")


def test_an_empty_file_is_no_crawl_data_yet(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / DB_NAME).touch()
    with pytest.raises(NoCrawlData):
        SqliteJobReader.open(tmp_path / "job", "j1")


def test_another_programs_database_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    conn = sqlite3.connect(tmp_path / "job" / DB_NAME)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(NotTrawlerData):
        connect(tmp_path / "job", readonly=True)
    with pytest.raises(StoreUnavailable, match="not a Trawler database"):
        SqliteJobReader.open(tmp_path / "job", "j1")


def test_the_schema_appears_at_once(tmp_path: Path) -> None:
    """A reader never sees some of the core tables: they are created in one
    transaction (a reader between two CREATE TABLEs saw `jobs` without `pages`)."""
    seen: list[set[str]] = []
    path = tmp_path / "job" / DB_NAME

    def look(statement: str) -> None:
        if statement.lstrip().upper().startswith("CREATE TABLE") and path.exists():
            reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = reader.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            seen.append({row[0] for row in rows} & {"jobs", "urls", "pages"})
            reader.close()

    original = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = original(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(look)
        return conn

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        connect(tmp_path / "job").close()
    assert seen, "no CREATE TABLE traced"
    assert all(tables in (set(), {"jobs", "urls", "pages"}) for tables in seen), seen


async def test_a_job_list_counts_a_database_being_created_as_nothing_stored(
    tmp_path: Path,
) -> None:
    """`GET /api/v1/jobs` right after `POST /api/v1/jobs` read the new job's numbers
    from a file without tables yet, and answered 503 (the dashboard's test, under load)."""
    from trawler.api.datadir import DataDirJobs
    from trawler.config import CrawlConfig
    from trawler.jobs.embedded import EmbeddedJobStore

    data = tmp_path / "data"
    store = EmbeddedJobStore(data)
    job_id = await store.create(CrawlConfig())
    store.job_dir(job_id).parent.mkdir(parents=True, exist_ok=True)
    _file_without_tables(store.job_dir(job_id))
    jobs, total = await DataDirJobs(data).list_jobs(None, 0, 10)
    assert total == 1 and jobs[0].id == job_id and jobs[0].pages_crawled == 0
    assert (await DataDirJobs(data).get_job(job_id)).urls_queued == 0
