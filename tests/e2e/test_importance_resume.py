"""End-to-end: `--priority importance` goes on in importance order after a stop and
resume, the OPIC cash kept in the data directory (issue 18), read from the server's
access log. The same resume with the kept cash removed (what a resume did before)
falls back to the depth order: the check can fail."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import run_trawler
from tests.e2e.test_importance_order import SPEC, SkewSite, skew_site  # noqa: F401
from trawler.frontier.importance_store import CASH_TABLE
from trawler.skewweb import SkewWeb, early_share
from trawler.store.sqlite import DB_NAME

__all__ = ["skew_site"]
STOP_AFTER = 120  # pages of the 800 fetched before the stop
MARGIN = (
    0.25  # the kept cash's share must beat the lost cash's by this much (measured: 0.81 vs 0.26)
)


def resume(site: SkewSite, data: Path) -> list:
    before = site.lines()
    out = run_trawler("crawl", "--data", str(data), "-q", timeout=300)
    assert out.returncode == 0, out.stderr
    return site.fetched(before)


def test_a_resumed_crawl_keeps_its_importance_order(skew_site: SkewSite, tmp_path: Path) -> None:
    data = tmp_path / "kept"
    cmd = [sys.executable, "-m", "trawler", "crawl", *skew_site.seeds, "--data", str(data),
           "--allow-private", "-q", "--no-sitemaps", "--scope", "any", "--delay", "0.05",
           "--priority", "importance"]  # fmt: skip
    crawler = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: len(skew_site.fetched()) >= STOP_AFTER, 60, "pages fetched")
    crawler.send_signal(signal.SIGINT)
    _out, err = crawler.communicate(timeout=60)
    assert crawler.returncode == 130, err
    before = set(skew_site.fetched())
    (job_db,) = data.glob(f"jobs/*/{DB_NAME}")  # the job's own database (jobs/layout.py)
    with sqlite3.connect(job_db) as conn:  # the cash of the URLs still queued
        assert conn.execute(f"SELECT count(*) FROM {CASH_TABLE}").fetchone()[0] > 0
    lost = tmp_path / "lost"
    shutil.copytree(data, lost)
    with sqlite3.connect(lost / job_db.relative_to(data)) as conn:
        conn.execute(f"DELETE FROM {CASH_TABLE}")
    web = SkewWeb(SPEC)
    top = web.top(0.1) - before  # the most-linked pages still to fetch
    shares = {}
    for name, directory in (("kept", data), ("lost", lost)):
        after = resume(skew_site, directory)
        assert sorted(set(after) | before) == sorted(web.out), "every page, once resumed"
        shares[name] = early_share(top, [p for p in after if p not in before], 0.2)
    assert shares["kept"] >= shares["lost"] + MARGIN, shares
