"""Revisit state and page versions in PostgreSQL (store/pg_versions.py, migration 8)
against the session's server, a fresh database a test: seeded with the page in the
batch's transaction, due pages claimed by disjoint workers and claimable again once a
claim expires, and a visit recorded once per due time however often its commit runs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from tests.unit.test_postgres_store import CONFIG, migrate_to, page
from trawler.records import FetchResult
from trawler.recrawl import RevisitWindow
from trawler.recrawl_lanes import revisit_request
from trawler.recrawl_visit import RevisitOutcome, judge
from trawler.revisit_policy import (
    OPTIMAL,
    PROPORTIONAL,
    RATE_LOG_STEP,
    plan_schedule,
    priced_schedule,
    rate_class,
    rate_groups,
)
from trawler.store import pg_versions as pv
from trawler.store.dist_revisits import DistributedRevisits
from trawler.store.pgschema import MIGRATIONS
from trawler.store.pgschema_steps import REVISITS
from trawler.store.postgres import PostgresStore

WINDOW = RevisitWindow(10.0, 1000.0)
URLS = [f"http://a.test/{i}" for i in range(6)]


@pytest.fixture
async def store(fresh_postgres_url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        yield store


async def seeded_job(store: PostgresStore, due: float = 50.0) -> str:
    """A job whose pages (two: not 2xx, a robots row aside) are stored with their
    revisit state, as a worker's commit does."""
    job = await store.create_job(CONFIG)
    pages = [page(url, fetched_at=10.0, content_sha256=f"{i:064x}") for i, url in enumerate(URLS)]
    pages.append(page("http://a.test/missing", status=404))
    seeds = [pv.SeedRow(url, '"e"', None, due, 0.01) for url in [*URLS, "http://a.test/missing"]]

    async def also(cur: psycopg.AsyncCursor) -> None:
        await pv.seed(cur, job, seeds)

    await store.store_batch(job, pages, also=also)
    return job


async def claim(store: PostgresStore, job: str, now: float, limit: int = 100) -> list[str]:
    async with store.pool.connection() as conn:
        due = await pv.claim_due(conn, job, now, limit, until=now + 30)
    return [state.url for state, _depth in due]


async def test_a_stored_page_gets_version_1_and_its_state(store: PostgresStore) -> None:
    job = await seeded_job(store)
    async with store.pool.connection() as conn:
        versions = [v async for v in pv.versions_of(conn, job, None, latest_only=False)]
    assert [v["url"] for v in versions] == sorted(URLS)  # the 404 has none
    assert {(v["version"], v["etag"], v["gone"]) for v in versions} == {(1, '"e"', False)}
    assert await claim(store, job, now=49.0) == []  # not due yet
    assert sorted(await claim(store, job, now=50.0)) == URLS


async def test_workers_claim_disjoint_pages_and_expired_claims_again(
    store: PostgresStore,
) -> None:
    """FOR UPDATE SKIP LOCKED: two claims at once share no page; a claim not released
    (its feeder died) lets the page be claimed again once it expires."""
    job = await seeded_job(store)
    first, second = await asyncio.gather(claim(store, job, 60.0, 4), claim(store, job, 60.0, 4))
    assert not set(first) & set(second) and len(first) + len(second) == len(URLS)
    assert await claim(store, job, now=61.0) == []  # claimed until 90
    assert sorted(await claim(store, job, now=90.0)) == URLS


