"""The embedded store's running totals and the dashboard's indexes (issue 13): the
snapshot's reads scan no table of pages or URLs, their answers are what counting
says, and an older data directory gets them when a writer opens it."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.frontier.disk_queue import DiskQueues
from trawler.jobs.layout import job_numbers
from trawler.records import CrawlRequest, PageRecord
from trawler.store import sqlite_read, sqlite_totals
from trawler.store.sqlite import QUEUED, SqliteStore, connect

NOW = 1_700_000_000.0


def page(i: int, **changes: object) -> PageRecord:
    record = PageRecord(
        url=f"http://a.test/{i}", final_url=f"http://a.test/{i}", status=200,
        content_type="text/html", content_length=1000 + i, depth=1, parent_url=None,
        title=None, description=None, keywords=None, text="words", links_count=0,
        content_sha256=None, fetched_at=NOW - 700 + i, fetch_duration_s=0.1, error=None,
        host="a.test",
    )  # fmt: skip
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def some_pages() -> list[PageRecord]:
    """Fetched over the last 700 s: ok, failed, not HTML (no error), no length."""
    pages = [page(i) for i in range(0, 700, 3)]
    pages += [page(i, status=None, error="timeout", content_length=0) for i in range(1, 700, 7)]
    pages += [page(i, error="not_html") for i in range(2, 700, 11)]
    return pages + [page(i, content_length=None, status=503, error="http_5xx") for i in (5, 698)]


def add_urls(conn: sqlite3.Connection, count: int) -> None:
    """Queued URLs, finished as the frontier finishes them (persist_done, the one writer
    of URL states): done, dead, skipped, some twice; then some deleted (a repair)."""
    requests = [CrawlRequest(f"http://a.test/u{i}", 1, None, "a.test", i) for i in range(count)]
    queues = DiskQueues(window=None)  # nothing leased: it looks each row up
    queues.persist_new(conn, requests)
    done = [(r, r.fp % 7 == 0) for r in requests if r.fp % 3 == 0]
    queues.persist_done(conn, done, [(r, "robots") for r in requests if r.fp % 5 == 1])
    queues.persist_done(conn, [(r, False) for r in requests[:40]], [])  # some finished already
    conn.execute("DELETE FROM urls WHERE seq % 13 = 0")


def stored(data: Path) -> sqlite3.Connection:
    conn = connect(data)
    store = SqliteStore(conn)
    store.create_job(CrawlConfig(), job_id="job1")
    with conn:
        store.insert_pages(some_pages())
        store.insert_pages(some_pages()[:10])  # stored already: not counted again
        add_urls(conn, 200)
    return conn


def counted(conn: sqlite3.Connection) -> dict[str, int]:
    failed = sqlite_totals.FAILED
    row = conn.execute(
        f"SELECT count(*), coalesce(sum(content_length), 0), coalesce(sum({failed}), 0),"
        f" (SELECT count(*) FROM urls WHERE state != {QUEUED}) FROM pages"
    ).fetchone()
    return dict(zip(("pages", "bytes", "failed", "visited"), row, strict=True))


def test_totals_are_what_counting_says(tmp_path: Path) -> None:
    conn = stored(tmp_path)
    expected = counted(conn)
    assert expected["pages"] > 300 and expected["failed"] > 50 and expected["visited"] > 50
    assert sqlite_totals.totals(conn) == expected
    with conn:  # a page changed or removed (no crawl does it; a repair might)
        conn.execute("UPDATE pages SET error = 'timeout', content_length = 7 WHERE id = 1")
        conn.execute("DELETE FROM pages WHERE id IN (2, 3)")
    assert sqlite_totals.totals(conn) == counted(conn) != expected


def test_a_rolled_back_commit_counts_nothing(tmp_path: Path) -> None:
    conn = stored(tmp_path)
    before = sqlite_totals.totals(conn)
    with pytest.raises(sqlite3.IntegrityError), conn:
        SqliteStore(conn).insert_pages([page(5000)])
        conn.execute("INSERT INTO jobs VALUES ('job1', '{}', 'running', 0, 0)")  # a duplicate
    assert sqlite_totals.totals(conn) == before == counted(conn)


def _scans(conn: sqlite3.Connection, statements: list[str]) -> list[str]:
    """The plan steps of ``statements`` that read every row of pages or urls."""
    found = []
    for sql in statements:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"):
            step = row[3]
            whole = step.startswith(("SCAN pages", "SCAN urls"))
            if whole and "INDEX pages_failed" not in step:  # the failed pages only
                found.append(f"{step}  <-  {sql}")
    return found


def test_the_snapshots_reads_scan_no_table(tmp_path: Path) -> None:
    stored(tmp_path).close()
    conn = connect(tmp_path, readonly=True)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    sqlite_read.job_counts(conn)
    sqlite_read.activity(conn, NOW)
    sqlite_read.per_second(conn, NOW - 600, NOW + 1)
    sqlite_read.error_rows(conn, 100)
    sqlite_read.error_rows(conn, 100, code="timeout", host="a.test")
    conn.set_trace_callback(None)
    assert len(statements) > 10
    assert _scans(conn, statements) == []
    latest, counts = sqlite_read.error_rows(conn, 100)
    assert len(latest) == sum(counts.values()) == 69  # the feed's: no counts
    assert sqlite_read.error_rows(conn, 100, counted=False) == (latest, {})


def _as_older_version(data: Path) -> None:
    """Drop what this version adds: a data directory of the version before."""
    conn = sqlite3.connect(data / "trawler.db")
    names = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE name LIKE 'page_totals%'"
        " OR name LIKE 'urls_visited%' OR name IN ('pages_fetched', 'pages_failed')"
    ).fetchall()
    assert len(names) == 6
    for kind, name in names:
        if kind != "table":
            conn.execute(f"DROP {kind} {name}")
    conn.execute("DROP TABLE page_totals")
    conn.commit()
    conn.close()


def test_an_older_data_dir_is_counted_once_when_a_writer_opens_it(tmp_path: Path) -> None:
    stored(tmp_path).close()
    _as_older_version(tmp_path)
    reader = connect(tmp_path, readonly=True)
    assert sqlite_totals.totals(reader) is None  # not migrated: the reads count
    before = (sqlite_read.job_counts(reader), sqlite_read.activity(reader, NOW))
    numbers = counted(reader)
    queued = reader.execute("SELECT sum(queued) FROM host_queues").fetchone()[0]
    assert job_numbers(tmp_path) == (numbers["pages"], queued, numbers["failed"])
    reader.close()
    writer = connect(tmp_path)
    assert sqlite_totals.totals(writer) == counted(writer)
    SqliteStore(writer).insert_pages([page(9000, error="timeout")])
    writer.commit()
    assert sqlite_totals.totals(writer) == counted(writer)
    writer.close()
    reader = connect(tmp_path, readonly=True)
    counts, activity = sqlite_read.job_counts(reader), sqlite_read.activity(reader, NOW)
    assert counts["pages_crawled"] == before[0]["pages_crawled"] + 1
    assert counts["errors"] == before[0]["errors"] + 1
    assert activity["queue"] == before[1]["queue"]
    assert activity["storage"]["pages"] == before[1]["storage"]["pages"] + 1
    assert job_numbers(tmp_path) == (numbers["pages"] + 1, queued, numbers["failed"] + 1)


def test_a_batch_partly_stored_or_odd_is_counted_as_the_table_says(tmp_path: Path) -> None:
    conn = stored(tmp_path)
    store = SqliteStore(conn)
    with conn:  # two stored already, two new: only the new ones count
        store.insert_pages([page(0), page(3), page(7001, error="timeout"), page(7002)])
    assert sqlite_totals.totals(conn) == counted(conn)
    with conn:  # a length of another type: what the column made of it counts
        store.insert_pages([page(7003, content_length="12"), page(7004, content_length=2.5)])
    assert conn.execute("SELECT content_length FROM pages WHERE id = last_insert_rowid() - 1")
    assert sqlite_totals.totals(conn) == counted(conn)
    with conn:
        store.insert_pages([])
    assert sqlite_totals.totals(conn) == counted(conn)


def test_a_data_dir_of_the_counting_triggers_counts_a_row_once(tmp_path: Path) -> None:
    """Issue 13's data directories count inserted pages and finished URLs by triggers;
    they are dropped on open, now that insert_pages and persist_done count them."""
    connect(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "trawler.db")
    conn.execute(
        "CREATE TRIGGER page_totals_insert AFTER INSERT ON pages BEGIN"
        " UPDATE page_totals SET pages = pages + 1; END"
    )
    conn.execute(
        "CREATE TRIGGER urls_visited_update AFTER UPDATE OF state ON urls BEGIN"
        " UPDATE page_totals SET visited = visited + 1; END"
    )
    conn.commit()
    conn.close()
    writer = connect(tmp_path)
    with writer:
        SqliteStore(writer).insert_pages([page(1), page(2, error="timeout")])
        add_urls(writer, 30)
    assert sqlite_totals.totals(writer) == counted(writer)
    assert counted(writer)["pages"] == 2


def test_rows_written_past_the_writers_are_counted_by_a_recount(tmp_path: Path) -> None:
    conn = stored(tmp_path)
    with conn:  # by hand, as a repair or a test's made-up data directory might
        conn.execute("INSERT INTO pages (url, content_length, error) VALUES ('x', 5, 'dns')")
        conn.execute("UPDATE urls SET state = 1 WHERE state = 0")
    assert sqlite_totals.totals(conn) != counted(conn)
    with conn:
        sqlite_totals.recount(conn)
    assert sqlite_totals.totals(conn) == counted(conn)
