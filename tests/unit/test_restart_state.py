"""What the embedded frontier keeps across a restart (frontier/restart_state.py), on a
real SQLite file: a frontier and its commits, then a kill (the frontier dropped without
closing) or a clean stop, then a new frontier loaded from the same file."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from trawler.dedup import url_fingerprint
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest, RobotsFetch
from trawler.robotscache import CACHE_TTL_S, entry_from_kept
from trawler.store.sqlite import DB_NAME, connect
from trawler.urls import host_key

pytestmark = pytest.mark.timeout(30)

DELAY_S = 0.5
TOLERANCE_S = 0.005
HOST = "a.test"


def req(url: str) -> CrawlRequest:
    return CrawlRequest(url, 0, None, host_key(url), url_fingerprint(url))


def opened(data: Path) -> tuple[sqlite3.Connection, SqliteFrontier]:
    conn = connect(data)
    frontier = SqliteFrontier(PolitenessPolicy(DELAY_S))
    frontier.load(conn)
    return conn, frontier


def commit(conn: sqlite3.Connection, frontier: SqliteFrontier, new: Sequence = ()) -> None:
    """What EmbeddedBackend._commit does with the frontier, minus pages and WARC."""
    with conn:
        frontier.persist_new(conn, new)
        frontier.persist_hosts(conn)
    frontier.enqueue(new)


async def crawl_one(data: Path, sent_ago_s: float, clean: bool) -> float:
    """A run that sends one request to HOST ``sent_ago_s`` ago, commits, then sends
    another one that no commit records, and is killed (or stops cleanly). Returns
    the (monotonic) time the recorded request was sent."""
    conn, frontier = opened(data)
    commit(conn, frontier, [req(f"http://{HOST}/{i}") for i in range(3)])
    request = await frontier.next()
    assert request is not None
    sent_at = time.monotonic() - sent_ago_s
    frontier.record_sent(HOST, sent_at)
    await frontier.finish_host(HOST)
    commit(conn, frontier)
    if clean:
        frontier.persist_stopped(conn)
    conn.close()
    return sent_at


async def time_of_next(data: Path) -> float:
    """The (monotonic) time a frontier reopened on ``data`` hands out HOST's next URL."""
    _conn, frontier = opened(data)
    assert await asyncio.wait_for(frontier.next(), 5) is not None
    return time.monotonic()


async def seconds_until_next(data: Path) -> float:
    started = time.monotonic()
    return await time_of_next(data) - started


async def test_after_a_kill_every_host_waits_a_full_interval(tmp_path: Path) -> None:
    # The last recorded request is long past; one after it may have left unrecorded.
    await crawl_one(tmp_path, sent_ago_s=10, clean=False)
    assert await seconds_until_next(tmp_path) >= DELAY_S - TOLERANCE_S


async def test_after_a_clean_stop_kept_times_are_exact(tmp_path: Path) -> None:
    # The same run, stopped cleanly: nothing went unrecorded, so no extra wait (the
    # check above can fail) ...
    await crawl_one(tmp_path / "old", sent_ago_s=10, clean=True)
    assert await seconds_until_next(tmp_path / "old") < DELAY_S / 2
    # ... and a request sent just before the stop still spaces the next one. The gap
    # is measured from that request, not from the reopening: the stop and the reopening
    # take time of their own (tens of ms on a loaded machine).
    sent_at = await crawl_one(tmp_path / "recent", sent_ago_s=0, clean=True)
    gap = await time_of_next(tmp_path / "recent") - sent_at
    assert DELAY_S - TOLERANCE_S <= gap < 2 * DELAY_S


async def test_a_stopped_run_that_restarts_and_is_killed_is_unclean(tmp_path: Path) -> None:
    await crawl_one(tmp_path, sent_ago_s=10, clean=True)
    conn, _frontier = opened(tmp_path)  # resumed, then killed before its close
    conn.close()
    assert await seconds_until_next(tmp_path) >= DELAY_S - TOLERANCE_S


