"""Sitemap <changefreq> (issue 15): kept per URL beside <lastmod>, exported as
`sitemap_changefreq`, and the first estimate of a page's change rate, clamped to the
revisit window. A real crawl of a scripted site on loopback, embedded and distributed
(`trawler submit --recrawl`, a worker, the session's redis-server and PostgreSQL: the
field travels through the Redis queue entries)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.e2e.conftest import job_data, run_trawler, until
from tests.e2e.scripted import page, start_scripted
from tests.servers import PostgresServer

pytestmark = pytest.mark.timeout(120)
XML = {"Content-Type": "application/xml"}
HTML = {"Content-Type": "text/html"}
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
WINDOW = (3600.0, 31_536_000.0)  # --revisit-min 1 h, --revisit-max 365 days
DAY_S = 86400.0
# The page's <changefreq> and the first interval it gets within WINDOW.
EXPECTED = {
    "always": WINDOW[0], "hourly": 3600.0, "daily": DAY_S, "weekly": 7 * DAY_S,
    "monthly": 30 * DAY_S, "yearly": 365 * DAY_S, "never": WINDOW[1], "Weekly": 7 * DAY_S,
}  # fmt: skip


def entry(base: str, name: str, tail: str) -> str:
    return f"<url><loc>{base}/{name}</loc>{tail}</url>"


def site_script(two_days_ago: str) -> dict:
    base = "http://127.0.9.1:{port}"
    entries = [entry(base, f"p-{freq}", f"<changefreq>{freq}</changefreq>") for freq in EXPECTED]
    entries.append(entry(base, "p-bogus", "<changefreq>sometimes</changefreq>"))
    entries.append(entry(base, "p-lastmod", f"<lastmod>{two_days_ago}</lastmod>"))
    pages = {f"/p-{name}": page("<title>p</title><p>a page</p>", **HTML)
             for name in [*EXPECTED, "bogus", "lastmod"]}  # fmt: skip
    return {"0": {
        "/robots.txt": page("User-agent: *\n", **{"Content-Type": "text/plain"}),
        "/": page("<title>home</title><p>nothing linked</p>", **HTML),
        "/sitemap.xml": page(f"<urlset {NS}>{''.join(entries)}</urlset>", **XML),
        **pages,
    }}  # fmt: skip


def test_changefreq_is_kept_exported_and_seeds_the_first_estimate(tmp_path: Path) -> None:
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    server = start_scripted(tmp_path, site_script(two_days_ago))
    data = tmp_path / "data"
    try:
        out = run_trawler("crawl", server.bases[0] + "/", "--data", str(data), "--delay", "0",
                          "--allow-private", "-q")  # fmt: skip
        assert out.returncode == 0, out.stderr
        # Seeds each page's revisit state; nothing is due within a second at min 1 h.
        window = ("--revisit-min", str(WINDOW[0]), "--revisit-max", str(WINDOW[1]))
        out = run_trawler("recrawl", "--data", str(data), "--continuous", "--max-seconds", "1",
                          *window)  # fmt: skip
        assert out.returncode == 0, out.stderr
    finally:
        server.stop()
    exported = {r["url"].rsplit("/", 1)[1]: r for r in export(data)}
    assert {name: exported[f"p-{name}"]["sitemap_changefreq"] for name in EXPECTED} == {
        name: name.lower() for name in EXPECTED
    }
    assert exported["p-bogus"]["sitemap_changefreq"] is None  # not a protocol value
    assert exported["p-lastmod"]["sitemap_changefreq"] is None
    assert exported["p-lastmod"]["sitemap_lastmod"] == two_days_ago
    intervals = first_intervals(data)
    for name, interval_s in EXPECTED.items():
        assert intervals[f"p-{name}"] == pytest.approx(interval_s), name
    assert intervals["p-bogus"] == pytest.approx((WINDOW[0] * WINDOW[1]) ** 0.5)  # unknown
    assert intervals["p-lastmod"] == pytest.approx(2 * DAY_S, rel=0.01)  # 1 / its age
    csv = run_trawler("export", "--data", str(data), "--format", "csv").stdout
    assert "sitemap_lastmod,sitemap_changefreq," in csv.splitlines()[0]


def export(data: Path) -> list[dict]:
    out = run_trawler("export", "--data", str(data))
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def first_intervals(data: Path) -> dict[str, float]:
    """Each page's first revisit interval: its due time after its crawl's fetch."""
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        visits = conn.execute("SELECT count(*) FROM visits").fetchone()[0]
        rows = conn.execute("SELECT url, next_visit_at - version_at FROM revisit_state")
        intervals = {url.rsplit("/", 1)[1]: gap for url, gap in rows}
    assert visits == 0  # no revisit yet: these are the sitemap's estimates
    return intervals


def test_changefreq_travels_through_redis_into_postgresql(
    tmp_path: Path, redis_url: str, postgres_server: PostgresServer
) -> None:
    """A continuous distributed job: each page's row keeps its <changefreq> and its
    first revisit is due after the interval it gives, as embedded."""
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    server = start_scripted(tmp_path, site_script(two_days_ago))
    database = postgres_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    connect = ["--redis", redis_url, "--postgres", database]
    # Proportional: a first interval is then 1/rate, the estimate's witness. The workers
    # price the optimal schedule (the default) once a second while the commits seed
    # pages, so a page seeded after the first pricing would be due at its price.
    window = ("--revisit-min", str(WINDOW[0]), "--revisit-max", str(WINDOW[1]),
              "--revisit-policy", "proportional")  # fmt: skip
    out = run_trawler("submit", server.bases[0] + "/", *connect, "--delay", "0",
                      "--allow-private", "--recrawl", *window)  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().splitlines()[-1]
    worker = subprocess.Popen(
        [sys.executable, "-m", "trawler", "worker", *connect, "--warc-dir",
         str(tmp_path / "warc"), "--worker-id", "w0", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    states = "SELECT count(*) FROM revisit_state WHERE job_id = %s"
    try:
        seeded = until(lambda: rows(database, states, job) == [(len(EXPECTED) + 3,)], 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        err = worker.communicate(timeout=30)[1]
        server.stop()
    assert seeded, err
    stored = dict(rows(database, "SELECT url, sitemap_changefreq FROM pages WHERE job_id = %s"
                      " AND kind = 'page'", job))  # fmt: skip
    by_name = {url.rsplit("/", 1)[1]: freq for url, freq in stored.items()}
    assert {name: by_name[f"p-{name}"] for name in EXPECTED} == {n: n.lower() for n in EXPECTED}
    assert by_name["p-bogus"] is None and by_name["p-lastmod"] is None
    gaps = rows(database, "SELECT url, next_visit_at - version_at FROM revisit_state"
                " WHERE job_id = %s", job)  # fmt: skip
    intervals = {url.rsplit("/", 1)[1]: gap for url, gap in gaps}
    for name, interval_s in EXPECTED.items():
        assert intervals[f"p-{name}"] == pytest.approx(interval_s), name
    assert intervals["p-bogus"] == pytest.approx((WINDOW[0] * WINDOW[1]) ** 0.5)
    assert intervals["p-lastmod"] == pytest.approx(2 * DAY_S, rel=0.01)


def rows(database: str, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(database) as conn:
        return conn.execute(sql, args).fetchall()
