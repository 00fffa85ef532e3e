"""The job store contract, one suite run against both backends (jobs/store.py):
the embedded registry DATA/jobs.db and PostgreSQL (a fresh database per test)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.jobs.embedded import EmbeddedJobStore
from trawler.jobs.model import InvalidTransition, JobState, NotRevisitable, UnknownJob
from trawler.jobs.store import JobStore

S = JobState


@pytest.fixture(params=["embedded", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JobStore]:
    if request.param == "embedded":
        yield EmbeddedJobStore(tmp_path / "data")
        return
    from trawler.jobs.postgres import PostgresJobStore
    from trawler.store.postgres import PostgresStore

    url = request.getfixturevalue("fresh_postgres_url")
    pg = await PostgresStore.connect(url)
    try:
        yield PostgresJobStore(pg)
    finally:
        await pg.close()


CONFIG = CrawlConfig(max_depth=2, delay_s=0.5, include=["/docs/"])


async def test_create_makes_a_pending_job_with_its_options(store: JobStore) -> None:
    job_id = await store.create(CONFIG)
    info = await store.get(job_id)
    assert (info.id, info.state, info.seeding) == (job_id, S.PENDING, False)
    assert info.options["max_depth"] == 2 and info.options["delay_s"] == 0.5
    assert info.options["include"] == ["/docs/"] and "seeds" not in info.options
    assert info.started_at is None and info.finished_at is None
    assert [(e.from_state, e.to_state) for e in info.events] == [(None, S.PENDING)]
    assert abs(info.created_at - info.events[0].at) < 5
    assert (await store.config(job_id)).max_depth == 2


async def test_unknown_job(store: JobStore) -> None:
    for call in (store.get, store.events, store.config):
        with pytest.raises(UnknownJob):
            await call("nosuchjob")
    with pytest.raises(UnknownJob):
        await store.transition("nosuchjob", S.RUNNING)


async def test_transitions_are_recorded_with_their_times_and_reasons(store: JobStore) -> None:
    job_id = await store.create(CONFIG)
    running = await store.transition(job_id, S.RUNNING, "started")
    assert running.state is S.RUNNING and running.started_at is not None
    await store.transition(job_id, S.PAUSED, "user")
    again = await store.transition(job_id, S.RUNNING, "user")
    assert again.started_at == running.started_at  # the first start
    ended = await store.transition(job_id, S.FINISHED, "complete")
    assert ended.finished_at is not None and ended.finished_at >= ended.started_at
    events = await store.events(job_id)
    assert [(e.from_state, e.to_state, e.reason) for e in events] == [
        (None, S.PENDING, "created"), (S.PENDING, S.RUNNING, "started"),
        (S.RUNNING, S.PAUSED, "user"), (S.PAUSED, S.RUNNING, "user"),
        (S.RUNNING, S.FINISHED, "complete"),
    ]  # fmt: skip
    times = [e.at for e in events]
    assert times == sorted(times)
    assert (await store.get(job_id)).events == events


async def test_invalid_transition_changes_nothing(store: JobStore) -> None:
    job_id = await store.create(CONFIG)
    await store.transition(job_id, S.CANCELLED, "user")
    with pytest.raises(InvalidTransition, match=f"job {job_id} is cancelled"):
        await store.transition(job_id, S.RUNNING)
    info = await store.get(job_id)
    assert info.state is S.CANCELLED and len(info.events) == 2


async def test_racing_transitions_let_exactly_one_win(store: JobStore) -> None:
    """running → finished and running → paused at once: whichever comes second is
    refused (paused → finished and finished → paused are not transitions)."""
    for _ in range(5):
        job_id = await store.create(CONFIG)
        await store.transition(job_id, S.RUNNING)
        results = await asyncio.gather(
            store.transition(job_id, S.FINISHED), store.transition(job_id, S.PAUSED),
            return_exceptions=True,
        )  # fmt: skip
        assert sum(isinstance(r, InvalidTransition) for r in results) == 1, results
        assert len(await store.events(job_id)) == 3


async def test_list_filters_pages_and_counts(store: JobStore) -> None:
    ids = [await store.create(CONFIG) for _ in range(5)]
    await store.transition(ids[1], S.RUNNING)
    await store.transition(ids[3], S.RUNNING)
    everything, total = await store.list()
    assert total == 5 and [j.id for j in everything] == ids[::-1]  # newest first
    page, total = await store.list(offset=1, limit=2)
    assert total == 5 and [j.id for j in page] == [ids[3], ids[2]]
    running, total = await store.list([S.RUNNING])
    assert total == 2 and [j.id for j in running] == [ids[3], ids[1]]
    both, total = await store.list([S.RUNNING, S.PENDING], offset=4, limit=10)
    assert total == 5 and [j.id for j in both] == [ids[0]]
    none, total = await store.list([S.FAILED])
    assert (none, total) == ([], 0)


async def test_state_alone(store: JobStore) -> None:
    """What a running crawl polls (jobs/follow.py)."""
    job_id = await store.create(CONFIG)
    assert await store.state(job_id) is S.PENDING
    await store.transition(job_id, S.RUNNING)
    assert await store.state(job_id) is S.RUNNING
    with pytest.raises(UnknownJob):
        await store.state("nosuchjob")


async def test_seeding_flag(store: JobStore) -> None:
    job_id = await store.create(CONFIG, seeding=True)
    assert (await store.get(job_id)).seeding
    await store.set_seeding(job_id, False)
    assert not (await store.get(job_id)).seeding
    with pytest.raises(UnknownJob):
        await store.set_seeding("nosuchjob", True)


async def test_jobs_of_a_version_4_database_gain_times_and_a_first_event(
    fresh_postgres_url: str,
) -> None:
    """Migration 5 (store/pgschema.py): older jobs keep their state and get what can be
    known of their history; `failed` becomes a state PostgreSQL accepts."""
    import psycopg

    from trawler.jobs.postgres import PostgresJobStore
    from trawler.store.pgschema import MIGRATIONS, SCOPE_HOSTS_VERSION
    from trawler.store.postgres import PostgresStore

    with psycopg.connect(fresh_postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, sql in enumerate(MIGRATIONS[:SCOPE_HOSTS_VERSION], start=1):
            conn.execute(sql)
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        conn.execute("INSERT INTO jobs (id, config, state) VALUES ('old', '{}', 'finished')")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO jobs (id, config, state) VALUES ('f', '{}', 'failed')")
    async with await PostgresStore.connect(fresh_postgres_url) as pg:
        jobs = PostgresJobStore(pg)
        old = await jobs.get("old")
        assert old.state is S.FINISHED and old.started_at and old.finished_at
        assert [(e.from_state, e.to_state) for e in old.events] == [(None, S.FINISHED)]
        new = await jobs.create(CONFIG)
        await jobs.transition(new, S.FAILED, "disk full")
        assert [j.id for j in (await jobs.list())[0]] == [new, "old"]


async def test_a_new_registry_opened_by_many_at_once(tmp_path: Path) -> None:
    """The serve process, a crawl and the control follower open the registry
    together: switching a new file to WAL must wait for the others, not fail with
    'database is locked'."""
    from trawler.jobs.embedded_controls import EmbeddedControlStore

    for n in range(40):
        controls = EmbeddedControlStore(tmp_path / f"data{n}")
        jobs = EmbeddedJobStore(tmp_path / f"data{n}")
        await asyncio.gather(
            controls.state(), controls.block("a.example"), jobs.create(CONFIG), controls.version()
        )


@pytest.mark.parametrize("ended", [S.FINISHED, S.CANCELLED])
async def test_an_ended_job_reopens_for_a_revisit_pass_only(tmp_path: Path, ended: S) -> None:
    """Embedded only (the API's recrawl): finished or cancelled → running, its end time
    cleared until it ends again; resume stays refused; other states are refused."""
    store = EmbeddedJobStore(tmp_path / "data")
    job_id = await store.create(CONFIG)
    for state in (S.RUNNING, ended):
        await store.transition(job_id, state)
    with pytest.raises(InvalidTransition):
        await store.transition(job_id, S.RUNNING)  # a resume: the crawl is over
    reopened = await store.reopen(job_id, "recrawl")
    assert (reopened.state, reopened.finished_at) == (S.RUNNING, None)
    again = await store.transition(job_id, ended, "recrawl done")
    assert again.finished_at is not None and again.started_at == reopened.started_at
    events = [(e.from_state, e.to_state, e.reason) for e in await store.events(job_id)][-2:]
    assert events == [(ended, S.RUNNING, "recrawl"), (S.RUNNING, ended, "recrawl done")]


@pytest.mark.parametrize("path", [[], [S.RUNNING], [S.PAUSED], [S.RUNNING, S.FAILED]])
async def test_a_job_whose_crawl_is_not_over_does_not_reopen(tmp_path: Path, path: list[S]) -> None:
    store = EmbeddedJobStore(tmp_path / "data")
    job_id = await store.create(CONFIG)
    for state in path:
        await store.transition(job_id, state)
    with pytest.raises(NotRevisitable, match="needs a finished or cancelled job"):
        await store.reopen(job_id, "recrawl")
    assert await store.state(job_id) is (path[-1] if path else S.PENDING)
