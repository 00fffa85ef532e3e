"""PostgresStore against a real PostgreSQL (the session server, a fresh database a test)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from tests.servers import PostgresServer
from trawler.config import CrawlConfig
from trawler.outage import OutageAbandoned, postgres_health
from trawler.records import PageRecord
from trawler.store import sqlite as db
from trawler.store import sqlite_export as export_rows
from trawler.store.pgschema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SCOPE_HOSTS_VERSION,
    SchemaTooNew,
    migrate,
)
from trawler.store.postgres import (
    EXPORT_COLUMNS,
    GETCONN_TIMEOUT_S,
    RECONNECT_TIMEOUT_S,
    PostgresStore,
)

CONFIG = CrawlConfig(max_depth=3, delay_s=0.5)


@pytest.fixture
async def store(fresh_postgres_url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        yield store


def page(url: str, **changes: object) -> PageRecord:
    record = PageRecord(
        url=url, final_url=url + "?final", status=200, content_type="text/html",
        content_length=1234, depth=2, parent_url="http://a.test/", title="Tïtle",
        description="desc", keywords="k1, k2", text="body text", links_count=7,
        content_sha256="ab" * 32, fetched_at=1_700_000_000.123456, fetch_duration_s=0.25,
        error=None, warc_file="x.warc.gz", warc_offset=4096, canonical=url + "#c",
        noindex=False, attempts=2, host="a.test", duplicate_of=None,
        simhash="0123456789abcdef", text_hash="cd" * 32,
    )  # fmt: skip
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


async def rows(store: PostgresStore, job_id: str, include_noindex: bool = True) -> list[dict]:
    return [row async for row in store.iter_pages(job_id, include_noindex)]


# -- schema -----------------------------------------------------------------------------


async def test_migrations_run_once_when_workers_start_together(fresh_postgres_url: str) -> None:
    async def one_worker() -> int:
        async with await psycopg.AsyncConnection.connect(fresh_postgres_url) as conn:
            return await migrate(conn)

    assert await asyncio.gather(*(one_worker() for _ in range(4))) == [SCHEMA_VERSION] * 4
    stores = await asyncio.gather(*(PostgresStore.connect(fresh_postgres_url) for _ in range(2)))
    for store in stores:
        await store.close()
    with psycopg.connect(fresh_postgres_url) as conn:
        versions = conn.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


async def test_without_the_lock_concurrent_creates_collide(fresh_postgres_url: str) -> None:
    """Why migrate() takes an advisory lock: IF NOT EXISTS does not guard a race."""
    create = "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY)"
    first = await psycopg.AsyncConnection.connect(fresh_postgres_url)
    second = await psycopg.AsyncConnection.connect(fresh_postgres_url)
    try:
        await first.execute(create)  # inside first's open transaction
        blocked = asyncio.create_task(second.execute(create))
        async with await psycopg.AsyncConnection.connect(fresh_postgres_url) as watcher:
            while not await (
                await watcher.execute(
                    "SELECT 1 FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).fetchone():
                await asyncio.sleep(0.01)
        await first.commit()
        with pytest.raises(psycopg.errors.UniqueViolation):
            await blocked
    finally:
        await first.close()
        await second.close()


async def test_a_newer_schema_is_refused(fresh_postgres_url: str) -> None:
    await (await PostgresStore.connect(fresh_postgres_url)).close()
    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew):
        await PostgresStore.connect(fresh_postgres_url)


async def test_pages_table_has_every_page_record_field(store: PostgresStore) -> None:
    """A new PageRecord field needs a migration step that adds its column."""
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'pages'"
        )
        columns = {name for (name,) in await cur.fetchall()}
    assert {f.name for f in dataclasses.fields(PageRecord)} <= columns


async def test_a_version_1_database_gains_the_sketch_column(fresh_postgres_url: str) -> None:
    """Rows stored before sketches keep NULL (never a near-duplicate original); new rows
    keep their sketch's bytes."""
    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(MIGRATIONS[0])
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute("INSERT INTO jobs (id, config, state) VALUES ('j', '{}', 'running')")
        conn.execute(
            "INSERT INTO pages (job_id, url, simhash) VALUES ('j', 'http://a.test/', 'ab')"
        )
    sketch = bytes(range(128))
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        await store.insert_pages("j", [page("http://a.test/new", minhash=sketch)])
    with psycopg.connect(fresh_postgres_url) as conn:
        rows = conn.execute("SELECT url, minhash FROM pages ORDER BY id").fetchall()
    assert rows == [("http://a.test/", None), ("http://a.test/new", sketch)]


