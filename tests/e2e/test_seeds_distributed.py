"""Seeds through `trawler submit`: streamed into Redis, never in the job's config;
workers take the job's scope from PostgreSQL and add no seeds of their own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg

from tests.e2e.conftest import Served
from tests.e2e.test_distributed import TRAWLER, exported, start_worker, wait_all


def submit(redis: str, postgres: str, *args: str, stdin: str | None = None):
    return subprocess.run(
        [*TRAWLER, "submit", "--redis", redis, "--postgres", postgres, "--allow-private",
         "--no-sitemaps", "--delay", "0", *args],
        input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def jobs(postgres: str) -> list[tuple]:
    with psycopg.connect(postgres) as conn:
        return conn.execute("SELECT id, config FROM jobs").fetchall()


def test_submit_streams_seeds_and_workers_keep_the_host_scope(
    testsite: Served, tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """Seeds of host 0 from stdin, host scope: no seed in the stored config, and the
    workers (which add no seeds) crawl exactly host 0's reachable pages."""
    out = submit(redis_url, fresh_postgres_url, "--seeds-file", "-", stdin=testsite.seeds[0])
    assert out.returncode == 0, out.stderr
    assert "submitted job with 1 seed(s)" in out.stderr
    job = out.stdout.strip().splitlines()[-1]
    ((job_id, config),) = jobs(fresh_postgres_url)
    assert job_id == job and "seeds" not in config
    workers = [start_worker(tmp_path / str(i), redis_url, fresh_postgres_url) for i in range(2)]
    wait_all(workers)
    urls = {row["url"] for row in exported(fresh_postgres_url, job)}
    assert urls == set(testsite.site.reachable(testsite.seeds[:1], None, "host"))
    stats = subprocess.run(
        [*TRAWLER, "stats", "--postgres", fresh_postgres_url, "--redis", redis_url, "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["job"]["seed_hosts"] == 1


def test_submit_bad_seed_names_its_line_and_leaves_no_job(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    seeds_file = tmp_path / "seeds.txt"
    good = [f"http://h{i}.test/" for i in range(25_000)]  # more than one chunk
    seeds_file.write_text("\n".join([*good, "http//missing-colon.test/"]) + "\n")
    out = submit(redis_url, fresh_postgres_url, "--seeds-file", str(seeds_file))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "line 25001" in out.stderr and "http//missing-colon.test/" in out.stderr
    assert job_rows(fresh_postgres_url) == 0


def job_rows(postgres: str) -> int:
    """Jobs in the database; none when submit never created the schema."""
    with psycopg.connect(postgres) as conn:
        (table,) = conn.execute("SELECT to_regclass('jobs')").fetchone() or (None,)
        return conn.execute("SELECT count(*) FROM jobs").fetchone()[0] if table else 0
