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
from tests.e2e.serve_dist import job, start_dist_serve, stop_all, wait_until
from tests.e2e.serve_dist import start_workers as start_dist_workers
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host, page_requests, url_of
from tests.e2e.test_distributed import (
    TRAWLER,
    assert_complete_once,
    exported,
    start_worker,
    submit,
    wait_all,
)
from tests.e2e.test_recrawl_distributed import REVISIT_MIN_S
from tests.e2e.test_recrawl_distributed import _pages as revisit_pages
from tests.e2e.test_recrawl_distributed import _revisited as revisited
from tests.e2e.test_recrawl_distributed import _run as recrawl_run
from tests.e2e.test_restart_politeness import wait_for_page_requests
from tests.redis_cluster import LocalCluster, start_cluster
from tests.servers import PostgresServer, ServerUnavailable, unavailable

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


def test_max_pages_holds_over_two_workers(
    tmp_path: Path, cluster: LocalCluster, fresh_postgres_url: str
) -> None:
    """--max-pages on a cluster (frontier/redis_reserve.py): exactly N pages stored and
    N requested, though both workers crawl hosts of every shard at once."""
    served = start_testsite(tmp_path, hosts=6, pages=20)
    try:
        job = submit(served, cluster.url, fresh_postgres_url, "--delay", "0.3",
                     "--max-pages", "9")  # fmt: skip
        workers = [start_worker(tmp_path, cluster.url, fresh_postgres_url) for _ in range(2)]
        wait_all(workers)
    finally:
        served.process.terminate()
    assert len(exported(fresh_postgres_url, job)) == 9
    assert len(page_requests(served)) == 9
    gaps = min_interval_by_host(served.log())
    assert len(gaps) >= 2 and min(gaps.values()) >= 0.3 - CLOCK_SLACK_S, gaps


def test_two_workers_revisit_over_a_cluster(
    tmp_path: Path, cluster: LocalCluster, postgres_server: PostgresServer
) -> None:
    """--recrawl on a cluster (revisit lanes per bucket): unchanged pages answer 304
    to the workers' conditional GETs, no page is asked twice within --revisit-min,
    and requests to the host stay --delay apart across both workers."""
    delay_s = 0.3
    _, _, log, err = recrawl_run(tmp_path, cluster.url, postgres_server, delay_s, revisited)
    assert revisited(log), (err, log)
    assert any(r["status"] == 304 for r in log), log
    times = [r["t"] for r in log]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= delay_s - CLOCK_SLACK_S, log[gaps.index(min(gaps)) :][:2]
    for path, arrivals in revisit_pages(log).items():
        apart = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
        assert min(apart) >= REVISIT_MIN_S - CLOCK_SLACK_S, (path, arrivals)


def test_serve_reads_the_frontier_over_the_buckets(
    tmp_path: Path, cluster: LocalCluster, fresh_postgres_url: str
) -> None:
    """`trawler serve --redis redis+cluster://…`: the job's queue, hosts and stats views
    add up the buckets (one seed a host, each host in its own bucket's keys), before the
    workers start and after they finish."""
    served = start_testsite(tmp_path, hosts=6, pages=8)
    serve, workers = None, []
    try:
        job_id = submit(served, cluster.url, fresh_postgres_url, "--delay", "0.05")
        serve = start_dist_serve(tmp_path, cluster.url, fresh_postgres_url)
        client = serve.client()
        seeds = len(served.seeds)
        assert job(client, job_id)["urls_queued"] == seeds
        assert client.get("/api/v1/admin/stats").json()["queue"]["pending"] == seeds
        for seed in served.seeds:
            host = seed.split("/")[2]
            report = client.get(f"/api/v1/hosts/{host}", params={"job": job_id})
            assert report.status_code == 200 and report.json()["queued"] == 1, report.text
        workers = start_dist_workers(tmp_path, cluster.url, fresh_postgres_url)
        wait_until(lambda: job(client, job_id)["state"] == "finished", 180, "the job to finish")
        stored = job(client, job_id)["pages_crawled"]
        hosts = client.get("/api/v1/hosts", params={"job": job_id, "sort": "queued"}).json()
        assert hosts["total"] == 6 and sum(h["fetched"] for h in hosts["hosts"]) == stored
        assert {h["queued"] for h in hosts["hosts"]} == {0}
        stats = client.get("/api/v1/admin/stats").json()
        assert stats["storage"]["pages"] == stored and stats["queue"]["pending"] == 0
    finally:
        stop_all(workers, serve, served)
    assert serve is not None and "Traceback" not in serve.log()
