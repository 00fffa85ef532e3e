"""The jobs layout of a data directory and the one-time move from the single-job
layout (jobs/layout.py): nothing lost, and a move cut short is finished later."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.layout import (
    find_job_dir,
    has_single_job_layout,
    job_dir,
    move_single_job_layout,
)
from trawler.jobs.model import JobState, UnknownJob

_KILLED_WRITER = """
import os, sys
from pathlib import Path
from trawler.config import CrawlConfig
from trawler.store import sqlite as db, sqlite_totals
conn = db.connect(Path(sys.argv[1]))
print(db.SqliteStore(conn).create_job(CrawlConfig(max_depth=4), sys.argv[2]), flush=True)
conn.execute("PRAGMA wal_autocheckpoint=0")  # the rows stay in the WAL
conn.executemany("INSERT INTO pages (url, status, host) VALUES (?, 200, 'a.test')",
                 [(f"http://a.test/{i}",) for i in range(50)])
sqlite_totals.recount(conn)  # rows written past insert_pages, which counts its own
conn.commit()
os._exit(0)  # as a killed crawl: no checkpoint, the WAL left beside the database
"""


def _old_layout(data: Path, state: str = "stopped") -> str:
    """A data directory as Trawler wrote it before jobs: DATA/trawler.db at the top
    (its last rows still in the WAL), a WARC file, a seen file."""
    out = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(data), state],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    assert (data / "trawler.db-wal").stat().st_size > 0
    (data / "warc").mkdir()
    (data / "warc" / "t-00001.warc.gz").write_bytes(b"warc bytes" * 100)
    (data / "seen-7.fp").write_bytes(b"\x01" * 64)
    return out.stdout.strip()


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*")) if p.is_file() and "trawler.db" not in p.name
    }  # fmt: skip


def _pages(directory: Path) -> list[tuple]:
    conn = sqlite3.connect(directory / "trawler.db")
    try:
        return conn.execute("SELECT url, status FROM pages ORDER BY id").fetchall()
    finally:
        conn.close()


def test_move_keeps_every_file_and_row(tmp_path: Path) -> None:
    data = tmp_path / "data"
    job_id = _old_layout(data)
    files, pages = _digests(data), _pages(data)
    assert find_job_dir(data, None) == data  # readers read the old layout where it is
    assert move_single_job_layout(data) == job_id
    target = job_dir(data, job_id)
    assert not has_single_job_layout(data)
    assert _digests(target) == files and _pages(target) == pages and len(pages) == 50
    assert {p.name for p in data.iterdir()} <= {"jobs", "jobs.db", "jobs.db-wal", "jobs.db-shm"}
    info = asyncio.run(EmbeddedJobStore(data).get(job_id))
    assert info.state is JobState.PAUSED and info.options["max_depth"] == 4
    assert info.pages_crawled == 50
    assert info.events[0].reason == "moved from the single-job layout (was stopped)"
    assert find_job_dir(data, None) == target == find_job_dir(data, job_id)
    assert move_single_job_layout(data) is None  # once


@pytest.mark.parametrize(("old", "new", "seeding"), [
    ("finished", JobState.FINISHED, False), ("seeding", JobState.PAUSED, True),
    ("running", JobState.PAUSED, False),
])  # fmt: skip
def test_old_states(tmp_path: Path, old: str, new: JobState, seeding: bool) -> None:
    job_id = _old_layout(tmp_path, old)
    move_single_job_layout(tmp_path)
    info = asyncio.run(EmbeddedJobStore(tmp_path).get(job_id))
    assert (info.state, info.seeding) == (new, seeding)


def test_a_move_cut_short_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    job_id = _old_layout(tmp_path)
    files, pages = _digests(tmp_path), _pages(tmp_path)
    move_single_job_layout(tmp_path)
    target = job_dir(tmp_path, job_id)
    # As if killed after the registry row and the WARC directory, before the rest:
    (target / "trawler.db").rename(tmp_path / "trawler.db")
    (target / "seen-7.fp").rename(tmp_path / "seen-7.fp")
    (tmp_path / "warc").mkdir()
    (target / "warc" / "t-00001.warc.gz").rename(tmp_path / "warc" / "t-00001.warc.gz")
    assert move_single_job_layout(tmp_path) == job_id
    assert _digests(target) == files and _pages(target) == pages
    assert not (tmp_path / "warc").exists()
    listed, total = asyncio.run(EmbeddedJobStore(tmp_path).list())
    assert total == 1 and len(listed[0].id) == len(job_id)


def test_reading_a_job_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no crawl data"):
        find_job_dir(tmp_path, None)
    _old_layout(tmp_path)
    with pytest.raises(UnknownJob):
        find_job_dir(tmp_path, "nosuchjob")
    move_single_job_layout(tmp_path)
    with pytest.raises(UnknownJob):
        find_job_dir(tmp_path, "nosuchjob")
