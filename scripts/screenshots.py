#!/usr/bin/env python3
"""Screenshots of the dashboard for the README, so they stay current.

Serves the generated test web on loopback, starts `trawler serve` on a fresh data
directory, runs a short crawl, and saves docs/images/dashboard-overview.png and
docs/images/dashboard-job.png (1280×800, light theme) with Playwright driving
Debian's chromium (installed with apt-get when missing). Run from anywhere:
``.venv/bin/python scripts/screenshots.py [--crawl-s 40]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from tests.e2e.api_server import ServeProcess, start_serve  # noqa: E402
from tests.e2e.browser import WAIT_MS, chromium, enter_token  # noqa: E402
from tests.e2e.conftest import start_testsite  # noqa: E402

IMAGES = ROOT / "docs" / "images"
VIEWPORT = {"width": 1280, "height": 800}


def start_crawl(serve: ServeProcess, seeds: list[str]) -> str:
    body = {"seeds": seeds, "allow_private": True, "scope": "any", "delay": 0.25,
            "max_attempts": 1}  # fmt: skip
    with serve.client() as client:
        answer = client.post("/api/v1/jobs", json=body)
        answer.raise_for_status()
        return str(answer.json()["id"])


def shoot(page: Page, base: str, job_id: str) -> None:
    page.goto(f"{base}/#/overview")
    expect(page.locator("[data-testid=live-status]")).to_have_text("live", timeout=WAIT_MS)
    expect(page.locator("svg[data-testid=throughput-chart] polyline")).to_have_count(1)
    time.sleep(1.5)  # two more snapshots: the bandwidth is a difference of two
    page.screenshot(path=str(IMAGES / "dashboard-overview.png"))
    page.goto(f"{base}/#/jobs/{job_id}")
    expect(page.locator("[data-testid=job-detail] [data-field=state]")).to_be_visible(
        timeout=WAIT_MS
    )
    time.sleep(1.0)
    page.screenshot(path=str(IMAGES / "dashboard-job.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crawl-s", type=float, default=40, help="crawl this long first")
    args = parser.parse_args()
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trawler-shots-") as tmp_name:
        tmp = Path(tmp_name)
        site = start_testsite(tmp, hosts=6, pages=400)
        serve = start_serve(tmp / "data", tmp / "serve.log", "--allow-private")
        try:
            job_id = start_crawl(serve, site.seeds)
            time.sleep(args.crawl_s)  # a few minutes of chart would be nicer; this is enough
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=str(chromium()),
                                                 args=["--no-sandbox"])  # fmt: skip
                page = browser.new_page(viewport=VIEWPORT, color_scheme="light")
                base = serve.base
                page.goto(f"{base}/")
                enter_token(page, serve.token)
                shoot(page, base, job_id)
                browser.close()
        finally:
            serve.stop()
            site.process.terminate()
            site.process.wait(10)
    print(f"saved {IMAGES / 'dashboard-overview.png'} and {IMAGES / 'dashboard-job.png'}")


if __name__ == "__main__":
    main()
