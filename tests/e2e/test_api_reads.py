"""The API's read endpoints against a real `trawler serve` process: the same rows,
hits and numbers as the CLI's export, search and stats; /metrics parsed by
prometheus-client's own parser."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.api_server import ServeProcess, crawl_scripted_site, start_serve
from tests.e2e.conftest import run_trawler


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return crawl_scripted_site(tmp_path_factory.mktemp("api-reads"))


@pytest.fixture(scope="module")
def server(
    crawled: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    log = tmp_path_factory.mktemp("api-serve") / "serve.log"
    served = start_serve(crawled[0], log)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def job_id(server: ServeProcess) -> str:
    with server.client() as client:
        jobs = client.get("/api/v1/jobs").json()
    assert jobs["total"] == 1, jobs
    return str(jobs["jobs"][0]["id"])


def client_get(server: ServeProcess, path: str, params: dict) -> dict:
    with server.client() as client:
        answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def exported_rows(server: ServeProcess, job_id: str) -> list[dict]:
    with server.client() as client:
        answer = client.get(f"/api/v1/jobs/{job_id}/export", params={"include_noindex": True})
    return [json.loads(line) for line in answer.text.splitlines()]


def cli_export(data: Path, *args: str) -> str:
    out = run_trawler("export", "--data", str(data), *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_export_streams_the_rows_of_trawler_export(
    server: ServeProcess, crawled: tuple[Path, str], job_id: str
) -> None:
    data = crawled[0]
    with server.client() as client:
        for fmt, media in (("jsonl", "application/x-ndjson"), ("csv", "text/csv")):
            answer = client.get(f"/api/v1/jobs/{job_id}/export", params={"format": fmt})
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith(media)
            assert answer.text == cli_export(data, "--format", fmt)
        every = client.get(
            f"/api/v1/jobs/{job_id}/export",
            params={"kind": ["page", "sitemap", "robots"], "include_noindex": True},
        )
    assert every.text == cli_export(data, "--kind", "all", "--include-noindex")
    kinds = {json.loads(line)["kind"] for line in every.text.splitlines()}
    assert kinds == {"page", "robots"}  # the check can tell the kinds apart
    rows = list(csv.DictReader(io.StringIO(cli_export(data, "--format", "csv"))))
    assert len(rows) >= 5


def test_pages_are_filtered_and_paginated(server: ServeProcess, job_id: str) -> None:
    with server.client() as client:
        everything = client.get(f"/api/v1/jobs/{job_id}/export").text.splitlines()
        urls = [json.loads(line)["url"] for line in everything]
        seen: list[str] = []
        for offset in range(0, len(urls) + 2, 2):  # bounded: a page of 2 at a time
            part = client.get(f"/api/v1/jobs/{job_id}/pages",
                              params={"offset": offset, "limit": 2}).json()  # fmt: skip
            assert part["total"] == len(urls)
            seen += [row["url"] for row in part["pages"]]
        assert seen == urls  # commit order, nothing lost or repeated
        ok = client.get(f"/api/v1/jobs/{job_id}/pages", params={"status": 200}).json()
        assert ok["total"] == len([u for u in ok["pages"] if u["status"] == 200]) >= 3
        assert ok["total"] < len(urls)
        failed = client.get(f"/api/v1/jobs/{job_id}/pages", params={"failed": True}).json()
        assert failed["total"] >= 1 and all(row["error"] for row in failed["pages"])


def test_errors_are_the_failed_rows_newest_first(server: ServeProcess, job_id: str) -> None:
    with server.client() as client:
        rows = [json.loads(line) for line in
                client.get(f"/api/v1/jobs/{job_id}/export").text.splitlines()]  # fmt: skip
        answer = client.get(f"/api/v1/jobs/{job_id}/errors", params={"limit": 1}).json()
        every = client.get(f"/api/v1/jobs/{job_id}/errors").json()
    failed = [row for row in rows if row["error"] and row["error"] != "not_html"]
    assert failed, "the site must give the crawl an error to report"
    assert [e["url"] for e in every["errors"]] == [r["url"] for r in reversed(failed)]
    assert len(answer["errors"]) == 1 and answer["total"] == len(failed)
    assert sum(every["by_code"].values()) == len(failed)


def test_search_is_the_engine_of_trawler_search(
    server: ServeProcess, crawled: tuple[Path, str], job_id: str
) -> None:
    out = run_trawler("search", "pilot", "--data", str(crawled[0]), "--json")
    assert out.returncode == 0, out.stderr
    expected = [json.loads(line) for line in out.stdout.splitlines()]
    with server.client() as client:
        answer = client.get("/api/v1/search", params={"q": "pilot"}).json()
        one = client.get("/api/v1/search", params={"q": "pilot", "job": job_id, "limit": 1})
        none = client.get("/api/v1/search", params={"q": "pilot", "since": "2100-01-01"}).json()
    assert len(expected) == 2
    assert [(r["url"], r["snippet"]) for r in answer["results"]] == [
        (hit["url"], hit["snippet"]) for hit in expected
    ]
    assert answer["total"] == 2 and one.json()["total"] == 2
    assert len(one.json()["results"]) == 1
    assert none == {"results": [], "total": 0}


def test_url_report_tells_state_history_and_the_robots_rule(
    server: ServeProcess, crawled: tuple[Path, str], job_id: str
) -> None:
    base = crawled[1]
    with server.client() as client:
        home = client.get("/api/v1/urls", params={"url": base + "/#top"}).json()
        private = client.get("/api/v1/urls", params={"url": base + "/private/x"}).json()
        unseen = client.get("/api/v1/urls", params={"url": base + "/never"})
    assert home["url"] == base + "/" and home["state"] == "done" and home["job"] == job_id
    assert [f["status"] for f in home["fetches"]] == [200]
    # Five links on the page; the one robots.txt disallows was turned away when found.
    assert home["outbound_links"] == 5 and home["urls_discovered"] == 4
    assert home["robots"]["allowed"] is True and home["robots"]["rule"] is None
    assert private["state"] == "unseen" and private["fetches"] == []
    assert private["robots"]["allowed"] is False
    assert private["robots"]["rule"].endswith("/private") and private["robots"]["line"] == 2
    # Inbound links from the link graph: a URL never fetched has them too.
    assert private["inbound_links"] == 1 and private["linked_from"] == [base + "/"]
    assert home["inbound_links"] == 0 and home["linked_from"] == []
    assert unseen.json()["state"] == "unseen" and unseen.json()["robots"]["allowed"] is True
    missing = client_get(server, "/api/v1/urls", {"url": base + "/missing"})
    assert missing["state"] == "done" and missing["status"] == 404
    assert missing["inbound_links"] == 1 and missing["parent_url"] == base + "/"
    boom = client_get(server, "/api/v1/urls", {"url": base + "/boom"})
    assert boom["state"] == "dead" and [f["status"] for f in boom["fetches"]] == [500]
    with server.client() as client:
        answer = client.get("/api/v1/urls", params={"url": "mailto:someone@example.com"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "url"]


def test_hosts_show_counts_and_politeness(server: ServeProcess, crawled: tuple[Path, str]) -> None:
    host = crawled[1].removeprefix("http://")
    with server.client() as client:
        listed = client.get("/api/v1/hosts").json()
        one = client.get(f"/api/v1/hosts/{host}").json()
        missing = client.get("/api/v1/hosts/nowhere.invalid")
    assert [row["host"] for row in listed["hosts"]] == [host] and listed["total"] == 1
    assert one["fetched"] >= 5 and one["errors"] >= 1 and 0 < one["error_rate"] < 1
    assert one["queued"] == 0 and one["interval_s"] == 0.0  # --delay 0, no Crawl-delay
    assert one["robots"][0]["robots_url"] == crawled[1] + "/robots.txt"
    assert one["robots"][0]["status"] == 200 and one["robots"][0]["crawl_delay"] is None
    assert missing.status_code == 404


def test_admin_stats_and_timeseries_count_the_stored_pages(
    server: ServeProcess, job_id: str
) -> None:
    with server.client() as client:
        stats = client.get("/api/v1/admin/stats").json()
        series = client.get("/api/v1/admin/stats/timeseries").json()
    rows = exported_rows(server, job_id)
    assert stats["storage"]["pages"] == len(rows)
    assert stats["queue"]["pending"] == 0 and stats["jobs"] == {"finished": 1}
    assert stats["workers"] == {"active": 0, "total": 1}  # this server, running no job
    recent = [r for r in rows if r["fetched_at"] >= series["start"]]
    assert time.time() - series["start"] <= 601
    assert sum(series["pages"]) == len(recent) and len(series["pages"]) == 600
    failed = [r for r in recent if r["error"] and r["error"] != "not_html"]
    assert sum(series["errors"]) == len(failed)
    assert sum(sum(v) for v in series["status_classes"].values()) == len(recent)


def test_metrics_parse_and_are_labelled_by_job_only(server: ServeProcess, job_id: str) -> None:
    with server.client(token=None) as client:  # /metrics needs no token
        answer = client.get("/metrics")
    rows = exported_rows(server, job_id)
    assert answer.status_code == 200
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    expected = {"trawler_pages_fetched", "trawler_responses", "trawler_fetch_errors",
                "trawler_robots_denials", "trawler_bytes_downloaded",
                "trawler_fetch_duration_seconds", "trawler_frontier_size",
                "trawler_active_hosts", "trawler_active_workers"}  # fmt: skip
    assert expected <= set(families)
    labels = {name for f in families.values() for s in f.samples for name in s.labels}
    assert labels <= {"job", "status_class", "code", "state", "le"}
    value = {s.name: s.value for s in families["trawler_pages_fetched"].samples}
    assert value["trawler_pages_fetched_total"] == len(rows)
    denied = families["trawler_robots_denials"].samples[0]
    assert denied.labels == {"job": job_id} and denied.value == 1
    count = [s for s in families["trawler_fetch_duration_seconds"].samples
             if s.name.endswith("_count")][0]  # fmt: skip
    assert count.value >= len([r for r in rows if r["status"] is not None])
