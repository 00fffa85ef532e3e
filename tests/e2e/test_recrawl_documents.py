"""Revisits of downloads that are not HTML (issue 15): a PDF the crawl stored (its
outcome ``not_html``) is revisited by conditional GET like a page, and its 304 is
a visit without change. Before, only HTML pages got revisit state."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import job_data, run_trawler
from tests.e2e.test_recrawl import crawl, start_site

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
