"""Helpers for the CLI safety tests: error-line checks and a large crawl made directly."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def assert_one_line_error(out: subprocess.CompletedProcess[str], code: int) -> str:
    """The command failed with ``code`` and one `trawler: error:` line, no traceback."""
    assert out.returncode == code, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trawler: error:"), out.stderr
    return lines[0]


def make_large_crawl(data: Path, pages: int) -> None:
    """A data directory with ``pages`` stored pages, written through the real schema."""
    from trawler.store.sqlite import connect
    from trawler.store.sqlite_totals import recount

    conn = connect(data)
    rows = (
        (f"http://127.0.0.1:9/page/{i}", f"http://127.0.0.1:9/page/{i}", 200, "text/html",
         1000 + i, 1, f"Title of page {i}", "a description of the page", 0, "127.0.0.1:9")
        for i in range(pages)
    )  # fmt: skip
    with conn:
        conn.executemany(
            "INSERT INTO pages (url, final_url, status, content_type, content_length, depth,"
            " title, description, noindex, host) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        recount(conn)  # rows written past insert_pages, which counts its own
    conn.close()


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` every 50 ms; fail the test naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)
