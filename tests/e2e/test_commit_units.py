"""A URL's outcome, its attempt rows and its page are committed together.

Seen from the database after a real crawl of a loopback server: every URL
that ended dead-lettered is in the dead state, has its page and its final
attempt row, and the counters agree.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.conftest import run_trawler
from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_rules import ROBOTS, links

HOSTS = 8
BROKEN_PER_HOST = 120
# A body, so each answer goes through the analysis process (an await in the
# crawl loop) while commits keep swapping the batch: the window for the race.
ERROR_PAGE = "<html><head><title>oops</title></head><body>server error</body></html>"


def broken_hosts_script() -> dict:
    """Each host: a 500 then a 200, in turn (ten 500s in a row would pause the host)."""
    broken = [f"/broken{i}" for i in range(BROKEN_PER_HOST)]
    fine = [f"/ok{i}" for i in range(BROKEN_PER_HOST)]
    paths = [path for pair in zip(broken, fine, strict=True) for path in pair]
    script = {}
    for host in range(HOSTS):
        script[str(host)] = {"/robots.txt": ROBOTS, "/": page(links(*paths))}
        script[str(host)].update({path: page(ERROR_PAGE, status=500) for path in broken})
        script[str(host)].update({path: page(links()) for path in fine})
    return script


def test_dead_urls_end_dead_with_their_attempts_and_pages(tmp_path: Path) -> None:
    server = start_scripted(tmp_path, broken_hosts_script())
    data = tmp_path / "data"
    try:
        seeds = [base + "/" for base in server.bases]
        out = run_trawler(
            "crawl", *seeds, "--data", str(data), "--allow-private", "--scope", "any",
            "--delay", "0", "--max-attempts", "1", "--parse-processes", "1", "-q",
            "--no-sitemaps",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    finally:
        server.stop()
    dead_count = HOSTS * BROKEN_PER_HOST
    conn = sqlite3.connect(data / "trawler.db")
    states = dict(conn.execute("SELECT url, state FROM urls"))
    attempts = conn.execute("SELECT url, decision FROM fetch_attempts").fetchall()
    pages = dict(conn.execute("SELECT url, error FROM pages"))
    conn.close()
    dead_attempts = [url for url, decision in attempts if decision == "dead"]
    assert len(dead_attempts) == len(set(dead_attempts)) == dead_count
    wrong = {url: states[url] for url in dead_attempts if states[url] != 3}
    assert not wrong, f"{len(wrong)} dead-lettered URLs not in the dead state"
    # One attempt row per URL fetched (no retries with --max-attempts 1), one page each.
    assert sorted(url for url, _ in attempts) == sorted(pages)
    assert all(pages[url] == "http_500" for url in dead_attempts)
    stats = json.loads(run_trawler("stats", "--data", str(data), "--json").stdout)
    assert stats["dead_letter"] == dead_count
    assert stats["fetch_attempts"] == {"dead": dead_count, "done": dead_count + HOSTS}
