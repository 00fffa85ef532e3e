"""The unit of a commit is one URL's outcome, seen after real crawls of loopback servers.

A URL's state, its attempt rows and its page are committed together: every URL
dead-lettered is in the dead state with its page and attempt row, and the
counters agree. A page that cannot be stored costs that page only: the rest of
its batch is stored and the crawl (or the distributed job) finishes.
"""

from __future__ import annotations

import contextlib
import json
import socketserver
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.e2e.conftest import export_rows, job_data, run_trawler
from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_distributed import TRAWLER, exported, start_worker, wait_all
from tests.e2e.test_rules import ROBOTS, links
from trawler.store.sqlite import DEAD

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
    conn = sqlite3.connect(job_data(data) / "trawler.db")
    states = dict(conn.execute("SELECT url, state FROM urls"))
    attempts = conn.execute("SELECT url, decision FROM fetch_attempts").fetchall()
    pages = dict(conn.execute("SELECT url, error FROM pages"))
    conn.close()
    dead_attempts = [url for url, decision in attempts if decision == "dead"]
    assert len(dead_attempts) == len(set(dead_attempts)) == dead_count
    wrong = {url: states[url] for url in dead_attempts if states[url] != DEAD}
    assert not wrong, f"{len(wrong)} dead-lettered URLs not in the dead state"
    # One attempt row per URL fetched (no retries with --max-attempts 1), one page each.
    assert sorted(url for url, _ in attempts) == sorted(pages)
    assert all(pages[url] == "http_500" for url in dead_attempts)
    stats = json.loads(run_trawler("stats", "--data", str(data), "--json").stdout)
    assert stats["dead_letter"] == dead_count
    assert stats["fetch_attempts"] == {"dead": dead_count, "done": dead_count + HOSTS}


# -- a page that cannot be committed ----------------------------------------------------
PAGES = 12
# Old servers send Latin-1 in Location; the fetcher keeps the byte as a lone surrogate,
# which no WARC header can be encoded with: the page cannot be archived as it came.
POISON = b"HTTP/1.1 301 Moved\r\nLocation: /caf\xe9.html\r\nContent-Length: 0\r\n\r\n"


def _html(body: str) -> bytes:
    data = body.encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(data)}\r\n\r\n"
    return head.encode() + data


class _RawPages(socketserver.StreamRequestHandler):
    """Answers from ``server.pages`` (path -> raw response bytes), one request a connection."""

    def handle(self) -> None:
        path = self.rfile.readline().split(b" ")[1].decode()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        pages: dict[str, bytes] = self.server.pages  # type: ignore[attr-defined]
        self.wfile.write(pages.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))


@contextlib.contextmanager
def poison_site() -> Iterator[str]:
    """A loopback host whose home links to healthy pages and to one that cannot be stored."""
    healthy = [f"/p{i}" for i in range(PAGES)]
    pages = {path: _html(links()) for path in healthy}
    pages["/"] = _html(links(*healthy[:6], "/moved", *healthy[6:]))
    pages["/moved"] = POISON
    pages["/robots.txt"] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _RawPages)
    server.daemon_threads = True
    server.pages = pages  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def submit_seeds(seeds: list[str], redis: str, postgres: str, *args: str) -> str:
    out = subprocess.run(
        [*TRAWLER, "submit", *seeds, "--redis", redis, "--postgres", postgres,
         "--allow-private", "--no-sitemaps", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def assert_only_the_poison_page_failed(rows: list[dict], seed: str) -> None:
    by_path = {row["url"].removeprefix(seed.rstrip("/")): row for row in rows}
    assert sorted(by_path) == sorted(["/", "/moved", *(f"/p{i}" for i in range(PAGES))])
    healthy = [row for path, row in by_path.items() if path != "/moved"]
    assert all(row["error"] is None and row["warc_file"] for row in healthy)
    assert by_path["/moved"]["error"] is not None  # recorded with its error, not lost


def test_a_page_that_cannot_be_stored_costs_only_itself(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with poison_site() as seed:
        # The poison page is fetched among healthy ones: it shares a commit with some.
        out = run_trawler("crawl", seed, "--data", str(data), "--allow-private", "--delay", "0",
                          "-q", "--no-sitemaps", "--parse-processes", "0")  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert_only_the_poison_page_failed(export_rows(data), seed)
        again = run_trawler("crawl", "--data", str(data))  # not a poison pill on resume
        assert again.returncode == 0 and "already finished" in again.stdout, again.stderr


def test_a_page_that_cannot_be_stored_costs_only_itself_distributed(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    with poison_site() as seed:
        job = submit_seeds([seed], redis_url, fresh_postgres_url, "--delay", "0")
        worker = start_worker(tmp_path, redis_url, fresh_postgres_url)
        wait_all([worker], timeout=60)
    assert_only_the_poison_page_failed(exported(fresh_postgres_url, job), seed)
