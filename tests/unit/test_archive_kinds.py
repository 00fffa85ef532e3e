"""Export rows by kind (page, sitemap, robots) in both stores, the migrations that add
the column to existing data, and stats that count non-HTML downloads apart."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import psycopg
import pytest

from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from trawler.config import CrawlConfig
from trawler.export import write_export
from trawler.progress import progress_line
from trawler.records import PageRecord, Progress, RobotsRecord
from trawler.store import sqlite as db
from trawler.store import sqlite_export as export_rows
from trawler.store.pgschema import MIGRATIONS
from trawler.store.postgres import PostgresStore

SITE = "http://a.test"


def page(path: str, kind: str = "page", **changes: object) -> PageRecord:
    record = PageRecord(
        url=SITE + path, final_url=SITE + path, status=200, content_type="text/html",
        content_length=10, depth=1, parent_url=SITE + "/", title="t", description=None,
        keywords=None, text="words", links_count=0, content_sha256="ab" * 32,
        fetched_at=100.0, fetch_duration_s=0.1, error=None, host="a.test", kind=kind,
    )  # fmt: skip
    for name, value in changes.items():
        setattr(record, name, value)
    return record


def robots_row(fetched_at: float, status: int = 200) -> RobotsRecord:
    return RobotsRecord(
        url=SITE + "/robots.txt", final_url=SITE + "/robots.txt", status=status,
        content_type="text/plain", content_length=20, content_sha256="cd" * 32,
        fetched_at=fetched_at, fetch_duration_s=0.01, error=None, host="a.test",
        warc_file="x.warc.gz", warc_offset=123,
    )  # fmt: skip


PAGES = [
    page("/", fetched_at=101.0),
    page("/sitemap.xml", "sitemap", content_type="application/xml", text=None, fetched_at=102.0),
    page("/doc.pdf", content_type="application/pdf", text=None, error="not_html", fetched_at=103),
    page("/gone", status=404, text=None, error="http_404", fetched_at=104.0),
]
ROBOTS = [robots_row(100.0, 503), robots_row(101.5)]


def kinds_of(rows: list[dict]) -> list[tuple[str, str]]:
    return [(row["kind"], row["url"].removeprefix(SITE)) for row in rows]


# -- embedded store ---------------------------------------------------------------------


@pytest.fixture
def crawl_dir(tmp_path: Path) -> Path:
    conn = db.connect(tmp_path)
    store = db.SqliteStore(conn)
    with conn:
        store.insert_pages(PAGES)
        store.insert_robots(ROBOTS)
    conn.close()
    return tmp_path


def test_sqlite_export_rows_by_kind_in_fetch_order(crawl_dir: Path) -> None:
    conn = db.connect(crawl_dir, readonly=True)
    everything = list(export_rows.iter_pages(conn, kinds=frozenset({"page", "sitemap", "robots"})))
    default = list(export_rows.iter_pages(conn))
    robots_only = list(export_rows.iter_pages(conn, kinds=frozenset({"robots"})))
    conn.close()
    assert kinds_of(everything) == [
        ("robots", "/robots.txt"), ("page", "/"), ("robots", "/robots.txt"),
        ("sitemap", "/sitemap.xml"), ("page", "/doc.pdf"), ("page", "/gone"),
    ]  # fmt: skip
    assert [row["status"] for row in robots_only] == [503, 200]
    assert robots_only[0]["warc_offset"] == 123 and robots_only[0]["depth"] is None
    assert set(robots_only[0]) == set(export_rows.EXPORT_COLUMNS)
    assert kinds_of(default) == [k for k in kinds_of(everything) if k[0] != "robots"]


def test_csv_and_jsonl_carry_kind(crawl_dir: Path) -> None:
    conn = db.connect(crawl_dir, readonly=True)
    for fmt in ("csv", "jsonl"):
        out = io.StringIO()
        count = write_export(conn, out, fmt, False, frozenset({"robots", "sitemap"}))
        text = out.getvalue()
        rows = list(csv.DictReader(io.StringIO(text))) if fmt == "csv" else [
            json.loads(line) for line in text.splitlines()
        ]  # fmt: skip
        assert count == 3
        assert [row["kind"] for row in rows] == ["robots", "robots", "sitemap"]
    conn.close()


def test_cli_export_kind_option(crawl_dir: Path) -> None:
    out = run_trawler("export", "--data", str(crawl_dir), "--kind", "robots")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["kind"] for line in out.stdout.splitlines()] == ["robots"] * 2
    out = run_trawler("export", "--data", str(crawl_dir), "--kind", "all", "--format", "csv")
    assert out.stdout.splitlines()[0].endswith(",kind") and len(out.stdout.splitlines()) == 7
    line = assert_one_line_error(run_trawler("export", "--data", str(crawl_dir),
                                             "--kind", "page,pdf"), 2)  # fmt: skip
    assert "pdf" in line


def test_old_data_directory_gets_kinds(tmp_path: Path) -> None:
    """A data directory from before kinds: read-only readers derive them, a writer migrates."""
    conn = db.connect(tmp_path)
    store = db.SqliteStore(conn)
    with conn:
        store.insert_pages(PAGES)
        conn.execute("ALTER TABLE pages DROP COLUMN kind")  # as an older Trawler made it
        conn.execute("DROP TABLE robots_fetches")
        conn.execute("INSERT INTO urls (seq, fp, url, host, depth, kind) VALUES"
                     " (1, 1, ?, 'a.test', 0, 'sitemap')", (SITE + "/sitemap.xml",))  # fmt: skip
    conn.close()
    reader = db.connect(tmp_path, readonly=True)
    derived = kinds_of(
        export_rows.iter_pages(reader, kinds=frozenset({"page", "sitemap", "robots"}))
    )
    assert derived == [("page", "/"), ("sitemap", "/sitemap.xml"), ("page", "/doc.pdf"),
                       ("page", "/gone")]  # fmt: skip
    assert export_rows.read_stats(reader)["kinds"] == {"page": 3, "sitemap": 1}
    reader.close()
    writer = db.connect(tmp_path)
    stored = dict(writer.execute("SELECT url, kind FROM pages"))
    writer.close()
    assert stored[SITE + "/sitemap.xml"] == "sitemap" and stored[SITE + "/"] == "page"


def test_sqlite_stats_count_not_html_apart(crawl_dir: Path) -> None:
    conn = db.connect(crawl_dir, readonly=True)
    stats = export_rows.read_stats(conn)
    conn.close()
    assert stats["not_html"] == 1
    assert stats["errors"] == {"http_404": 1}
    assert stats["kinds"] == {"page": 3, "sitemap": 1, "robots": 2}


def test_progress_line_shows_not_html_apart_from_errors() -> None:
    line = progress_line(Progress(12, 3.0, 4, 2, 0, 5.0, not_html=80))
    assert "80 not HTML" in line and "| 0 errors |" in line


# -- distributed store --------------------------------------------------------------------


async def test_postgres_rows_by_kind_and_stats(fresh_postgres_url: str) -> None:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job = await store.create_job(CrawlConfig())
        await store.store_batch(job, PAGES, robots=ROBOTS)
        every_kind = frozenset(export_rows.EXPORT_KINDS)
        everything = [r async for r in store.iter_pages(job, kinds=every_kind)]
        default = [r async for r in store.iter_pages(job)]
        stats = await store.read_stats(job)
    assert kinds_of(everything) == [
        ("robots", "/robots.txt"), ("page", "/"), ("robots", "/robots.txt"),
        ("sitemap", "/sitemap.xml"), ("page", "/doc.pdf"), ("page", "/gone"),
    ]  # fmt: skip
    assert (
        set(everything[0]) == set(export_rows.EXPORT_COLUMNS)
        and everything[0]["warc_offset"] == 123
    )
    assert kinds_of(default) == [k for k in kinds_of(everything) if k[0] != "robots"]
    assert stats["not_html"] == 1 and stats["errors"] == {"http_404": 1}
    assert stats["kinds"] == {"page": 3, "sitemap": 1, "robots": 2}


async def test_postgres_migration_gives_old_rows_their_kind(fresh_postgres_url: str) -> None:
    """A database at schema version 1: sitemaps were stored as pages without an error,
    though not HTML; the migration names them."""
    old = [
        ("/", "text/html", None, "words", 200),
        ("/sitemap.xml", "application/xml", None, None, 200),
        ("/feed", "application/rss+xml", None, None, 200),
        ("/doc.pdf", "application/pdf", "not_html", None, 200),
        ("/moved", "text/html", None, None, 301),
        ("/untyped", None, None, "words", 200),  # sniffed as HTML
    ]
    async with await psycopg.AsyncConnection.connect(fresh_postgres_url, autocommit=True) as conn:
        await conn.execute(MIGRATIONS[0])
        await conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY,"
                           " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        await conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        await conn.execute("INSERT INTO jobs (id, config, state) VALUES ('j', '{}', 'running')")
        for path, content_type, error, text, status in old:
            await conn.execute(
                "INSERT INTO pages (job_id, url, content_type, error, text, status)"
                " VALUES ('j', %s, %s, %s, %s, %s)",
                (SITE + path, content_type, error, text, status),
            )
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        rows = [r async for r in store.iter_pages("j", kinds=frozenset(export_rows.EXPORT_KINDS))]
    assert kinds_of(rows) == [
        ("page", "/"),
        ("sitemap", "/sitemap.xml"),
        ("sitemap", "/feed"),
        ("page", "/doc.pdf"),
        ("page", "/moved"),
        ("page", "/untyped"),
    ]
