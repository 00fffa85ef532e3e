"""End-to-end: `trawler crawl` against the generated web, checked from the server's side."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import Served, export_rows, job_data, run_trawler, start_testsite

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


def test_every_reachable_page_fetched_exactly_once(testsite: Served, tmp_path: Path) -> None:
    crawl(testsite, tmp_path / "data", "--scope", "any", "--delay", "0.05")
    expected = testsite.site.reachable(testsite.seeds, None, "any")
    fetched = Counter(url_of(e) for e in page_requests(testsite))
    assert set(fetched) == set(expected)
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]
    assert not set(fetched) & testsite.site.forbidden()
    rows = export_rows(tmp_path / "data")
    assert sorted(r["url"] for r in rows) == sorted(expected)


def test_robots_txt_first_and_once_per_host(testsite: Served, tmp_path: Path) -> None:
    crawl(testsite, tmp_path / "data", "--scope", "any", "--delay", "0.05")
    first_by_host: dict[str, str] = {}
    robots = Counter()
    for entry in testsite.log():
        first_by_host.setdefault(entry["host"], entry["path"])
        robots[entry["host"]] += entry["path"] == "/robots.txt"
    assert set(first_by_host.values()) == {"/robots.txt"}
    assert set(robots.values()) == {1}


def test_max_depth_limits_the_crawl(testsite: Served, tmp_path: Path) -> None:
    crawl(testsite, tmp_path / "data", "--max-depth", "1", "--delay", "0.05",
          seeds=testsite.seeds[:1])  # fmt: skip
    expected = testsite.site.reachable(testsite.seeds[:1], 1, "host")
    fetched = {url_of(e) for e in page_requests(testsite)}
    assert fetched == set(expected)
    assert {r["depth"] for r in export_rows(tmp_path / "data")} == {0, 1}


def test_max_pages_stops_the_crawl(testsite: Served, tmp_path: Path) -> None:
    crawl(testsite, tmp_path / "data", "--max-pages", "7", "--scope", "any", "--delay", "0.05")
    assert len(export_rows(tmp_path / "data")) == 7
    assert len(page_requests(testsite)) == 7


def test_per_host_interval_holds_in_server_log(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=6)
    try:
        crawl(served, tmp_path / "data", "--scope", "any", "--delay", "0.4")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    assert len(gaps) == 2
    assert min(gaps.values()) >= 0.4 - CLOCK_SLACK_S, gaps


def test_interval_check_fails_when_delay_is_off(tmp_path: Path) -> None:
    """The same check, with the delay off, must see requests closer than 0.4 s."""
    served = start_testsite(tmp_path, hosts=2, pages=6)
    try:
        crawl(served, tmp_path / "data", "--scope", "any", "--delay", "0")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    assert min(gaps.values()) < 0.4 - CLOCK_SLACK_S


def test_crawl_delay_from_robots_txt_is_honoured(tmp_path: Path) -> None:
    served = start_testsite(
        tmp_path, "--crawl-delay-hosts", "1", "--crawl-delay", "0.5", hosts=2, pages=5
    )
    try:
        crawl(served, tmp_path / "data", "--scope", "any", "--delay", "0.05")
        gaps = min_interval_by_host(served.log())
    finally:
        served.process.terminate()
    slow_host = served.site.netloc(0)
    assert gaps[slow_host] >= 0.5 - CLOCK_SLACK_S
    assert gaps[served.site.netloc(1)] < 0.5


def test_warc_files_read_back_with_warcio(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--scope", "any", "--delay", "0.05", "--warc-max-bytes", "20000")
    files = sorted((job_data(data) / "warc").glob("*.warc.gz"))
    assert len(files) > 1, "rotation at 20 kB should give several files"
    assert not list((job_data(data) / "warc").glob("*.open"))
    responses = {}
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses[uri] = record.content_stream().read()
    out = run_trawler("export", "--data", str(data), "--include-noindex", "--kind", "all")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert set(responses) == {r["final_url"] for r in rows if r["status"]}
    assert {r["final_url"] for r in rows if r["kind"] == "robots"} == {
        f"http://{testsite.site.netloc(i)}/robots.txt" for i in range(3)
    }  # robots.txt answers are archived too
    for row in rows:
        assert row["warc_file"] in {p.name for p in files}


def test_export_csv_and_jsonl_fields(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--delay", "0.05", "--max-depth", "1", seeds=testsite.seeds[:1])
    rows = export_rows(data)
    required = {"url", "final_url", "status", "content_type", "depth", "title", "description",
                "keywords", "links_count", "content_sha256", "fetched_at", "error"}  # fmt: skip
    assert required <= set(rows[0])
    home = next(r for r in rows if r["depth"] == 0)
    assert home["status"] == 200 and home["title"] and home["links_count"] > 5
    out = run_trawler("export", "--data", str(data), "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(table) == len([r for r in rows if not r["noindex"]])
    assert required <= set(table[0])


def test_binary_files_recorded_not_parsed(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--delay", "0.05", "--scope", "any")
    files = [r for r in export_rows(data) if "/files/" in r["url"]]
    assert files
    for row in files:
        assert row["status"] == 200 and row["error"] == "not_html"
        assert row["links_count"] == 0 and row["content_sha256"]


def test_private_addresses_refused_by_default(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = run_trawler("crawl", testsite.seeds[0], "--data", str(data), "-q")
    assert out.returncode == 0, out.stderr
    rows = export_rows(data)
    assert [r["error"] for r in rows] == ["private_address"]
    assert testsite.log() == []  # the server saw nothing


def test_stats_counts_pages_and_errors(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--delay", "0.05", "--scope", "any")
    out = run_trawler("stats", "--data", str(data), "--json")
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["pages_stored"] == len(export_rows(data))
    assert stats["not_html"] > 0 and "not_html" not in stats["errors"]
    assert stats["counters"]["robots.fetched"] == 3
    assert stats["job"]["state"] == "finished"


def test_finished_job_says_so(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    crawl(testsite, data, "--delay", "0.05", "--max-depth", "0")
    out = run_trawler("crawl", "--data", str(data))
    assert out.returncode == 0
    assert "already finished" in out.stdout


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
