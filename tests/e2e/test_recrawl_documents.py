"""Revisits of downloads that are not HTML (issue 15): a PDF the crawl stored (its
outcome ``not_html``) is revisited by conditional GET like a page, and its 304 is
a visit without change. Before, only HTML pages got revisit state."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import job_data, run_trawler, until
from tests.e2e.test_recrawl import crawl, start_site
from tests.e2e.test_recrawl_distributed import _submit
from tests.servers import PostgresServer

pytestmark = pytest.mark.timeout(90)


def test_a_stored_pdf_is_revisited_by_conditional_get(tmp_path: Path) -> None:
    site = start_site(tmp_path, "--documents")
    try:
        crawl(site, tmp_path / "data")
        crawled = len(site.log())
        out = run_trawler("recrawl", "--data", str(tmp_path / "data"), "--delay", "0.05")
        revisits = site.log()[crawled:]
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert out.returncode == 0, out.stderr
    pdf = [r for r in revisits if r["path"] == "/doc-0.pdf"]
    assert [r["status"] for r in pdf] == [304], revisits  # asked once, with its ETag
    assert pdf[0]["if_none_match"]
    with sqlite3.connect(job_data(tmp_path / "data") / "trawler.db") as conn:
        visits = conn.execute("SELECT verdict FROM visits WHERE url LIKE '%/doc-0.pdf'").fetchall()
        versions = conn.execute(
            "SELECT version, content_type FROM page_versions WHERE url LIKE '%/doc-0.pdf'"
        ).fetchall()
    assert visits == [("not_modified",)]
    assert versions == [(1, "application/pdf")]


def test_a_stored_pdf_is_revisited_by_the_workers_of_a_continuous_job(
    tmp_path: Path, redis_url: str, postgres_server: PostgresServer
) -> None:
    """The same on the distributed backend: the workers of a continuous job revisit the
    PDF with its ETag (a 304, a `not_modified` visit in PostgreSQL, version 1 kept).
    They revisited HTML pages only."""
    site = start_site(tmp_path, "--documents")
    cluster = _submit(tmp_path, site, redis_url, postgres_server, 0.05,
                      "--revisit-min", "0.5", "--revisit-max", "1")  # fmt: skip

    def pdf_asked() -> list[dict]:
        return [r for r in site.log() if r["path"] == "/doc-0.pdf"]

    try:
        for i in range(2):
            cluster.start_worker(f"w{i}")
        until(lambda: len(pdf_asked()) >= 3, 60)
        time.sleep(0.5)  # the visits committed
        err = cluster.stop()
        pdf = pdf_asked()
    finally:
        cluster.stop()
        site.process.terminate()
        site.process.wait(10)
    assert {w.returncode for w in cluster.workers} == {143}, err
    assert len(pdf) >= 3 and {r["status"] for r in pdf[1:]} == {304}, pdf
    assert all(r["if_none_match"] for r in pdf[1:])
    visits = cluster.rows("SELECT verdict FROM visits WHERE job_id = %(job)s"
                          " AND url LIKE '%%/doc-0.pdf'")  # fmt: skip
    versions = cluster.rows("SELECT version, content_type FROM page_versions"
                            " WHERE job_id = %(job)s AND url LIKE '%%/doc-0.pdf'")  # fmt: skip
    assert visits and {v for (v,) in visits} == {"not_modified"}, visits
    assert versions == [(1, "application/pdf")]