async def test_crawl_delay_and_back_off_are_kept(tmp_path: Path) -> None:
    conn, frontier = opened(tmp_path)
    commit(conn, frontier, [req(f"http://{HOST}/1")])
    frontier.set_crawl_delay(HOST, 1.5)
    frontier.record_sent(HOST, time.monotonic())
    frontier.record_response(HOST, 503, None, None)
    commit(conn, frontier)
    frontier.persist_stopped(conn)
    conn.close()
    _conn, resumed = opened(tmp_path)
    slot = resumed._slots[HOST]
    assert slot.crawl_delay_s == 1.5 and slot.health.backoff_s > 0
    assert slot.next_allowed_at - time.monotonic() > 1.5 + slot.health.backoff_s - 0.2


async def test_robots_txt_is_kept_for_fetchers_of_the_same_profile(tmp_path: Path) -> None:
    site = f"http://{HOST}"
    fresh = RobotsFetch(200, None, b"User-agent: *\nDisallow: /x\n", time.time())
    stale = RobotsFetch(200, None, b"", time.time() - CACHE_TTL_S - 1)
    conn, frontier = opened(tmp_path)
    await frontier.share_robots(site, "p1", fresh, CACHE_TTL_S, job_only=False)
    await frontier.share_robots("http://b.test", "p1", stale, CACHE_TTL_S, job_only=False)
    commit(conn, frontier)
    conn.close()
    _conn, resumed = opened(tmp_path)
    assert await resumed.shared_robots(site, "p2") is None  # other headers or reach
    assert await resumed.shared_robots(site, "p1") == fresh
    assert await resumed.shared_robots("http://b.test", "p1") is None  # past 24 h


async def test_robots_txt_kept_with_the_commit_that_archives_it(tmp_path: Path) -> None:
    """A robots.txt fetched while a commit is being written belongs to the next batch
    (its WARC record is there): it is kept by that commit, not by the one running, or
    a kill between the two would keep a fetch the archive never got."""
    early = RobotsFetch(200, None, b"", time.time())
    late = RobotsFetch(404, None, b"", time.time())
    conn, frontier = opened(tmp_path)
    await frontier.share_robots("http://a.test", "p", early, CACHE_TTL_S, job_only=False)
    mark = frontier.restart_mark()  # the engine hands its batch over here
    await frontier.share_robots("http://b.test", "p", late, CACHE_TTL_S, job_only=False)
    with conn:
        frontier.persist_hosts(conn, mark)  # the commit of that batch
    kept = [row[0] for row in conn.execute("SELECT site FROM robots")]
    assert kept == ["http://a.test"]
    with conn:
        frontier.persist_hosts(conn, frontier.restart_mark())  # the next one
    assert {row[0] for row in conn.execute("SELECT site FROM robots")} == {
        "http://a.test", "http://b.test"
    }  # fmt: skip


async def test_data_directory_of_an_older_version_resumes_with_a_full_wait(
    tmp_path: Path,
) -> None:
    old = sqlite3.connect(tmp_path / DB_NAME)  # the urls table as older versions made it
    old.executescript("""
        CREATE TABLE urls (fp INTEGER PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL,
            depth INTEGER NOT NULL, parent_url TEXT, state INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0, reason TEXT,
            kind TEXT NOT NULL DEFAULT 'page', lastmod TEXT);
    """)  # fmt: skip
    r = req(f"http://{HOST}/1")
    old.execute("INSERT INTO urls (fp, url, host, depth) VALUES (?, ?, ?, 0)", (r.fp, r.url, HOST))
    old.commit()
    old.close()
    assert await seconds_until_next(tmp_path) >= DELAY_S - TOLERANCE_S


def test_kept_robots_txt_keeps_its_age_and_failures() -> None:
    now, wall = time.monotonic(), time.time()
    kept = entry_from_kept(RobotsFetch(200, None, b"", wall - 100), "bot", now, wall)
    assert kept.fetched_at == pytest.approx(now - 100) and not kept.expired(now)
    failing = entry_from_kept(RobotsFetch(503, None, b"", wall - 6, failures=2), "bot", now, wall)
    assert failing.unavailable and failing.failures == 2
    assert not failing.expired(now)  # the second wait (30 s) is not over
    ahead = entry_from_kept(RobotsFetch(200, None, b"", wall + 50), "bot", now, wall)
    assert ahead.fetched_at == now  # another machine's clock ahead: no younger than now
