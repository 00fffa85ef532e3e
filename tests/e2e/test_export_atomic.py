"""`export -o FILE` is all or nothing: a killed export never leaves a truncated FILE."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.cli_checks import make_large_crawl, wait_until
from tests.e2e.conftest import run_trawler

PAGES = 300_000  # several seconds of export: time to kill it half-way


def _bytes_written(directory: Path, data: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p != data and p.is_file())


def test_killed_export_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_large_crawl(data, PAGES)
    target = tmp_path / "pages.jsonl"
    target.write_text('{"old": true}\n')
    export = subprocess.Popen(
        [sys.executable, "-m", "trawler", "export", "--data", str(data), "-o", str(target)],
        stderr=subprocess.PIPE,
    )
    # Half-way: output of some MB written somewhere beside the target, export still running.
    wait_until(lambda: _bytes_written(tmp_path, data) > 2_000_000, 60, "export output")
    assert export.poll() is None, "the export finished before it could be killed"
    export.kill()
    export.wait(10)
    assert target.read_text() == '{"old": true}\n'

    done = run_trawler("export", "--data", str(data), "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert f"{PAGES} rows written" in done.stderr
    with target.open() as rows:
        count = sum(1 for _ in rows)
    assert count == PAGES
    assert json.loads(target.read_text().splitlines()[-1])["url"].endswith(f"/{PAGES - 1}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "pages.jsonl"]


def test_failed_export_keeps_the_old_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "trawler.db").write_bytes(b"\x00" * 4096)  # not a database
    target = tmp_path / "pages.csv"
    target.write_text("old\n")
    out = run_trawler("export", "--data", str(data), "-o", str(target), "--format", "csv")
    assert out.returncode == 1
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "pages.csv"]