async def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(ConnectionError, match="cannot connect"):
        await PostgresStore.connect("postgresql://postgres@127.0.0.1:1/x", timeout_s=0.5)


# -- jobs -------------------------------------------------------------------------------


async def test_job_lifecycle(store: PostgresStore) -> None:
    job_id = await store.create_job(CONFIG)
    assert await store.get_job(job_id) == (CONFIG, "pending")
    for state in ("running", "paused", "running", "cancelled", "finished"):
        await store.set_job_state(job_id, state)
        assert (await store.get_job(job_id))[1] == state
    with pytest.raises(ValueError, match="job state"):
        await store.set_job_state(job_id, "exploded")
    with pytest.raises(KeyError):
        await store.set_job_state("nope", "running")
    with pytest.raises(KeyError):
        await store.get_job("nope")


async def test_list_jobs_newest_first(store: PostgresStore) -> None:
    first = await store.create_job(CONFIG)
    second = await store.create_job(CrawlConfig(max_depth=1), state="running")
    jobs = await store.list_jobs()
    assert [job.id for job in jobs] == [second, first]
    assert jobs[0].state == "running"
    assert jobs[0].created_at >= jobs[1].created_at > 1_600_000_000


# -- pages ------------------------------------------------------------------------------


async def test_a_url_is_stored_once_per_job(store: PostgresStore) -> None:
    job_id, other = await store.create_job(CONFIG), await store.create_job(CONFIG)
    await store.insert_pages(job_id, [page("http://a.test/1"), page("http://a.test/1")])
    await store.insert_pages(
        job_id, [page("http://a.test/1", title="second"), page("http://a.test/2")]
    )
    await store.insert_pages(other, [page("http://a.test/1")])
    stored = await rows(store, job_id)
    assert [row["url"] for row in stored] == ["http://a.test/1", "http://a.test/2"]
    assert stored[0]["title"] == "Tïtle"  # the first write wins
    assert len(await rows(store, other)) == 1


async def test_export_rows_match_the_embedded_store(store: PostgresStore, tmp_path: Path) -> None:
    """The contract: the same PageRecords export the same rows from both stores."""
    pages = [
        page("http://a.test/"),
        page("http://a.test/hidden", noindex=True),
        page("http://a.test/err", status=None, error="timeout", title=None, warc_file=None,
             warc_offset=None, content_sha256=None, simhash=None, duplicate_of="http://a.test/"),
    ]  # fmt: skip
    conn = db.connect(tmp_path)
    db.SqliteStore(conn).insert_pages([dataclasses.replace(p) for p in pages])
    conn.commit()
    job_id = await store.create_job(CONFIG)
    await store.insert_pages(job_id, pages)
    for include_noindex in (True, False):
        expected = list(export_rows.iter_pages(conn, include_noindex))
        assert await rows(store, job_id, include_noindex) == expected
    assert list(expected[0]) == list(EXPORT_COLUMNS)
    assert len(expected) == 2


async def test_export_streams_in_commit_order(store: PostgresStore) -> None:
    job_id = await store.create_job(CONFIG)
    urls = [f"http://a.test/{i}" for i in range(2500)]
    for start in range(0, len(urls), 500):
        await store.insert_pages(job_id, [page(url) for url in urls[start : start + 500]])
    streamed = [row["url"] async for row in store.iter_pages(job_id, batch_rows=100)]
    assert streamed == urls