async def test_a_visit_is_recorded_once_per_due_time(store: PostgresStore) -> None:
    """The same outcome committed twice (a retry after an unknown outcome): one visit
    row, one new version; the state moves on to the next due time."""
    job = await seeded_job(store)
    async with store.pool.connection() as conn:
        state, depth = (await pv.claim_due(conn, job, 60.0, 1, until=90.0))[0]
    request = revisit_request(state, depth)
    result = FetchResult(state.url, state.url, status=200, body=b"<p>new</p>",
                         raw_body=b"<p>new</p>", content_type="text/html",
                         headers=[("ETag", '"f"')], started_at=70.0)  # fmt: skip
    outcome = RevisitOutcome(request, state, result, judge(state, result))
    assert outcome.judgement is not None and outcome.judgement.verdict == "changed"
    written = []

    async def also(cur: psycopg.AsyncCursor) -> None:
        written.append(await pv.record(cur, job, outcome, WINDOW))

    await store.store_batch(job, also=also)
    await store.store_batch(job, also=also)
    assert written == [True, False]
    async with store.pool.connection() as conn:
        versions = [v async for v in pv.versions_of(conn, job, state.url, latest_only=False)]
        visits = await (await conn.execute("SELECT verdict FROM visits")).fetchall()
        row = await (await conn.execute(
            "SELECT version, etag, next_visit_at, claimed_until FROM revisit_state"
            " WHERE url = %s", (state.url,),
        )).fetchone()  # fmt: skip
    assert [(v["version"], v["etag"]) for v in versions] == [(1, '"e"'), (2, '"f"')]
    assert visits == [("changed",)]
    assert row is not None and row[:2] == (2, '"f"') and row[3] is None
    assert 70.0 + WINDOW.min_s <= row[2] <= 70.0 + WINDOW.max_s


async def test_a_version_7_database_gains_the_revisit_tables(fresh_postgres_url: str) -> None:
    """Migration 8 on a database an older Trawler left: its pages stay, revisits work."""
    async with await psycopg.AsyncConnection.connect(fresh_postgres_url, autocommit=True) as conn:
        await migrate_to(conn, MIGRATIONS.index(REVISITS))
        await conn.execute("INSERT INTO jobs (id, config, state) VALUES ('old', '{}', 'running')")
        await conn.execute("INSERT INTO pages (job_id, url, status, fetched_at, kind)"
                           " VALUES ('old', 'http://a.test/', 200, 5.0, 'page')")  # fmt: skip
    async with await PostgresStore.connect(fresh_postgres_url) as store:

        async def also(cur: psycopg.AsyncCursor) -> None:
            await pv.seed(cur, "old", [pv.SeedRow("http://a.test/", None, None, 6.0, 0.1)])

        await store.store_batch("old", also=also)
        assert await claim(store, "old", now=6.0) == ["http://a.test/"]


async def test_a_validator_postgresql_cannot_hold_is_stored_cleaned(store: PostgresStore) -> None:
    """A server's ETag with an undecodable byte (surrogate-escaped in memory) and a NUL:
    the batch commits (it would fail whole otherwise), the bytes become U+FFFD."""
    job = await store.create_job(CONFIG)

    async def also(cur: psycopg.AsyncCursor) -> None:
        await pv.seed(cur, job, [pv.SeedRow(URLS[0], '"a\udcff\x00"', None, 5.0, 0.1)])

    await store.store_batch(job, [page(URLS[0], fetched_at=1.0)], also=also)
    async with store.pool.connection() as conn:
        versions = [v async for v in pv.versions_of(conn, job, URLS[0], latest_only=True)]
    assert [v["etag"] for v in versions] == ['"a\ufffd\ufffd"']


async def test_the_workers_price_the_jobs_revisit_policy(
    store: PostgresStore, tmp_path: Path
) -> None:
    """--revisit-policy on the distributed backend (it was proportional whatever the
    job said): `optimal` is priced from every page's rate in PostgreSQL, as the
    embedded RecrawlStore prices it, and a visit's next due time follows the price;
    `proportional` keeps 1/rate (clamped)."""
    job = await store.create_job(CONFIG)
    rates = [1e-4, 1e-3, 1e-2, 0.05, 0.2, 1.0]
    seeds = [
        pv.SeedRow(url, '"e"', None, 50.0, rate) for url, rate in zip(URLS, rates, strict=True)
    ]
    pages = [page(url, fetched_at=10.0, content_sha256=f"{i:064x}") for i, url in enumerate(URLS)]

    async def also(cur: psycopg.AsyncCursor) -> None:
        await pv.seed(cur, job, seeds)

    await store.store_batch(job, pages, also=also)
    optimal = RevisitWindow(1.0, 3600.0, OPTIMAL)
    revisits = DistributedRevisits.open(store, job, optimal, tmp_path, "w0", 10**8, 30.0)
    try:
        assert revisits.schedule.price is None  # proportional until priced
        await revisits.reprice(force=True)
    finally:
        revisits.close()
    expected = plan_schedule(rates, optimal.bounds, OPTIMAL)
    assert expected.price is not None and revisits.schedule.price == pytest.approx(expected.price)
    intervals = [revisits.schedule.interval_s(r) for r in rates]
    assert intervals != [optimal.interval_s(r) for r in rates]  # not the proportional rule

    proportional = RevisitWindow(1.0, 3600.0, PROPORTIONAL)
    revisits = DistributedRevisits.open(store, job, proportional, tmp_path, "w1", 10**8, 30.0)
    try:
        await revisits.reprice(force=True)
    finally:
        revisits.close()
    assert revisits.schedule.price is None
    assert [revisits.schedule.interval_s(r) for r in rates] == [
        proportional.interval_s(r) for r in rates
    ]


