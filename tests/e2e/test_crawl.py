"""End-to-end: `trawler crawl` against the generated web, checked from the server's side."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.e2e.backends import CrawlBackend
from tests.e2e.conftest import Served, run_trawler, start_testsite

# Server-side timestamps are taken in the server process when a request
# arrives; allow for that process's own scheduling jitter, nothing more.
CLOCK_SLACK_S = 0.015


def crawl(served: Served, data: Path, *args: str, seeds: list[str] | None = None):
    out = run_trawler(
        "crawl",
        *(seeds or served.seeds),
        "--data",
        str(data),
        "--allow-private",
        "-q",
        "--no-sitemaps",
        *args,
    )
    assert out.returncode == 0, out.stderr
    return out


def page_requests(served: Served) -> list[dict]:
    return [r for r in served.log() if r["path"] != "/robots.txt"]


def url_of(entry: dict) -> str:
    return f"http://{entry['host']}{entry['path']}"


def min_interval_by_host(entries: list[dict]) -> dict[str, float]:
    """Smallest start-to-start gap between two requests to one host, per host."""
    times: dict[str, list[float]] = defaultdict(list)
    for entry in entries:
        times[entry["host"]].append(entry["t"])
    gaps = {}
    for host, ts in times.items():
        ts.sort()
        if len(ts) > 1:
            gaps[host] = min(b - a for a, b in zip(ts, ts[1:], strict=False))
    return gaps


def crawl_site(backend: CrawlBackend, served: Served, *args: str, seeds: list[str] | None = None):
    crawled = backend.crawl(seeds or served.seeds, "--no-sitemaps", *args)
    assert crawled.returncode == 0, crawled.stderr
    return crawled


def test_every_reachable_page_fetched_exactly_once(
    crawl_backend: CrawlBackend, testsite: Served
) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--scope", "any", "--delay", "0.05")
    expected = testsite.site.reachable(testsite.seeds, None, "any")
    fetched = Counter(url_of(e) for e in page_requests(testsite))
    assert set(fetched) == set(expected)
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]
    assert not set(fetched) & testsite.site.forbidden()
    assert sorted(r["url"] for r in crawled.export()) == sorted(expected)


def test_robots_txt_first_and_once_per_host(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawl_site(crawl_backend, testsite, "--scope", "any", "--delay", "0.05")
    first_by_host: dict[str, str] = {}
    robots = Counter()
    for entry in testsite.log():
        first_by_host.setdefault(entry["host"], entry["path"])
        robots[entry["host"]] += entry["path"] == "/robots.txt"
    assert set(first_by_host.values()) == {"/robots.txt"}
    assert set(robots.values()) == {1}


def test_max_depth_limits_the_crawl(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--max-depth", "1", "--delay", "0.05",
                         seeds=testsite.seeds[:1])  # fmt: skip
    expected = testsite.site.reachable(testsite.seeds[:1], 1, "host")
    fetched = {url_of(e) for e in page_requests(testsite)}
    assert fetched == set(expected)
    assert {r["depth"] for r in crawled.export()} == {0, 1}


def test_max_pages_stops_the_crawl(crawl_backend: CrawlBackend, testsite: Served) -> None:
    """Slow enough (3 hosts, 1 s apart) that both workers are crawling before the
    budget is spent: it holds for the job, not for each worker."""
    crawled = crawl_site(crawl_backend, testsite, "--max-pages", "7", "--scope", "any",
                         "--delay", "1")  # fmt: skip
    assert len(crawled.export()) == 7
    assert len(page_requests(testsite)) == 7


def test_per_host_interval_holds_in_server_log(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=6)
    try:
        crawl_site(crawl_backend, served, "--scope", "any", "--delay", "0.4")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    assert len(gaps) == 2
    assert min(gaps.values()) >= 0.4 - CLOCK_SLACK_S, gaps


def test_interval_check_fails_when_delay_is_off(
    crawl_backend: CrawlBackend, tmp_path: Path
) -> None:
    """The same check, with the delay off, must see requests closer than 0.4 s."""
    served = start_testsite(tmp_path, hosts=2, pages=6)
    try:
        crawl_site(crawl_backend, served, "--scope", "any", "--delay", "0")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    assert min(gaps.values()) < 0.4 - CLOCK_SLACK_S


def test_crawl_delay_from_robots_txt_is_honoured(
    crawl_backend: CrawlBackend, tmp_path: Path
) -> None:
    served = start_testsite(
        tmp_path, "--crawl-delay-hosts", "1", "--crawl-delay", "0.5", hosts=2, pages=5
    )
    try:
        crawl_site(crawl_backend, served, "--scope", "any", "--delay", "0.05")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    slow_host = served.site.netloc(0)
    assert gaps[slow_host] >= 0.5 - CLOCK_SLACK_S
    assert gaps[served.site.netloc(1)] < 0.5


def test_warc_files_read_back_with_warcio(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--scope", "any", "--delay", "0.05",
                         "--warc-max-bytes", "20000")  # fmt: skip
    files = sorted(crawled.warc_dir.glob("*.warc.gz"))
    assert len(files) > 1, "rotation at 20 kB should give several files"
    assert not list(crawled.warc_dir.glob("*.open"))
    responses = {}
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses[uri] = record.content_stream().read()
    rows = crawled.export("--kind", "all")
    assert set(responses) == {r["final_url"] for r in rows if r["status"]}
    assert {r["final_url"] for r in rows if r["kind"] == "robots"} == {
        f"http://{testsite.site.netloc(i)}/robots.txt" for i in range(3)
    }  # robots.txt answers are archived too
    for row in rows:
        assert row["warc_file"] in {p.name for p in files}


def test_export_csv_and_jsonl_fields(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--delay", "0.05", "--max-depth", "1",
                         seeds=testsite.seeds[:1])  # fmt: skip
    rows = crawled.export()
    required = {"url", "final_url", "status", "content_type", "depth", "title", "description",
                "keywords", "links_count", "content_sha256", "fetched_at", "error"}  # fmt: skip
    assert required <= set(rows[0])
    home = next(r for r in rows if r["depth"] == 0)
    assert home["status"] == 200 and home["title"] and home["links_count"] > 5
    table = list(csv.DictReader(io.StringIO(crawled.export_text("--format", "csv"))))
    assert len(table) == len([r for r in rows if not r["noindex"]])
    assert required <= set(table[0])


def test_binary_files_recorded_not_parsed(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--delay", "0.05", "--scope", "any")
    files = [r for r in crawled.export() if "/files/" in r["url"]]
    assert files
    for row in files:
        assert row["status"] == 200 and row["error"] == "not_html"
        assert row["links_count"] == 0 and row["content_sha256"]


def test_private_addresses_refused_by_default(
    crawl_backend: CrawlBackend, testsite: Served
) -> None:
    crawled = crawl_backend.crawl(testsite.seeds[:1], allow_private=False)
    assert crawled.returncode == 0, crawled.stderr
    assert [r["error"] for r in crawled.export()] == ["private_address"]
    assert testsite.log() == []  # the server saw nothing


def test_stats_counts_pages_and_errors(crawl_backend: CrawlBackend, testsite: Served) -> None:
    crawled = crawl_site(crawl_backend, testsite, "--delay", "0.05", "--scope", "any")
    stats = crawled.stats()
    assert stats["pages_stored"] == len(crawled.export())
    assert stats["not_html"] > 0 and "not_html" not in stats["errors"]
    assert stats["counters"]["robots.fetched"] == 3
    assert stats["job"]["state"] == "finished"
    assert stats["urls_queued"] == 0


# Embedded only: resuming a finished job by its data directory.
def test_finished_job_says_so(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--delay", "0.05", "--max-depth", "0")
    out = run_trawler("crawl", "--data", str(data))
    assert out.returncode == 0
    assert "already finished" in out.stdout


# Not crawl behaviour: the command line's own checks.
def test_bad_options_one_line_exit_2(tmp_path: Path) -> None:
    bad = [
        ["crawl", "--max-depth", "x", "http://a/"],
        ["crawl", "--delay", "-1", "http://a/"],
        ["crawl", "--scope", "planet", "http://a/"],
        ["crawl", "--bogus"],
        ["crawl", "ftp://a/"],
        ["crawl", "--include", "(", "http://a/"],
        ["export", "--format", "xml"],
        ["export", "--data", str(tmp_path / "none")],
    ]
    for args in bad:
        out = (
            run_trawler(*args, "--data", str(tmp_path / "d"))
            if args[0] == "crawl"
            else run_trawler(*args)
        )
        assert out.returncode == 2, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
        assert out.stderr.startswith("trawler: error:")