async def test_text_postgres_cannot_hold_is_replaced(store: PostgresStore) -> None:
    job_id = await store.create_job(CONFIG)
    await store.insert_pages(job_id, [page("http://a.test/\ud800", title="nul\x00here")])
    (row,) = await rows(store, job_id)
    assert row["title"] == "nul\ufffdhere"
    assert row["url"] == "http://a.test/\ufffd"


async def test_listing_active_jobs_reads_no_config(store: PostgresStore) -> None:
    """Workers poll for jobs: finished ones are not listed, no config is read."""
    done = await store.create_job(CONFIG, state="finished")
    running = await store.create_job(CONFIG, state="running")
    pending = await store.create_job(CONFIG, state="pending")
    active = await store.list_jobs(("pending", "running"))
    assert [job.id for job in active] == [pending, running]
    assert done in {job.id for job in await store.list_jobs()}
    assert not hasattr(active[0], "config")


async def test_job_scope_hosts_commit_with_the_job(store: PostgresStore) -> None:
    async with store.creating_job(CONFIG, "running", ["a.test", "b.test:8080"]) as job_id:
        pass
    assert sorted(await store.scope_hosts(job_id)) == ["a.test", "b.test:8080"]
    await store.add_scope_hosts(job_id, ["a.test", "c.test"])
    assert sorted(await store.scope_hosts(job_id)) == ["a.test", "b.test:8080", "c.test"]
    with pytest.raises(RuntimeError):
        async with store.creating_job(CONFIG, "running", ["d.test"]):
            raise RuntimeError("seeding failed")
    assert [job.id for job in await store.list_jobs()] == [job_id]


async def migrate_to(conn: psycopg.AsyncConnection, version: int) -> None:
    """The schema as an older Trawler left it: the first ``version`` migrations."""
    await conn.execute(
        "CREATE TABLE schema_version ("
        " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for number, sql in enumerate(MIGRATIONS[:version], start=1):
        await conn.execute(sql)
        await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (number,))


async def test_older_jobs_seeds_become_their_scope(fresh_postgres_url: str) -> None:
    """A job stored by a Trawler that kept seeds in the config: the migration moves
    their hosts to job_scope_hosts and takes them out of the config."""
    async with await psycopg.AsyncConnection.connect(fresh_postgres_url, autocommit=True) as conn:
        await migrate_to(conn, SCOPE_HOSTS_VERSION - 1)
        legacy = {**CONFIG.model_dump(), "seeds": ["http://a.test/x", "HTTP://B.test:81/"]}
        await conn.execute(
            "INSERT INTO jobs (id, config, state) VALUES ('old', %s, 'running')",
            (psycopg.types.json.Jsonb(legacy),),
        )
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        assert sorted(await store.scope_hosts("old")) == ["a.test", "b.test:81"]
        config, _state = await store.get_job("old")
        assert config == CONFIG


# -- counters and stats -----------------------------------------------------------------


async def test_counters_add_up(store: PostgresStore) -> None:
    job_id = await store.create_job(CONFIG)
    await store.add_counters(job_id, {"robots.fetched": 2, "skipped.robots": 1})
    await store.store_batch(job_id, counters={"robots.fetched": 3})
    stats = await store.read_stats(job_id)
    assert stats["counters"] == {"robots.fetched": 5, "skipped.robots": 1}
    assert stats["skipped"] == {"robots": 1}


