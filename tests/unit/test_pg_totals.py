"""PostgreSQL's kept page totals (migration 7, issue 13) against a real server: what
counting the pages says, whoever writes them, and counted once for a database of
the version before."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import psycopg
import pytest

from trawler.config import CrawlConfig
from trawler.records import PageRecord
from trawler.store import postgres_read
from trawler.store.pgschema import SCHEMA_VERSION, migrate
from trawler.store.postgres import PostgresStore

COUNTED = (
    "SELECT count(*), coalesce(sum(content_length), 0),"
    f" count(*) FILTER (WHERE {postgres_read.FAILED}) FROM pages WHERE job_id = %s"
)


@pytest.fixture
async def store(fresh_postgres_url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        yield store


def page(i: int, **changes: object) -> PageRecord:
    record = PageRecord(
        url=f"http://a.test/{i}", final_url=f"http://a.test/{i}", status=200,
        content_type="text/html", content_length=1000 + i, depth=1, parent_url=None,
        title=None, description=None, keywords=None, text="words", links_count=0,
        content_sha256=None, fetched_at=1_700_000_000.0 + i * 0.75, fetch_duration_s=0.1,
        error=None, host="a.test",
    )  # fmt: skip
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


def some_pages(start: int) -> list[PageRecord]:
    pages = [page(i) for i in range(start, start + 60)]
    pages += [page(start + i, error="timeout", status=None) for i in range(60, 80)]
    pages += [page(start + i, error="not_html") for i in range(80, 90)]
    return pages + [page(start + 90, content_length=None, error="http_5xx")]


SINCE = (0.0, 1_700_000_000.0, 1_700_000_030.0, 1_700_000_030.5, 1_700_000_059.999,
         1_700_000_060.0, 1_700_000_089.0, 1_700_001_000.0)  # fmt: skip


def totals_and_counts(url: str, job_id: str) -> tuple[tuple, tuple]:
    """(kept, counted) totals; and for every SINCE, the kept hour's numbers are counting's."""
    with psycopg.connect(url) as conn:
        for since in SINCE:
            counted = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE {postgres_read.FAILED}) FROM pages"
                " WHERE job_id = %s AND fetched_at >= %s",
                (job_id, since),
            ).fetchone()
            assert postgres_read.hour_counts(conn, job_id, since) == counted, since
        return postgres_read.page_totals(conn, job_id), conn.execute(COUNTED, (job_id,)).fetchone()


async def test_totals_are_what_counting_says(store: PostgresStore, fresh_postgres_url: str) -> None:
    one = await store.create_job(CrawlConfig(), "running")
    two = await store.create_job(CrawlConfig(), "running")
    await store.store_batch(one, some_pages(0), counters={"fetched": 91})
    await store.store_batch(one, some_pages(0)[:30] + some_pages(1000))  # 30 stored already
    await store.store_batch(two, some_pages(0))
    kept, counted = totals_and_counts(fresh_postgres_url, one)
    assert kept == counted and (kept[0], kept[2]) == (182, 42) and kept[1] > 182_000
    with psycopg.connect(fresh_postgres_url) as conn:  # a repair, a COPY
        conn.execute("DELETE FROM pages WHERE job_id = %s AND url LIKE %s", (one, "%/1%"))
        conn.execute("UPDATE pages SET error = 'timeout' WHERE job_id = %s AND id %% 2 = 0", (one,))
        columns = "job_id, url, content_length, fetched_at"
        with conn.cursor().copy(f"COPY pages ({columns}) FROM STDIN") as copy:
            copy.write_row((one, "http://a.test/copied", 77, None))  # no fetch time
            copy.write_row((one, "http://a.test/later", 7, 1_800_000_000.0))
    kept, counted = totals_and_counts(fresh_postgres_url, one)
    assert kept == counted and kept[0] < 182
    kept, counted = totals_and_counts(fresh_postgres_url, two)
    assert kept == counted and (kept[0], kept[2]) == (91, 21)
    with psycopg.connect(fresh_postgres_url) as conn:  # the live feed's: no counts
        latest, counts = postgres_read.error_rows(conn, two, 10)
        assert len(latest) == 10 and sum(counts.values()) == 21
        assert postgres_read.error_rows(conn, two, 10, counted=False) == (latest, {})


async def test_a_job_without_pages_has_none(store: PostgresStore, fresh_postgres_url: str) -> None:
    job = await store.create_job(CrawlConfig(), "running")
    assert totals_and_counts(fresh_postgres_url, job) == ((0, 0, 0), (0, 0, 0))
    with psycopg.connect(fresh_postgres_url) as conn:
        assert postgres_read.job_numbers(conn, [job]) == {}


def _as_version_6(url: str) -> None:
    """Undo the provenance (PROVENANCE), link graph (GRAPH) and reuse reservations'
    (RESERVATIONS) migrations, 15 (shared dedup), 14 (applied commits), 13 (search), 12
    (validators), 11 (rendered), 10 (passes), 9 (changefreq), 8 (revisits) and 7: a
    database of the version before."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "ALTER TABLE pages DROP COLUMN search_vector; DROP FUNCTION trawler_search_fold;"
            " ALTER TABLE pages DROP COLUMN rendered, DROP COLUMN sitemap_changefreq;"
            " ALTER TABLE pages DROP COLUMN tdm_reservation, DROP COLUMN tdm_policy,"
            " DROP COLUMN tdm_source, DROP COLUMN ai_robots_groups,"
            " DROP COLUMN ai_robots_disallowed;"
            " DROP TABLE revisit_state, page_versions, visits, revisit_passes, page_validators;"
            " DROP TABLE applied_commits, dedup_blocks; DROP INDEX pages_text_hash;"
            " DROP TABLE provenance;"
            " DROP TABLE page_totals, page_minutes; DROP FUNCTION page_totals_keep CASCADE;"
            " DROP INDEX pages_job_fetched, pages_job_failed;"
            " DROP TABLE links;"
            " DELETE FROM schema_version WHERE version >= 7"
        )


async def test_an_older_database_is_counted_once_by_migration_7(fresh_postgres_url: str) -> None:
    assert SCHEMA_VERSION == 18  # what _as_version_6 undoes
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job = await store.create_job(CrawlConfig(), "running")
        await store.store_batch(job, some_pages(0))
    _as_version_6(fresh_postgres_url)
    async with await PostgresStore.connect(fresh_postgres_url) as store:  # migrates
        await store.store_batch(job, some_pages(500))
    kept, counted = totals_and_counts(fresh_postgres_url, job)
    assert kept == counted and counted[0] == 182
    async with await psycopg.AsyncConnection.connect(fresh_postgres_url) as conn:
        assert await migrate(conn) == SCHEMA_VERSION  # once: nothing counted twice
    assert totals_and_counts(fresh_postgres_url, job)[0] == counted
