"""WARC files of a worker killed with -9 are recovered whatever the worker is called."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import start_testsite
from tests.e2e.test_distributed import assert_complete_once, exported, start_worker, submit


def _pages_stored(postgres: str, job: str) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "trawler", "stats", "--postgres", postgres, "--job", job, "--json"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return json.loads(out.stdout)["pages_stored"] if out.returncode == 0 else 0


def assert_rows_point_at_records(warc_dir: Path, rows: list[dict]) -> None:
    """Every stored row's WARC file exists and warcio reads its response at its offset."""
    pointed = [row for row in rows if row["warc_file"]]
    assert pointed
    for row in pointed:
        path = warc_dir / row["warc_file"]
        assert path.exists(), f"{row['url']}: {row['warc_file']} does not exist"
        with path.open("rb") as stream:
            stream.seek(row["warc_offset"])
            record = next(iter(ArchiveIterator(stream, check_digests=True)))
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Target-URI") == row["final_url"]
            record.content_stream().read()  # the whole body decompresses


def test_worker_named_by_worker_id_killed_with_9(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = start_testsite(tmp_path, hosts=3, pages=30)
    warc_dir = tmp_path / "warc"
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.1")
        first = start_worker(tmp_path, redis_url, fresh_postgres_url,
                             "--worker-id", "w1", "--lease-timeout", "2")  # fmt: skip
        wait_until(lambda: _pages_stored(fresh_postgres_url, job) >= 10, 60, "stored pages")
        first.kill()
        first.wait(10)
        assert list(warc_dir.glob("*.warc.gz.open")), "the killed worker left no open file"
        second = start_worker(tmp_path, redis_url, fresh_postgres_url,
                              "--worker-id", "w2", "--lease-timeout", "2")  # fmt: skip
        assert second.wait(120) == 0, second.stderr.read() if second.stderr else ""
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)
    assert not list(warc_dir.glob("*.open"))
    assert_rows_point_at_records(warc_dir, exported(fresh_postgres_url, job))
