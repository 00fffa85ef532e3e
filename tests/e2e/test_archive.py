"""Archive completeness: every robots.txt fetch that got an HTTP answer is in the WARC
(request + response, digests checked with warcio), in both modes; export rows say
their ``kind``; non-HTML downloads are counted apart from errors."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.backends import CrawlBackend
from tests.e2e.conftest import job_data, run_trawler
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.e2e.test_rules import links
from tests.e2e.test_sitemaps import XML, urlset

TEXT = {"Content-Type": "text/plain"}
ROBOTS = "User-agent: *\nDisallow: /private/\n"


def site_script() -> dict:
    """Four hosts, each answering robots.txt differently; every home links to a PDF
    and an image (successful non-HTML downloads) and to one more page, which the
    host's /sitemap.xml lists too."""
    home = page(links("/doc.pdf", "/img.png", "/a"))

    def common(host: int) -> dict:
        loc = f"http://127.0.9.{host + 1}:{{port}}/a"
        return {
            "/": home,
            "/a": page(links()),
            "/doc.pdf": page("%PDF-1.4 not really", **{"Content-Type": "application/pdf"}),
            "/img.png": page("PNG bytes", **{"Content-Type": "image/png"}),
            "/sitemap.xml": page(urlset(f"<url><loc>{loc}</loc></url>"), **XML),
        }

    return {
        "0": {**common(0), "/robots.txt": page(ROBOTS, **TEXT)},
        "1": common(1),  # robots.txt: 404 (the scripted server's default)
        "2": {**common(2), "/robots.txt": [page("down", status=503, **TEXT), page(ROBOTS, **TEXT)]},
        "3": {
            **common(3),
            "/robots.txt": page("", status=301, Location="/robots-moved.txt"),
            "/robots-moved.txt": page(ROBOTS, **TEXT),
        },
    }


# What the WARC must hold for robots.txt: (host index, final path) -> statuses, in order.
EXPECTED_ROBOTS = {
    (0, "/robots.txt"): [200],
    (1, "/robots.txt"): [404],
    (2, "/robots.txt"): [503, 200],
    (3, "/robots-moved.txt"): [200],
}


def read_warc(warc_dir: Path) -> tuple[dict[str, list], dict[str, str], list[str]]:
    """(responses by target URI: [(status, record id)], request targets by the response id
    they accompany, digest problems), every record read whole with digests checked."""
    responses: dict[str, list] = defaultdict(list)
    requests: dict[str, str] = {}
    problems: list[str] = []
    files = sorted(warc_dir.glob("*.warc.gz"))
    assert files and not list(warc_dir.glob("*.open"))
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                record.content_stream().read()
                checker = record.digest_checker
                if record.rec_type in ("response", "request") and checker.passed is not True:
                    problems.append(f"{path.name}: {record.rec_type} {checker.problems}")
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    status = int(record.http_headers.get_statuscode())
                    record_id = record.rec_headers.get_header("WARC-Record-ID")
                    responses[uri].append((status, record_id))
                elif record.rec_type == "request":
                    requests[record.rec_headers.get_header("WARC-Concurrent-To")] = uri
    return responses, requests, problems


def assert_robots_archived(server: Scripted, warc_dir: Path, ordered: bool = True) -> None:
    """``ordered``: one writer, so the records are in fetch order; with several
    workers a 503 and its retry may sit in two workers' files, read in any order."""
    responses, requests, problems = read_warc(warc_dir)
    assert problems == []
    for (host, path), statuses in EXPECTED_ROBOTS.items():
        uri = server.bases[host] + path
        found = [status for status, _ in responses.get(uri, [])]
        expected = statuses
        if not ordered:
            found, expected = sorted(found), sorted(statuses)
        assert found == expected, uri
        for _, record_id in responses[uri]:
            assert requests.get(record_id) == uri, f"no request record for {uri}"
    # Once per fetch: as many robots.txt responses as the server answered robots.txt fetches.
    fetches = sum(e["path"] == "/robots.txt" for e in server.log())
    robots_uris = [u for u in responses if u.endswith(("/robots.txt", "/robots-moved.txt"))]
    assert sum(len(responses[u]) for u in robots_uris) == fetches == 5


