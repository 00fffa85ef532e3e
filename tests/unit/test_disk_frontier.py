"""The embedded frontier's memory and resume, on a real SQLite file: queues on disk
with a window per host, an exact seen set of ~8 bytes a URL, a resume that reads
no queued URL, and data directories of the older layout migrated."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.seen import MERGE_MIN, SORT_MIN, SeenSet
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.store.sqlite import DB_NAME, SqliteStore, connect
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(120)


def req(url: str, depth: int = 0) -> CrawlRequest:
    return CrawlRequest(url, depth, None, host_key(url), url_fingerprint(url))


def many(hosts: int, per_host: int, depth: int = 1) -> list[CrawlRequest]:
    return [
        req(f"http://h{h}.test/d{depth}/{i}", depth) for i in range(per_host) for h in range(hosts)
    ]


class Run:
    """A frontier on a data directory, committed the way EmbeddedBackend does."""

    def __init__(self, data: Path, **options: int) -> None:
        self.conn = connect(data)
        self.frontier = SqliteFrontier(PolitenessPolicy(0.0), **options)
        self.frontier.load(self.conn)

    async def add(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        fresh = await self.frontier.filter_new(requests)
        self.commit(fresh)
        return fresh

    def commit(self, new: Sequence[CrawlRequest] = (), done: Sequence[CrawlRequest] = ()) -> None:
        with self.conn:
            self.frontier.persist_new(self.conn, new)
            self.frontier.persist_done(self.conn, [(r, False) for r in done], [])
            self.frontier.persist_hosts(self.conn)
        self.frontier.enqueue(new)
        self.frontier.ack(len(done))

    async def lease(self) -> CrawlRequest:
        request = await asyncio.wait_for(self.frontier.next(), 10)
        assert request is not None
        await self.frontier.finish_host(request.host)
        return request

    async def drain(self) -> list[CrawlRequest]:
        out = []
        while (request := await asyncio.wait_for(self.frontier.next(), 10)) is not None:
            await self.frontier.finish_host(request.host)
            self.commit(done=[request])
            out.append(request)
        return out

    def stop(self) -> None:
        """A clean stop (what EmbeddedBackend.close does)."""
        self.frontier.persist_stopped(self.conn)
        getattr(self.frontier, "persist_closing", lambda _conn: None)(self.conn)
        self.conn.close()


def count_steps(conn: sqlite3.Connection) -> list[int]:
    """Count the SQLite VM steps run on ``conn`` (rows read cost steps)."""
    steps = [0]

    def tick() -> int:
        steps[0] += 100
        return 0

    conn.set_progress_handler(tick, 100)
    return steps


async def test_resume_reads_no_queued_url_before_the_first_fetch(tmp_path: Path) -> None:
    first = Run(tmp_path)
    for depth in range(1, 5):  # 20,000 queued URLs over 50 hosts, in 5 commits
        await first.add(many(50, 100, depth))
    await first.add([req(f"http://h{h}.test/deep{i}", 9) for h in range(50) for i in range(300)])
    queued = first.frontier.queued
    assert queued >= 20_000
    first.stop()

    conn = connect(tmp_path)
    steps = count_steps(conn)
    again = SqliteFrontier(PolitenessPolicy(0.0))
    again.load(conn)
    assert await asyncio.wait_for(again.next(), 5) is not None
    # The old frontier read every URL (~30 steps each, > 600,000 here).
    assert steps[0] < 50_000, f"{steps[0]} VM steps to resume {queued} queued URLs"
    assert getattr(again, "seen_rows_read", queued) == 0
    assert again._queues.rows_read <= again.window
    assert again.queued == queued - 1  # one leased


async def test_after_a_kill_only_rows_since_the_saved_seen_set_are_read(tmp_path: Path) -> None:
    first = Run(tmp_path)
    await first.add(many(10, 100))
    first.stop()
    second = Run(tmp_path)
    late = await second.add(many(10, 5, depth=2)[:30])
    second.conn.close()  # killed: no clean stop
    third = Run(tmp_path)
    assert third.frontier.seen_rows_read == len(late)
    assert await third.frontier.filter_new(many(10, 100)[:50] + late) == []


async def test_memory_grows_with_hosts_not_urls(tmp_path: Path) -> None:
    """The URLs are made inside the measure: what the frontier keeps of them counts."""
    run = Run(tmp_path)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for depth in range(1, 11):  # 100,000 URLs over 100 hosts
            await run.add(many(100, 100, depth))
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    per_url = grown / run.frontier.queued
    assert run.frontier.queued == 100_000
    assert per_url < 60, f"{per_url:.0f} B of RAM per queued URL"


async def test_every_url_once_in_depth_order_through_small_windows(tmp_path: Path) -> None:
    """Windows of 4: refills, shallow URLs found late (the window gives URLs back),
    hand-backs and leases in flight; each host still yields its URLs in (depth,
    discovery) order, each once."""
    rng = random.Random(7)
    run = Run(tmp_path, window=4)
    found: list[CrawlRequest] = []
    for step in range(12):
        depth = rng.choice([1, 2, 3]) if step else 3
        found += await run.add([req(f"http://h{h}.test/s{step}-{i}", depth)
                                for h in range(3) for i in range(rng.randint(1, 9))])  # fmt: skip
        if step % 3 == 1:
            held = await run.lease()
            await run.frontier.hand_back(held)
        if step % 4 == 2:
            run.commit(done=[await run.lease()])
    out = await run.drain()
    assert run.frontier.queued == 0
    done = [r.url for r in out]
    assert len(done) == len(set(done))
    fetched = set(done) | {r.url for r in found if r.url not in done}
    assert fetched == {r.url for r in found}
    order = {r.url: (r.depth, n) for n, r in enumerate(found)}
    for host in range(3):
        mine = [order[u] for u in done if f"//h{host}." in u]
        assert mine == sorted(mine)


async def test_a_url_filtered_but_never_committed_is_not_seen_after_a_restart(
    tmp_path: Path,
) -> None:
    """Only committed URLs are saved as seen: one marked seen in a batch that a kill
    lost is found again (else its page would be lost for good)."""
    run = Run(tmp_path)
    await run.add(many(3, 3))
    lost = await run.frontier.filter_new([req("http://h0.test/lost")])
    assert lost
    run.stop()  # the batch holding it was never committed
    again = Run(tmp_path)
    assert await again.frontier.filter_new([req("http://h0.test/lost")]) != []
    assert await again.frontier.filter_new(many(3, 3)) == []


async def test_a_data_directory_of_the_older_layout_is_migrated(tmp_path: Path) -> None:
    connect(tmp_path).close()
    old = sqlite3.connect(tmp_path / DB_NAME)
    old.executescript("""
        DROP TABLE urls;
        DROP TABLE IF EXISTS host_queues;
        CREATE TABLE urls (fp INTEGER PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL,
            depth INTEGER NOT NULL, parent_url TEXT, state INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0, reason TEXT,
            kind TEXT NOT NULL DEFAULT 'page', lastmod TEXT);
        CREATE INDEX urls_queued ON urls(state) WHERE state = 0;
    """)
    rows = [req(f"http://h{i % 2}.test/{i}", i % 3) for i in range(10)]
    old.executemany(
        "INSERT INTO urls (fp, url, host, depth, state) VALUES (?, ?, ?, ?, ?)",
        [(r.fp, r.url, r.host, r.depth, 1 if i < 4 else 0) for i, r in enumerate(rows)],
    )
    old.commit()
    old.close()
    run = Run(tmp_path)
    assert run.frontier.queued == 6
    assert await run.frontier.filter_new(rows) == []
    assert sorted(r.url for r in await run.drain()) == sorted(r.url for r in rows[4:])


def test_the_seen_set_is_exact_and_saves_only_committed_urls() -> None:
    """Through merges of the sorted arrays: every URL marked stays seen, at < 16 B each;
    the part a snapshot may keep holds exactly the committed URLs."""
    rng = random.Random(3)
    fps = list({rng.getrandbits(63) - (1 << 62) for _ in range(200_000)})
    committed, dropped = fps[:150_000], fps[150_000:]
    seen = SeenSet()
    assert all(seen.mark_new(fps))
    for start in range(0, len(committed), 5000):
        seen.committed(committed[start : start + 5000], seq=start + 5000)
    assert not any(seen.mark_new(fps))
    assert seen.ram_bytes < 16 * len(fps)
    main, watermark = seen.saved()
    assert sorted(main.tolist()) == sorted(committed) and watermark == len(committed)
    assert not any(seen.mark_new(dropped))


async def test_per_host_counts_agree_with_the_rows(tmp_path: Path) -> None:
    """The counts a resume reads instead of the URLs (queued; admitted, for the
    per-host budget) are those of the rows, after done, skipped and repeated outcomes."""
    run = Run(tmp_path)
    await run.add(many(4, 6))
    taken = [await run.lease() for _ in range(4)]
    with run.conn:
        run.frontier.persist_done(run.conn, [(taken[0], False), (taken[1], True)], [])
        run.frontier.persist_done(run.conn, [(taken[0], False)], [(taken[2], "robots")])
    run.frontier.ack(3)
    await run.frontier.hand_back(taken[3])
    rows = run.conn.execute(
        "SELECT host, sum(state = 0), sum(state != 2) FROM urls GROUP BY host"
    ).fetchall()
    counts = run.conn.execute("SELECT host, queued, admitted FROM host_queues").fetchall()
    assert sorted(rows) == sorted(counts)
    assert SqliteStore(run.conn).host_url_counts() == {host: n for host, _, n in rows}
    assert run.frontier.queued == sum(queued for _, queued, _ in rows)


async def test_one_saved_seen_array_is_kept(tmp_path: Path) -> None:
    for step in range(3):
        run = Run(tmp_path)
        await run.add(many(5, 10, depth=step + 1))
        run.stop()
    assert len(list(tmp_path.glob("seen-*.fp"))) == 1
    again = Run(tmp_path)
    assert again.frontier.seen_rows_read == 0
    assert await again.frontier.filter_new(many(5, 10, depth=2)) == []


def test_the_seen_set_answers_each_key_in_its_place() -> None:
    """Seen and unseen fingerprints mixed, in no order: each answer is its own key's
    (the lookups are made in sorted order and put back)."""
    rng = random.Random(5)
    old = list({rng.getrandbits(63) - (1 << 62) for _ in range(20_000)})
    seen = SeenSet()
    seen.mark_new(old)
    seen.committed(old, seq=len(old))
    seen.merge()
    new = list({rng.getrandbits(63) for _ in range(2_000)} - set(old))
    mixed = rng.sample(old, 3_000) + new
    rng.shuffle(mixed)
    known = set(old)
    assert seen.mark_new(mixed) == [fp not in known for fp in mixed]


def test_the_seen_set_answers_small_batches_as_large_ones() -> None:
    """A page's links (a few keys, searched unsorted) and a seed chunk (many, sorted
    first) get the answers a Python set gives, with the volatile array in use too."""
    rng = random.Random(7)
    seen, known = SeenSet(), set()
    old = list({rng.getrandbits(63) - (1 << 62) for _ in range(MERGE_MIN * 2)})
    seen.mark_new(old)
    seen.committed(old, seq=len(old))
    seen.merge()
    known.update(old)
    for size in [3 * MERGE_MIN, 1, 2, 7, 40, SORT_MIN - 1, SORT_MIN, 3 * SORT_MIN]:
        batch = rng.sample(old, size // 2) + [rng.getrandbits(63) for _ in range(size - size // 2)]
        batch += batch[: size // 3]  # repeats within a batch: only the first one is new
        rng.shuffle(batch)
        expected = []
        for fp in batch:
            expected.append(fp not in known)
            known.add(fp)
        assert seen.mark_new(batch) == expected, size
    assert len(seen._volatile) > 0  # the first batch moved the pending ones out of the set
    probe = rng.sample(sorted(known), 50) + [rng.getrandbits(63) for _ in range(50)]
    assert [fp in seen for fp in probe] == [fp in known for fp in probe]


async def test_a_host_ready_sooner_is_leased_when_ready_not_at_an_earlier_wait_s_end() -> None:
    """The dispatcher's wait for the next ready host is ended early by new URLs; a
    host that becomes ready before the time the earlier wait aimed at is leased
    when it is ready (the wake-up timer is kept between waits, never for too long)."""
    frontier = SqliteFrontier(PolitenessPolicy(2.0))
    a, b = req("http://a.test/1", 1), req("http://b.test/1", 1)
    frontier.enqueue([a, req("http://a.test/2", 1)])
    first = await frontier.next()
    assert first is not None and first.url == a.url
    frontier.record_sent(first.host, frontier.clock())
    await frontier.finish_host(first.host)  # a.test: ready again in 2 s
    waiting = asyncio.ensure_future(frontier.next())
    await asyncio.sleep(0.1)  # next() waits for a.test, 2 s off
    frontier.enqueue([b])  # ends that wait: b.test is ready at once
    leased = await asyncio.wait_for(waiting, 1)
    assert leased is not None and leased.url == b.url
    await frontier.hand_back(leased, delay_s=0.3)  # b.test ready in 0.3 s, a.test in ~1.9
    await frontier.finish_host(leased.host)  # as the crawl loop does after a hand-back
    started = frontier.clock()
    again = await asyncio.wait_for(frontier.next(), 5)
    assert again is not None and again.url == b.url
    assert 0.25 < frontier.clock() - started < 1.0
    frontier.close()
