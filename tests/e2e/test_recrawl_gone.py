"""A page gone on revisit (issue 15): a 404 or 410 is recorded as the page gone (a
version of its own and a `gone` visit), archived as the response it was, and asked
again at --revisit-max; a later 200 is a new version. A 5xx or 429 is a failed visit,
no version. One-pass `trawler recrawl` runs against the changing site on loopback."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import job_data, run_trawler
from tests.e2e.test_recrawl import Site, crawl, start_site

pytestmark = pytest.mark.timeout(120)
REVISIT_MAX_S = 50.0


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = start_site(tmp_path, "--status-file", str(tmp_path / "status.json"))
    yield site
    site.process.terminate()
    site.process.wait(10)


def one_pass(data: Path, status_file: Path, statuses: dict[str, int]) -> None:
    """Every stored page revisited once while the site answers ``statuses``."""
    status_file.write_text(json.dumps(statuses))
    out = run_trawler("recrawl", "--data", str(data), "--delay", "0.05",
                      "--revisit-min", "1", "--revisit-max", str(REVISIT_MAX_S))  # fmt: skip
    assert out.returncode == 0, out.stderr


def versions(data: Path, url: str) -> list[tuple[int, int, bool, bool]]:
    """(version, status, gone, has content) of each version of ``url``."""
    out = run_trawler("versions", url, "--data", str(data))
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    return [(r["version"], r["status"], r["gone"], r["content_sha256"] is not None) for r in rows]


def visits(data: Path) -> dict[str, list[str]]:
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        rows = conn.execute("SELECT url, verdict FROM visits ORDER BY id").fetchall()
    found: dict[str, list[str]] = {}
    for url, verdict in rows:
        found.setdefault(url.rsplit("/", 1)[1], []).append(verdict)
    return found


def test_a_page_gone_then_back(site: Site, tmp_path: Path) -> None:
    data, status_file = tmp_path / "data", tmp_path / "status.json"
    crawl(site, data)
    gone = {"/never-0": 404, "/never-1": 410, "/never-2": 503, "/plain": 429}
    one_pass(data, status_file, gone)
    assert versions(data, f"{site.seed}never-0") == [(1, 200, False, True), (2, 404, True, False)]
    assert versions(data, f"{site.seed}never-1") == [(1, 200, False, True), (2, 410, True, False)]
    assert versions(data, f"{site.seed}never-2") == [(1, 200, False, True)]  # 503: failed
    assert versions(data, f"{site.seed}plain") == [(1, 200, False, True)]  # 429: failed
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        waits = dict(conn.execute("SELECT url, next_visit_at - last_visit_at FROM revisit_state"))
    assert waits[f"{site.seed}never-0"] == pytest.approx(REVISIT_MAX_S)
    assert waits[f"{site.seed}never-2"] < REVISIT_MAX_S  # a failure is no sign of gone
    one_pass(data, status_file, {"/never-1": 410})  # never-0 is back, never-1 still gone
    assert versions(data, f"{site.seed}never-0")[2:] == [(3, 200, False, True)]
    assert len(versions(data, f"{site.seed}never-1")) == 2  # gone once, not twice
    seen = visits(data)
    assert seen["never-0"] == ["gone", "changed"] and seen["never-1"] == ["gone", "gone"]
    assert seen["never-2"][0] == seen["plain"][0] == "failed"
    assert gone_responses(data) == {f"{site.seed}never-0": [404], f"{site.seed}never-1": [410, 410]}
    out = run_trawler("export", "--data", str(data), "--versions", "all")
    exported = [json.loads(line) for line in out.stdout.splitlines()]
    rows = [(r["version"], r["status"]) for r in exported if r["url"] == f"{site.seed}never-0"]
    assert rows == [(1, 200), (2, 404), (3, 200)]


def gone_responses(data: Path) -> dict[str, list[int]]:
    """The 404 and 410 responses archived by the revisits, by URL."""
    found: dict[str, list[int]] = {}
    for path in sorted((job_data(data) / "warc").glob("trawler-revisit-*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                status = record.http_headers and record.http_headers.get_statuscode()
                if record.rec_type == "response" and status in ("404", "410"):
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    found.setdefault(url, []).append(int(status))
    return found
