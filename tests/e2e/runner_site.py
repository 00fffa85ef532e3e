"""Shared by the JobRunner tests: a latency test site in a process of its own
(latency_site.py) and readings of its access log."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import prioritise
from trawler.config import CrawlConfig
from trawler.sitegen import Site, SiteSpec
from trawler.store.embedded import EmbeddedBackend
from trawler.store.sqlite import DB_NAME

CLOCK_SLACK_S = 0.015  # the server stamps arrivals in its own process, a little late


@dataclass
class LatencyServer:
    site: Site
    seeds: list[str]
    log_path: Path
    process: subprocess.Popen[str]

    def log(self, ua: str | None = None) -> list[dict]:
        lines = self.log_path.read_text().splitlines() if self.log_path.exists() else []
        entries = [json.loads(line) for line in lines if line.strip()]
        return [e for e in entries if ua is None or e["ua"] == ua]


def start_server(tmp: Path, hosts: int, pages: int, latency_s: float) -> LatencyServer:
    log_path = tmp / "access.jsonl"
    cmd = [sys.executable, "-m", "tests.e2e.latency_site", "--hosts", str(hosts), "--pages",
           str(pages), "--latency", str(latency_s), "--access-log", str(log_path)]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    prioritise(process)
    assert process.stdout is not None
    seeds = []
    for line in process.stdout:
        if line.strip() == "ready":
            break
        seeds.append(line.strip())
    else:
        raise RuntimeError("latency site did not start")
    port = int(seeds[0].rsplit(":", 1)[1].split("/")[0])
    return LatencyServer(Site(SiteSpec(hosts=hosts, pages=pages, port=port)), seeds, log_path,
                         process)  # fmt: skip


def serve(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    """The body of each test module's ``server`` fixture: (hosts, pages, latency) from
    ``indirect`` parametrisation, else (3, 4, 0.05)."""
    hosts, pages, latency_s = getattr(request, "param", (3, 4, 0.05))
    served = start_server(tmp_path, hosts, pages, latency_s)
    yield served
    served.process.terminate()
    served.process.wait(10)


def job_config(name: str, delay_s: float, **options: object) -> CrawlConfig:
    settings = {"parse_processes": 0, "sitemaps": False, **options}  # inline: a light test
    return CrawlConfig(
        user_agent=f"{name}/1.0", allow_private=True, delay_s=delay_s, **settings
    )  # fmt: skip


def backends(root: Path) -> Callable[[str], EmbeddedBackend]:
    """The runner's backend factory: each job's data in ROOT/<job id>."""

    def backend_for(job_id: str) -> EmbeddedBackend:
        return EmbeddedBackend(root / job_id)

    return backend_for


def overlaps(entries: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of requests to one host where the second arrived before the first's
    answer was ready: two requests in flight to the host at once."""
    by_host: dict[str, list[dict]] = defaultdict(list)
    for entry in entries:
        by_host[entry["host"]].append(entry)
    found = []
    for host_entries in by_host.values():
        host_entries.sort(key=lambda e: e["t"])
        pairs = zip(host_entries, host_entries[1:], strict=False)
        found += [(a, b) for a, b in pairs if b["t"] < a["done"]]
    return found


def min_gaps(entries: list[dict]) -> dict[str, float]:
    """Smallest start-to-start gap between two requests to one host, per host."""
    times: dict[str, list[float]] = defaultdict(list)
    for entry in entries:
        times[entry["host"]].append(entry["t"])
    return {
        host: min(b - a for a, b in zip(sorted(ts), sorted(ts)[1:], strict=False))
        for host, ts in times.items()
        if len(ts) > 1
    }


def stored_urls(data: Path) -> set[str]:
    conn = sqlite3.connect(data / DB_NAME)
    try:
        return {url for (url,) in conn.execute("SELECT url FROM pages WHERE kind = 'page'")}
    finally:
        conn.close()


def fetched_urls(entries: list[dict]) -> Counter[str]:
    return Counter(f"http://{e['host']}{e['path']}" for e in entries if e["path"] != "/robots.txt")


async def wait_for(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
