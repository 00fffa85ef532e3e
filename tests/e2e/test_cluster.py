"""Distributed mode on a Redis Cluster: `trawler submit` and two workers against a
local 3-master cluster (tests/redis_cluster.py), the frontier sharded by host
buckets (frontier/redis_keys.py), pages in PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import start_testsite
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host, page_requests, url_of
from tests.e2e.test_distributed import TRAWLER, assert_complete_once, start_worker, submit, wait_all
from tests.e2e.test_restart_politeness import wait_for_page_requests
from tests.redis_cluster import LocalCluster, start_cluster
from tests.servers import ServerUnavailable, unavailable

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    try:
        started = start_cluster(tmp_path / "cluster")
    except (ServerUnavailable, RuntimeError) as exc:
        unavailable("Redis Cluster", exc)
    yield started
    started.stop()


def test_two_workers_crawl_over_a_cluster_politely(
    tmp_path: Path, cluster: LocalCluster, fresh_postgres_url: str
) -> None:
    served = start_testsite(tmp_path, hosts=6, pages=20)
    try:
        job = submit(served, cluster.url, fresh_postgres_url, "--delay", "0.3")
        workers = [start_worker(tmp_path, cluster.url, fresh_postgres_url) for _ in range(2)]
        wait_all(workers)
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)
    fetched = [url_of(e) for e in page_requests(served)]
    assert len(fetched) == len(set(fetched))
    gaps = min_interval_by_host(served.log())
    assert len(gaps) == 6 and min(gaps.values()) >= 0.3 - CLOCK_SLACK_S, gaps
    sizes = [int(cluster.cli(node, "dbsize")) for node in cluster.nodes]
    assert min(sizes) > 0, sizes  # every shard held part of the frontier
    stats = subprocess.run(
        [*TRAWLER, "stats", "--redis", cluster.url, "--postgres", fresh_postgres_url,
         "--job", job, "--json"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    counts = json.loads(stats.stdout)
    assert counts["urls_discovered"] == len(set(fetched)) and counts["urls_queued"] == 0


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill9"])
def test_a_shard_restarted_mid_crawl(
    tmp_path: Path, cluster: LocalCluster, fresh_postgres_url: str, kill: bool
) -> None:
    served = start_testsite(tmp_path, hosts=6, pages=25)
    try:
        job = submit(served, cluster.url, fresh_postgres_url, "--delay", "0.1")
        workers = [start_worker(tmp_path, cluster.url, fresh_postgres_url) for _ in range(2)]
        if kill:  # kill -9 then loses nothing of what the AOF was told
            for node in cluster.nodes:
                cluster.cli(node, "config", "set", "appendfsync", "always")
        wait_for_page_requests(served, 0, more=20)
        cluster.nodes[1].restart(kill=kill)  # same port, dir, nodes.conf and AOF
        wait_all(workers)
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)
    gaps = min_interval_by_host(served.log())
    assert min(gaps.values()) >= 0.1 - CLOCK_SLACK_S, gaps


def test_cluster_limits_are_usage_errors(tmp_path: Path, fresh_postgres_url: str) -> None:
    url = "redis+cluster://127.0.0.1:1"  # refused before any connection
    connect = ["--redis", url, "--postgres", fresh_postgres_url]
    for command in (["submit", "http://a.test/", *connect, "--max-pages", "5"],
                    ["submit", "http://a.test/", *connect, "--recrawl"],
                    ["recrawl", *connect], ["serve", *connect, "--port", "0"]):  # fmt: skip
        out = subprocess.run([*TRAWLER, *command], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "single Redis" in out.stderr, out.stderr