def assert_robots_rows(server: Scripted, rows: list[dict], warc_dir: Path) -> None:
    """One `robots` export row per fetch, pointing at its response record."""
    robots = [r for r in rows if r["kind"] == "robots"]
    by_url = defaultdict(list)
    for row in robots:
        by_url[row["final_url"]].append(row["status"])
    expected = {server.bases[h] + p: statuses for (h, p), statuses in EXPECTED_ROBOTS.items()}
    assert {url: sorted(s) for url, s in by_url.items()} == {
        url: sorted(s) for url, s in expected.items()
    }
    for row in robots:
        assert row["url"].endswith("/robots.txt")
        with (warc_dir / row["warc_file"]).open("rb") as stream:
            stream.seek(row["warc_offset"])
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Target-URI") == row["final_url"]
    kinds = Counter(r["kind"] for r in rows)
    assert kinds == {"page": 4 * 4, "sitemap": 4, "robots": 5}, kinds  # /, /a, pdf, png


def assert_not_html_apart(stats: dict) -> None:
    """PDFs and images are downloads, not errors."""
    assert stats["not_html"] == 8
    assert stats["errors"] == {}, stats["errors"]


@pytest.fixture
def scripted(tmp_path: Path):
    server = start_scripted(tmp_path, site_script())
    yield server
    server.stop()


def crawl_args(server: Scripted) -> tuple[list[str], str, str, str, str]:
    """Seeds and options (--allow-private is the backend's)."""
    return [base + "/" for base in server.bases], "--delay", "0", "--robots-retry-wait", "0.2"


def export_all(*source: str) -> list[dict]:
    out = run_trawler("export", *source, "--kind", "page,sitemap,robots", "--include-noindex")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_archives_every_robots_fetch(crawl_backend: CrawlBackend, scripted: Scripted) -> None:
    crawled = crawl_backend.crawl(*crawl_args(scripted))
    assert crawled.returncode == 0, crawled.stderr
    if crawl_backend.name == "embedded":  # the summary of `trawler crawl`
        assert "8 not HTML, 0 errors in this run" in crawled.stderr, crawled.stderr
        for line in (line for line in crawled.stderr.splitlines() if " pages/s " in line):
            assert "not HTML | 0 errors |" in line, line  # the progress line, when one was due
    # Two workers: robots.txt one of them fetched is used by the other through Redis,
    # and archived once, by the worker that fetched it; a 503 and its retry may sit
    # in two workers' files, read in any order.
    assert_robots_archived(scripted, crawled.warc_dir, ordered=crawl_backend.name == "embedded")
    assert_robots_rows(scripted, crawled.export("--kind", "page,sitemap,robots"), crawled.warc_dir)
    stats = crawled.stats()
    assert_not_html_apart(stats)
    assert stats["kinds"] == {"page": 16, "sitemap": 4, "robots": 5}


# Embedded only: a job resumed from its data directory (`trawler crawl --data`).
def test_embedded_robots_written_once_across_a_restart(scripted: Scripted, tmp_path: Path) -> None:
    """robots.txt kept across the restart is used, not fetched again: no second record.
    (The 503 of host 2 is kept too, and its retry is a fetch of its own, archived.)"""
    data = tmp_path / "data"
    seeds, *options = crawl_args(scripted)
    first = run_trawler("crawl", *seeds, *options, "--allow-private", "--data", str(data), "-q",
                        "--max-pages", "6")  # fmt: skip
    assert first.returncode == 0, first.stderr
    before = sum(e["path"] == "/robots.txt" for e in scripted.log())
    # Its page budget spent, the job is finished; as if it had been stopped right there
    # (the same data: everything committed, closed cleanly), it is resumed with the
    # URLs it left queued and a larger budget.
    with sqlite3.connect(data / "jobs.db") as registry:
        registry.execute("UPDATE jobs SET state = 'paused'")
    second = run_trawler("crawl", "--data", str(data), "-q", "--max-pages", "100")
    assert second.returncode == 0, second.stderr
    # Every host's robots.txt was fetched before the restart (host 2's retry may fall
    # on either side of it); the second run used the kept ones.
    assert before >= 4 and len([e for e in scripted.log() if e["path"] == "/"]) == 4
    assert_robots_archived(scripted, job_data(data) / "warc")
    assert_robots_rows(scripted, export_all("--data", str(data)), job_data(data) / "warc")