async def test_a_visit_postgresql_refuses_puts_its_page_off(
    store: PostgresStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A visit whose row PostgreSQL refuses (a status out of integer range, as
    test_commit_isolation.py's pages): logged once, the page due again an interval
    later, not again and again as soon as its claim ends; the batch commits."""
    job = await seeded_job(store)
    async with store.pool.connection() as conn:
        state, depth = (await pv.claim_due(conn, job, 60.0, 1, until=90.0))[0]
    body = b"<p>x</p>"
    result = FetchResult(state.url, state.url, status=2**70, body=body, raw_body=body,
                         content_type="text/html", started_at=70.0)  # fmt: skip
    outcome = RevisitOutcome(revisit_request(state, depth), state, result, judge(state, result))
    revisits = DistributedRevisits.open(store, job, WINDOW, tmp_path, "w0", 10**8, 30.0)
    try:
        for _ in range(2):  # the second: a commit retried after an unknown outcome
            await store.store_batch(job, also=revisits.rows_of([], [outcome]))
    finally:
        revisits.close()
    refused = [r for r in caplog.records if "cannot record the revisit" in r.getMessage()]
    assert len(refused) == 1 and state.url in refused[0].getMessage()
    async with store.pool.connection() as conn:
        visits = await (await conn.execute("SELECT count(*) FROM visits")).fetchone()
        row = await (await conn.execute(
            "SELECT next_visit_at, claimed_until, version FROM revisit_state WHERE url = %s",
            (state.url,),
        )).fetchone()  # fmt: skip
    assert visits == (0,) and row is not None
    assert row[0] == pytest.approx(70.0 + WINDOW.interval_s(state.rate_per_s))
    assert row[1:] == (None, 1)
    assert state.url not in await claim(store, job, now=91.0)  # its claim over: not due


async def test_the_rates_are_grouped_in_postgresql_as_in_python(store: PostgresStore) -> None:
    """pv.job_rate_groups, one query, groups as revisit_policy.rate_groups: rates
    in classes 3 % apart (``rate_class``; pages of rate 0 apart), a few hundred for
    many distinct rates; the same price."""
    job = await store.create_job(CONFIG)
    rng = random.Random(5)
    few = [0.0, 0.0, 1e-3, 1e-3, 1.001e-3, 0.5]
    many = few + [10 ** rng.uniform(-7, -1) for _ in range(5000)]
    for rates in (few, many):
        async with store.pool.connection() as conn:
            await conn.execute("DELETE FROM revisit_state WHERE job_id = %s", (job,))
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO revisit_state (job_id, url, host, final_url, version,"
                    " version_at, last_visit_at, next_visit_at, rate_per_s)"
                    " VALUES (%s, %s, 'a.test', %s, 1, 0, 0, 0, %s)",
                    [(job, f"http://a.test/{i}", f"http://a.test/{i}", rate)
                     for i, rate in enumerate(rates)],
                )  # fmt: skip
            grouped = sorted(await pv.job_rate_groups(conn, job))
        expected = sorted(rate_groups(rates))
        assert [n for _, n in grouped] == [n for _, n in expected]
        assert [r for r, _ in grouped] == pytest.approx([r for r, _ in expected], rel=1e-9)
        bounds = WINDOW.bounds
        assert priced_schedule(grouped, bounds).price == pytest.approx(
            plan_schedule(rates, bounds).price, rel=1e-6
        )
    assert sorted(rate_groups(few)) == [(0.0, 2), (rate_class(1e-3), 3), (rate_class(0.5), 1)]
    assert rate_class(1e-3) == pytest.approx(1e-3, rel=RATE_LOG_STEP / 2)
    assert len(grouped) < 500
