"""Revisit verdicts (recrawl_visit.py) and WARC revisit records (store/warc_revisit.py),
read back with warcio and indexed with cdxj-indexer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawler.records import FetchResult
from trawler.recrawl_visit import CHANGED, FAILED, NOT_MODIFIED, UNCHANGED, judge
from trawler.store.versions import RevisitState
from trawler.store.warc_revisit import (
    PROFILE_IDENTICAL,
    PROFILE_NOT_MODIFIED,
    RefersTo,
    RevisitWarcWriter,
)

URL = "http://127.0.0.1:8000/a"
OLD = b"<!doctype html><title>a</title><main><p>" + b"one two three four five " * 20 + b"</p>"


def _state(body: bytes = OLD, simhash: str | None = None) -> RevisitState:
    sha = hashlib.sha256(body).hexdigest()
    return RevisitState(URL, "127.0.0.1:8000", URL, '"e1"', None, sha, simhash, 1,
                        1_700_000_000.0, 1_700_000_000.0, 0.0, 0.0)  # fmt: skip


def _result(status: int | None, body: bytes = b"", error: str | None = None) -> FetchResult:
    headers = [("ETag", '"e2"'), ("Content-Type", "text/html")]
    return FetchResult(URL, URL, status, headers, "text/html", None, body, body,
                       error=error, started_at=1_700_000_100.0)  # fmt: skip


def test_verdicts() -> None:
    assert judge(_state(), _result(304)).verdict == NOT_MODIFIED
    same = judge(_state(), _result(200, OLD))
    assert same.verdict == UNCHANGED and same.etag == '"e2"'
    assert judge(_state(), _result(None, error="timeout")).verdict == FAILED
    assert judge(_state(), _result(500, b"oops")).verdict == FAILED


def test_changed_page_has_near_duplicate_distance() -> None:
    first = judge(_state(b""), _result(200, OLD))  # its fingerprint, as a change from nothing
    assert first.verdict == CHANGED and first.simhash is not None
    edited = OLD.replace(b"five", b"six", 1)
    changed = judge(_state(OLD, first.simhash), _result(200, edited))
    assert changed.verdict == CHANGED
    assert changed.distance is not None and 0 < changed.distance < 16  # a small edit
    rewritten = b"<!doctype html><main><p>" + b"entirely other words here " * 20 + b"</p>"
    far = judge(_state(OLD, first.simhash), _result(200, rewritten))
    assert far.distance is not None and far.distance > changed.distance


def test_revisit_records_read_by_warcio_and_cdxj_indexer(tmp_path: Path) -> None:
    refers = RefersTo(URL, 1_700_000_000.0)
    with RevisitWarcWriter(tmp_path, prefix="t") as warc:
        warc.write_revisit(_result(304), PROFILE_NOT_MODIFIED, refers)
        warc.write_revisit(_result(200, OLD), PROFILE_IDENTICAL, refers)
    [path] = tmp_path.glob("t-*.warc.gz")
    revisits = []
    with path.open("rb") as f:
        for record in ArchiveIterator(f, check_digests="raise"):
            if record.rec_type == "revisit":
                revisits.append(record.rec_headers)
    assert [h.get_header("WARC-Profile") for h in revisits] == [
        PROFILE_NOT_MODIFIED,
        PROFILE_IDENTICAL,
    ]
    assert all(h.get_header("WARC-Refers-To-Target-URI") == URL for h in revisits)
    dates = {h.get_header("WARC-Refers-To-Date") for h in revisits}
    assert dates == {"2023-11-14T22:13:20.000000Z"}  # the archived version's fetch
    digest = revisits[1].get_header("WARC-Payload-Digest")
    assert digest is not None and digest.startswith("sha1:")
    cdxj = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", str(path)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert cdxj.returncode == 0, cdxj.stderr
    assert cdxj.stdout.count('"mime": "warc/revisit"') == 2


def test_sitemap_lastmod_seeds_the_first_estimate(tmp_path: Path) -> None:
    """A stored page whose sitemap <lastmod> is a day before its fetch starts with the
    rate of one change a day; one without starts at the window's middle."""
    from trawler.recrawl import RevisitWindow
    from trawler.recrawl_store import RecrawlStore
    from trawler.store import sqlite as db

    conn = db.connect(tmp_path)
    fetched = 1_700_000_000.0
    for path, lastmod in (("/dated", "2023-11-13T22:13:20Z"), ("/undated", None)):
        conn.execute(
            "INSERT INTO pages (url, final_url, status, host, fetched_at, content_sha256,"
            " sitemap_lastmod, kind) VALUES (?, ?, 200, 'h', ?, 'x', ?, 'page')",
            (f"http://h{path}", f"http://h{path}", fetched, lastmod),
        )
    conn.commit()
    window = RevisitWindow(3600.0, 30 * 86400.0)
    store = RecrawlStore(conn, tmp_path, window, 1 << 20)
    try:
        assert store.seed() == 2
        assert store.seed() == 0  # once
        rows = dict(
            store.conn.execute("SELECT url, next_visit_at - last_visit_at FROM revisit_state")
        )
        versions = store.conn.execute("SELECT count(*) FROM page_versions").fetchone()[0]
    finally:
        store.close()
        conn.close()
    assert rows["http://h/dated"] == pytest.approx(86400.0)
    assert rows["http://h/undated"] == pytest.approx((3600.0 * 30 * 86400.0) ** 0.5)
    assert versions == 2


def test_store_prices_the_schedule_over_every_pages_rate(tmp_path: Path) -> None:
    """The optimal interval of a page depends on all pages' rates (through the price
    μ): the store solves for it again from the table when rates have moved."""
    from trawler.recrawl import RevisitWindow
    from trawler.recrawl_store import RecrawlStore
    from trawler.revisit_policy import plan_schedule
    from trawler.store import sqlite as db

    conn = db.connect(tmp_path)
    for i in range(4):
        conn.execute(
            "INSERT INTO pages (url, final_url, status, host, fetched_at, content_sha256, kind)"
            " VALUES (?, ?, 200, 'h', 1.0, 'x', 'page')", (f"http://h/{i}", f"http://h/{i}"),
        )  # fmt: skip
    conn.commit()
    window = RevisitWindow(1.0, 1000.0)
    store = RecrawlStore(conn, tmp_path, window, 1 << 20)
    try:
        store.seed()
        assert store.schedule.price is not None  # priced over the first estimates
        rates = [0.0, 0.01, 0.1, 2.0]
        for i, rate in enumerate(rates):
            store.conn.execute(
                "UPDATE revisit_state SET rate_per_s = ? WHERE url = ?", (rate, f"http://h/{i}")
            )
        store.reprice()  # no rate moved through the store since: the price stands
        stale = store.schedule
        store._rates_moved, store._reprice_after = True, 0.0  # as a recorded visit does
        store.reprice()
        fresh = store.schedule
    finally:
        store.close()
        conn.close()
    assert fresh == plan_schedule(rates, window.bounds) != stale
    # The same fetches as proportional, moved from the page changing twice a second
    # (proportional: the min) to the slower ones.
    assert fresh.interval_s(2.0) > window.interval_s(2.0) == 1.0
    assert fresh.interval_s(0.1) < window.interval_s(0.1)
    assert fresh.interval_s(0.01) < window.interval_s(0.01)
