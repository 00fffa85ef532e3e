"""The shared duplicate index (issue 17, store/pg_dedup.py) against a real PostgreSQL:
the embedded rule over what every writer of a job stored, and two writers committing
near-copies at the same moment keep one original."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import psycopg

from trawler.config import CrawlConfig
from trawler.minhash import sketch
from trawler.records import PageRecord
from trawler.simhash import simhash, text_hash
from trawler.sitegen import _WORDS
from trawler.store.pg_dedup import DEDUP_LOCK_CLASS, SharedDedup
from trawler.store.postgres import CommitKey, PostgresStore

from .test_pg_totals import page

WORDS = [f"{word}{i}" for i in range(30) for word in _WORDS]


def text_page(i: int, text: str) -> PageRecord:
    return dataclasses.replace(
        page(i), text=text, text_hash=text_hash(text), simhash=f"{simhash(text):016x}",
        minhash=sketch(text),
    )  # fmt: skip


def article(seed: int, edit: int | None = None) -> str:
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(600)]
    if edit is not None:
        words[100 + 40 * edit] = f"lighthousekeeper{edit}"
    return " ".join(words)


def flags(url: str, job_id: str) -> dict[str, str | None]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT url, duplicate_of FROM pages WHERE job_id = %s ORDER BY id", (job_id,)
        ).fetchall()
    return {u.rsplit("/", 1)[1]: d for u, d in rows}


async def test_the_embedded_rule_over_every_writers_pages(fresh_postgres_url: str) -> None:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job = await store.create_job(CrawlConfig(), "running")
        dedup = SharedDedup(3)
        await store.store_batch(job, [text_page(1, article(1))], dedup=dedup,
                                commit=CommitKey.new("a"))  # fmt: skip
        later = [text_page(2, article(1)), text_page(3, article(1, edit=0)),
                 text_page(4, article(2)), text_page(5, article(2, edit=1))]  # fmt: skip
        await store.store_batch(job, later, dedup=dedup, commit=CommitKey.new("b"))
    original, other = "http://a.test/1", "http://a.test/4"
    assert flags(fresh_postgres_url, job) == {
        "1": None, "2": original, "3": original, "4": None, "5": other,
    }  # fmt: skip


async def test_two_writers_committing_copies_at_once_keep_one_original(
    fresh_postgres_url: str,
) -> None:
    """The second writer waits on the job's lock (held here by a third connection
    until both have started), then finds the first's page."""
    async with (
        await PostgresStore.connect(fresh_postgres_url) as one,
        await PostgresStore.connect(fresh_postgres_url) as two,
    ):
        job = await one.create_job(CrawlConfig(), "running")
        async with await psycopg.AsyncConnection.connect(fresh_postgres_url) as holder:
            async with holder.transaction():
                await holder.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (DEDUP_LOCK_CLASS, job)
                )
                commits = [
                    asyncio.create_task(
                        store.store_batch(
                            job,
                            [text_page(i, article(3, edit=i))],
                            dedup=SharedDedup(3),
                            commit=CommitKey.new(f"w{i}"),
                        )
                    )  # fmt: skip
                    for i, store in ((1, one), (2, two))
                ]
                await asyncio.sleep(0.5)  # both wait on the lock now
                assert not any(task.done() for task in commits)
            await asyncio.gather(*commits)
    (first, first_flag), (_second, second_flag) = flags(fresh_postgres_url, job).items()
    assert first_flag is None and second_flag == f"http://a.test/{first}"  # in commit order
