"""Reuse reservations per host and in the API (issue 18): `trawler export --hosts`,
the reservation fields of `GET /hosts` and the page's TDM fields in the URL view,
from a crawl of the scripted site of test_reservations.py; embedded and distributed."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.e2e.api_server import start_serve
from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from tests.e2e.scripted import Scripted
from tests.e2e.serve_dist import start_dist_serve
from tests.e2e.test_reservations import crawl, forget_shared_answers, site  # noqa: F401

__all__ = ["site"]


def host_rows(crawled: Crawled, *args: str) -> dict[str, dict]:
    text = crawled.export_text("--hosts", *args)
    return {row["host"]: row for row in map(json.loads, text.splitlines())}


def test_each_host_has_a_row_of_its_reservations(
    crawl_backend: CrawlBackend, site: Scripted, tmp_path: Path
) -> None:
    forget_shared_answers(crawl_backend, site)
    crawled = crawl(crawl_backend, site, "--tdmrep")
    first, second = (base.removeprefix("http://") for base in site.bases)
    rows = host_rows(crawled)
    assert set(rows) == {first, second}
    assert rows[first]["pages"] == 7 and rows[second]["pages"] == 2
    assert rows[first]["robots_status"] == 200 and rows[second]["robots_status"] == 404
    assert (rows[first]["ai_robots_groups"], rows[first]["ai_robots_disallowed"]) == (
        "GPTBot,CCBot", "GPTBot"
    )  # fmt: skip
    assert rows[second]["ai_robots_groups"] is None  # no robots.txt: nothing known
    # "/" has no rule in the file: no reservation of the host's root either way.
    assert rows[first]["tdm_reservation"] is None and rows[first]["tdm_policy"] is None
    if crawl_backend.name == "embedded":  # the file is kept in the data directory
        assert (rows[first]["tdmrep_json"], rows[first]["tdmrep_rules"]) == ("found", 2)
        assert (rows[second]["tdmrep_json"], rows[second]["tdmrep_rules"]) == ("malformed", None)
    else:  # PostgreSQL: the pages that cite it
        assert rows[first]["tdmrep_json"] == "found" and rows[second]["tdmrep_json"] == "unknown"
    table = list(csv.DictReader(io.StringIO(crawled.export_text("--hosts", "--format", "csv"))))
    assert {r["host"]: r["pages"] for r in table} == {first: "7", second: "2"}
    parquet = tmp_path / "hosts.parquet"
    crawled.export_text("--hosts", "--format", "parquet", "-o", str(parquet))
    assert sorted(pq.read_table(parquet).to_pylist(), key=lambda r: r["host"]) == sorted(
        rows.values(), key=lambda r: r["host"]
    )
    api_hosts, api_urls = served_views(crawled, tmp_path, [site.bases[0] + "/header"])
    for host in (first, second):
        for name in ("ai_robots_groups", "tdmrep_json", "tdmrep_rules", "tdm_reservation"):
            assert api_hosts[host][name] == rows[host][name], (host, name)
    header = api_urls[0]
    assert (header["tdm_reservation"], header["tdm_source"]) == (True, "header")
    assert header["ai_robots_disallowed"] == "GPTBot"


def test_without_the_option_the_file_is_not_fetched(tmp_path: Path, site: Scripted) -> None:
    from tests.e2e.backends import EmbeddedCrawls

    crawled = crawl(EmbeddedCrawls(tmp_path), site)
    rows = host_rows(crawled)
    assert {row["tdmrep_json"] for row in rows.values()} == {"not_fetched"}
    assert rows[site.bases[0].removeprefix("http://")]["ai_robots_disallowed"] == "GPTBot"


def served_views(
    crawled: Crawled, tmp: Path, urls: list[str]
) -> tuple[dict[str, dict], list[dict]]:
    """`GET /hosts` by host and `GET /urls` of each of ``urls``, from a `trawler serve`
    process over the crawl's store."""
    if crawled.source[0] == "--data":
        served, job = start_serve(Path(crawled.source[1]), tmp / "serve.log"), {}
    else:
        postgres, job_id, redis = (crawled.stats_source[i] for i in (1, 3, 5))
        served, job = start_dist_serve(tmp, redis, postgres), {"job": job_id}
    try:
        with served.client() as client:
            hosts = client.get("/api/v1/hosts", params=job)
            pages = [client.get("/api/v1/urls", params={"url": url, **job}) for url in urls]
    finally:
        served.stop()
    assert hosts.status_code == 200, hosts.text
    assert all(page.status_code == 200 for page in pages), pages[0].text
    return {row["host"]: row for row in hosts.json()["hosts"]}, [page.json() for page in pages]


def test_hosts_with_graph_or_attempts_is_a_usage_error(tmp_path: Path) -> None:
    both = run_trawler("export", "--data", str(tmp_path), "--hosts", "--graph")
    assert "--hosts" in assert_one_line_error(both, 2)
    mixed = run_trawler("export", "--data", str(tmp_path), "--hosts", "--attempts")
    assert "--hosts exports a row per host" in assert_one_line_error(mixed, 2)