async def test_stats_have_the_embedded_shape(store: PostgresStore, tmp_path: Path) -> None:
    pages = [
        page("http://a.test/1", fetched_at=100.0),
        page("http://a.test/2", fetched_at=110.0, status=404),
        page("http://a.test/3", fetched_at=120.0, status=None, error="timeout"),
    ]
    attempts = [("http://a.test/3", 1, 119.0, 0.5, None, "timeout", "retry")]
    conn = db.connect(tmp_path)
    sqlite_store = db.SqliteStore(conn)
    sqlite_store.create_job(CONFIG)
    sqlite_store.insert_pages(pages)
    if hasattr(sqlite_store, "insert_attempts"):
        sqlite_store.insert_attempts(attempts)
    conn.commit()
    expected = export_rows.read_stats(conn)

    job_id = await store.create_job(CONFIG, state="running")
    await store.store_batch(job_id, pages, attempts=attempts)
    stats = await store.read_stats(job_id)

    assert stats.keys() == expected.keys()
    assert stats["job"].keys() == expected["job"].keys()
    assert stats["job"]["seed_hosts"] == 0 and stats["job"]["id"] == job_id
    for key in ("pages_stored", "pages_ok", "bytes_downloaded", "status", "errors",
                "pages_per_s", "counters"):  # fmt: skip
        assert stats[key] == expected[key], key
    assert stats["urls_discovered"] is None  # the frontier's numbers
    assert (await store.read_stats("nope"))["job"] is None


# -- outages ------------------------------------------------------------------------------


async def test_calls_wait_through_a_postgres_outage(
    own_postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopped longer than the pool's own reconnect window, then back: the batch
    waits, is stored once, and the worker logs one line each way."""
    health = postgres_health(own_postgres.url)
    async with await PostgresStore.connect(own_postgres.url, health=health) as store:
        job = await store.create_job(CONFIG)
        await store.store_batch(job, [page("http://a.test/0")])
        caplog.set_level(logging.WARNING, logger="trawler")
        own_postgres.halt()  # open connections get AdminShutdown
        batch = [page("http://a.test/0"), page("http://a.test/1")]
        writing = asyncio.create_task(store.store_batch(job, batch, {"pages": 2}))
        stats = asyncio.create_task(store.read_stats(job))
        await asyncio.sleep(RECONNECT_TIMEOUT_S + 3)
        assert not writing.done() and not stats.done()
        await asyncio.to_thread(own_postgres.start)
        restarted = time.monotonic()
        await asyncio.wait_for(asyncio.gather(writing, stats), 20)
        assert time.monotonic() - restarted < GETCONN_TIMEOUT_S + RECONNECT_TIMEOUT_S
        assert [r["url"] for r in await rows(store, job)] == ["http://a.test/0", "http://a.test/1"]
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" at ")[0] for line in lines if "lost" in line] == ["lost PostgreSQL"]
    assert len([line for line in lines if line.startswith("PostgreSQL back after")]) == 1


async def test_stop_during_a_postgres_outage_gives_up_at_once(own_postgres: PostgresServer) -> None:
    health = postgres_health(own_postgres.url)
    async with await PostgresStore.connect(own_postgres.url, health=health) as store:
        job = await store.create_job(CONFIG)
        own_postgres.halt()
        writing = asyncio.create_task(store.store_batch(job, [page("http://a.test/0")]))
        await asyncio.sleep(1.0)
        stopped = time.monotonic()
        health.stop()
        with pytest.raises(OutageAbandoned):
            await asyncio.wait_for(writing, 5)
        assert time.monotonic() - stopped < 1.0


async def test_concurrent_commits_do_not_deadlock_on_counters(store: PostgresStore) -> None:
    """Workers commit the same counters at once. Upserted in each batch's own order,
    two transactions locked the rows in opposite orders and PostgreSQL killed one
    (DeadlockDetected, seen in a 3-worker benchmark); in key order they queue."""
    job_id = await store.create_job(CONFIG)
    names = [f"c{i:02d}" for i in range(40)]

    async def commits(reverse: bool) -> None:
        order = names[::-1] if reverse else names
        for _ in range(15):
            await store.add_counters(job_id, dict.fromkeys(order, 1))

    # store.health is None here: a deadlock would raise, not be retried
    await asyncio.gather(*(commits(reverse=i % 2 == 1) for i in range(6)))
    stats = await store.read_stats(job_id)
    assert all(stats["counters"][name] == 90 for name in names)
