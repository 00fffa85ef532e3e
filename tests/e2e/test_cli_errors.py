"""Bad input and unreachable servers: one clear line on stderr and an exit code, never a
traceback (exit 2: bad options or input; exit 1: the data or a server cannot be used)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.cli_checks import assert_one_line_error, make_large_crawl
from tests.e2e.conftest import run_trawler
from tests.servers import free_port

READERS = (["stats"], ["export"], ["search", "page"])


def test_seeds_file_that_is_not_utf8(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(b"http://127.0.0.1:9/caf\xe9\n")
    out = run_trawler("crawl", "--seeds-file", str(seeds), "--data", str(tmp_path / "d"))
    line = assert_one_line_error(out, 2)
    assert "UTF-8" in line and str(seeds) in line


@pytest.mark.parametrize("where", ["missing-dir", "parent-is-a-file"])
def test_export_into_an_unwritable_place(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    make_large_crawl(data, 10)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    target = (tmp_path / "nowhere" if where == "missing-dir" else blocker) / "out.jsonl"
    out = run_trawler("export", "--data", str(data), "-o", str(target))
    line = assert_one_line_error(out, 1)
    assert str(target) in line
    assert not target.exists()


def _random_bytes_db(data: Path) -> None:
    data.mkdir()
    (data / "trawler.db").write_bytes(os.urandom(64 * 1024))


def _foreign_db(data: Path) -> None:
    data.mkdir()
    conn = sqlite3.connect(data / "trawler.db")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('an app that is not trawler')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("make", [_random_bytes_db, _foreign_db])
def test_corrupt_or_foreign_database(tmp_path: Path, make) -> None:
    data = tmp_path / "data"
    make(data)
    before = (data / "trawler.db").read_bytes()
    for args in READERS:
        line = assert_one_line_error(run_trawler(*args, "--data", str(data)), 1)
        assert "not a Trawler database" in line, line
    crawl = run_trawler("crawl", "http://127.0.0.1:9/", "--data", str(data), "-q")
    assert "not a Trawler database" in assert_one_line_error(crawl, 1)
    assert (data / "trawler.db").read_bytes() == before  # nothing written into it


def test_export_pipe_closed_early_is_quiet(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_large_crawl(data, 20_000)  # ~4 MB of JSON: far more than a pipe buffer
    for fmt in ("jsonl", "csv"):
        export = subprocess.Popen(
            [sys.executable, "-m", "trawler", "export", "--data", str(data), "--format", fmt],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert export.stdout is not None and export.stderr is not None
        assert export.stdout.readline()  # `| head -1`
        export.stdout.close()
        assert export.wait(60) == 0
        assert export.stderr.read() == b""


def assert_quiet_into_a_closed_pipe(*args: str) -> None:
    """The reader of stdout is gone before the command writes (`| true`): no error."""
    command = subprocess.Popen(
        [sys.executable, "-m", "trawler", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert command.stdout is not None and command.stderr is not None
    command.stdout.close()  # long before the child has started Python
    assert command.wait(60) == 0, args
    assert command.stderr.read() == b"", args


def test_readers_into_a_closed_pipe_are_quiet(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_large_crawl(data, 50)
    for args in (["stats"], ["stats", "--json"], ["search", "page", "--json"], ["export"]):
        assert_quiet_into_a_closed_pipe(*args, "--data", str(data))


def test_stats_of_a_data_dir_with_no_job_prints(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_large_crawl(data, 3)
    out = run_trawler("stats", "--data", str(data))
    assert out.returncode == 0, out.stderr
    assert "pages stored" in out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["workers", "--redis", "notaurl"],
        ["worker", "--redis", "notaurl", "--postgres", "postgresql://127.0.0.1:9/x"],
        ["submit", "http://a/", "--redis", "notaurl", "--postgres", "postgresql://127.0.0.1:9/x"],
        ["stats", "--redis", "notaurl", "--postgres", "postgresql://127.0.0.1:9/x"],
        ["submit", "http://a/", "--redis", "redis://127.0.0.1:9/0", "--postgres", "not a url"],
        ["export", "--postgres", "notaurl", "--job", "x"],
        ["versions", "--postgres", "notaurl", "--job", "x"],
        ["search", "pilot", "--postgres", "notaurl", "--job", "x"],
    ],
)
def test_malformed_server_urls_are_bad_options(args: list[str]) -> None:
    line = assert_one_line_error(run_trawler(*args, timeout=30), 2)
    assert "--redis" in line or "--postgres" in line


def test_versions_of_a_distributed_job_need_its_id(postgres_url: str) -> None:
    out = run_trawler("versions", "--postgres", postgres_url, timeout=30)
    assert "--job" in assert_one_line_error(out, 2)
    out = run_trawler("versions", "--postgres", postgres_url, "--job", "nope", timeout=30)
    assert "no job 'nope'" in assert_one_line_error(out, 2)


def test_search_of_a_distributed_job_needs_its_id_and_a_good_raw_query(
    fresh_postgres_url: str,
) -> None:
    out = run_trawler("search", "pilot", "--postgres", fresh_postgres_url, timeout=30)
    assert "--job" in assert_one_line_error(out, 2)
    out = run_trawler("search", "pilot", "--postgres", fresh_postgres_url, "--job", "nope")
    assert "no job 'nope'" in assert_one_line_error(out, 2)
    job = asyncio.run(_made_job(fresh_postgres_url))
    raw = run_trawler("search", "keel &", "--raw", "--postgres", fresh_postgres_url, "--job", job)
    assert "invalid tsquery" in assert_one_line_error(raw, 2)
    none = run_trawler("search", "keel", "--postgres", fresh_postgres_url, "--job", job, "--json")
    assert none.returncode == 0 and none.stdout == "", none.stderr


@pytest.mark.parametrize("worker_id", ["a b", "a/b", ""])
def test_unusable_worker_id_is_a_bad_option(tmp_path: Path, worker_id: str) -> None:
    out = run_trawler("worker", "--redis", "redis://127.0.0.1:9/0", "--postgres",
                      "postgresql://127.0.0.1:9/x", "--warc-dir", str(tmp_path / "w"),
                      "--worker-id", worker_id, timeout=30)  # fmt: skip
    assert "--worker-id" in assert_one_line_error(out, 2)


def _unreachable_commands(redis: str, postgres: str, tmp: Path) -> list[list[str]]:
    return [
        ["stats", "--postgres", postgres],
        ["export", "--postgres", postgres, "--job", "x"],
        ["versions", "--postgres", postgres, "--job", "x"],
        ["search", "pilot", "--postgres", postgres, "--job", "x"],
        ["submit", "http://127.0.0.1:9/", "--redis", redis, "--postgres", postgres],
        ["worker", "--redis", redis, "--postgres", postgres, "--warc-dir", str(tmp / "w")],
    ]


def test_postgres_unreachable_says_so_at_once(tmp_path: Path, redis_url: str) -> None:
    postgres = f"postgresql://postgres@127.0.0.1:{free_port()}/trawler"
    for args in _unreachable_commands(redis_url, postgres, tmp_path):
        started = time.monotonic()
        line = assert_one_line_error(run_trawler(*args, timeout=60), 1)
        assert time.monotonic() - started < 15, args  # not 30 s of retries
        assert "PostgreSQL" in line and "refused" in line, line


def test_missing_postgres_database_says_so_at_once(
    tmp_path: Path, redis_url: str, postgres_server
) -> None:
    postgres = postgres_server.url_for("no_such_database")
    for args in _unreachable_commands(redis_url, postgres, tmp_path):
        started = time.monotonic()
        line = assert_one_line_error(run_trawler(*args, timeout=60), 1)
        assert time.monotonic() - started < 15, args
        assert 'database "no_such_database" does not exist' in line, line


async def _made_job(postgres: str) -> str:
    from trawler.config import CrawlConfig
    from trawler.store.postgres import PostgresStore

    async with await PostgresStore.connect(postgres) as store:
        return await store.create_job(CrawlConfig(), "finished")


def _job_rows(postgres: str) -> int:
    import psycopg

    with psycopg.connect(postgres) as conn:
        exists = conn.execute("SELECT to_regclass('jobs')").fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
        return row[0] if row else 0


def test_failed_submit_leaves_no_job(tmp_path: Path, fresh_postgres_url: str) -> None:
    redis = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    out = run_trawler("submit", "http://127.0.0.1:9/", "--redis", redis,
                      "--postgres", fresh_postgres_url, timeout=90)  # fmt: skip
    assert _job_rows(fresh_postgres_url) == 0
    line = assert_one_line_error(out, 1)
    assert "Redis" in line, line


def test_distributed_stats_table_and_numbers(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    from tests.e2e.conftest import start_testsite
    from tests.e2e.test_distributed import start_worker, submit

    served = start_testsite(tmp_path, hosts=2, pages=6)
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.05")
        assert start_worker(tmp_path, redis_url, fresh_postgres_url).wait(60) == 0
    finally:
        served.process.terminate()
    servers = ["--redis", redis_url, "--postgres", fresh_postgres_url, "--job", job]
    table = run_trawler("stats", *servers)
    assert table.returncode == 0, table.stderr
    assert "urls discovered" in table.stdout and "Traceback" not in table.stderr
    stats = json.loads(run_trawler("stats", *servers, "--json").stdout)
    reachable = served.site.reachable(served.seeds, None, "any")
    assert stats["urls_discovered"] >= len(reachable)
    assert stats["hosts"] == 2
    assert stats["dead_letter"] == 0
    assert stats["urls_queued"] == 0
    postgres_export = ["export", "--postgres", fresh_postgres_url, "--job", job]
    assert_quiet_into_a_closed_pipe(*postgres_export)
    assert_quiet_into_a_closed_pipe("stats", *servers)
