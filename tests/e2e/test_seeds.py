"""Seeds streamed into the frontier (embedded mode): never kept in the job's config,
the scope kept as the seeds' hosts, resume without reading or normalising seeds."""

from __future__ import annotations

import json
import pstats
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import Served, export_rows, job_data, run_trawler

TRAWLER = [sys.executable, "-m", "trawler"]
COMMON = ("--allow-private", "-q", "--no-sitemaps", "--delay", "0")


def stored_config(data: Path) -> str:
    with sqlite3.connect(data / "jobs.db") as conn:
        return conn.execute("SELECT options FROM jobs").fetchone()[0]


def scope_hosts(data: Path, job: str | None = None) -> set[str]:
    with sqlite3.connect(job_data(data, job) / "trawler.db") as conn:
        return {host for (host,) in conn.execute("SELECT host FROM scope_hosts")}


def many_seeds(served: Served, count: int) -> list[str]:
    """``count`` distinct seed URLs on the site's first host (most of them 404)."""
    base = served.seeds[0].rstrip("/")
    return [f"{base}/seed/{i}" for i in range(count)]


def test_stored_config_has_no_seeds(testsite: Served, tmp_path: Path) -> None:
    data, seeds_file = tmp_path / "data", tmp_path / "seeds.txt"
    seeds_file.write_text("# a comment\n\n" + "\n".join(testsite.seeds[:2]) + "\n")
    out = run_trawler("crawl", testsite.seeds[2], "--seeds-file", str(seeds_file),
                      "--data", str(data), "--max-depth", "0", *COMMON)  # fmt: skip
    assert out.returncode == 0, out.stderr
    config = json.loads(stored_config(data))
    assert "seeds" not in config and len(stored_config(data)) < 4096
    assert {row["url"] for row in export_rows(data)} == set(testsite.seeds)
    assert scope_hosts(data) == {seed.split("/")[2] for seed in testsite.seeds}


def test_seeds_from_stdin(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = subprocess.run(
        [*TRAWLER, "crawl", "--seeds-file", "-", "--data", str(data), "--max-depth", "0",
         *COMMON], input="\n".join(testsite.seeds) + "\n", capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert {row["url"] for row in export_rows(data)} == set(testsite.seeds)


def test_bad_seed_deep_in_the_file_names_its_line_and_writes_nothing(tmp_path: Path) -> None:
    data, seeds_file = tmp_path / "data", tmp_path / "seeds.txt"
    good = [f"http://h{i}.test/" for i in range(20_000)]
    seeds_file.write_text("\n".join([*good, "ftp://bad.test/x", "http://after.test/"]) + "\n")
    out = run_trawler("crawl", "--seeds-file", str(seeds_file), "--data", str(data))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "line 20001" in out.stderr
    assert "ftp://bad.test/x" in out.stderr
    assert _jobs(data) == 0


def test_non_utf8_seeds_file_names_the_line(tmp_path: Path) -> None:
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_bytes(b"http://a.test/\nhttp://b.test/\nhttp://c.test/\xff\n")
    out = run_trawler("crawl", "--seeds-file", str(seeds_file), "--data", str(tmp_path / "d"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "not UTF-8" in out.stderr and "line 3" in out.stderr


def _jobs(data: Path) -> int:
    if not (data / "jobs.db").exists():
        return 0
    with sqlite3.connect(data / "jobs.db") as conn:
        return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]


def test_scope_from_persisted_hosts_after_resume(testsite: Served, tmp_path: Path) -> None:
    """Host scope from the seed of host 0 only; a resume gives no seeds."""
    data = tmp_path / "data"
    _stopped_job(testsite, data, testsite.seeds[0], path="/p/")
    resumed = run_trawler("crawl", "--data", str(data), "--delay", "0")
    assert resumed.returncode == 0, resumed.stderr
    urls = {row["url"] for row in export_rows(data)}
    assert urls == set(testsite.site.reachable(testsite.seeds[:1], None, "host"))
    assert scope_hosts(data) == {testsite.seeds[0].split("/")[2]}


def test_new_seeds_are_a_new_job(testsite: Served, tmp_path: Path) -> None:
    """A finished job stays finished; new seeds make a job of their own beside it,
    with its own scope, and readers take the newest job unless --job names one."""
    data = tmp_path / "data"
    first = run_trawler("crawl", testsite.seeds[0], "--data", str(data), "--max-depth", "0",
                        *COMMON)  # fmt: skip
    assert first.returncode == 0, first.stderr
    first_job = job_data(data).name
    same = run_trawler("crawl", "--data", str(data))
    assert same.returncode == 0 and "already finished" in same.stdout
    more = run_trawler("crawl", testsite.seeds[1], "--data", str(data), "--max-depth", "0",
                       *COMMON)  # fmt: skip
    assert more.returncode == 0, more.stderr
    assert job_data(data).name != first_job
    assert {row["url"] for row in export_rows(data)} == {testsite.seeds[1]}
    out = run_trawler("export", "--data", str(data), "--job", first_job)
    assert [json.loads(line)["url"] for line in out.stdout.splitlines()] == testsite.seeds[:1]
    assert scope_hosts(data) == {testsite.seeds[1].split("/")[2]}
    assert scope_hosts(data, first_job) == {testsite.seeds[0].split("/")[2]}
    added = run_trawler("crawl", testsite.seeds[2], "--data", str(data), "--job", first_job)
    assert added.returncode == 2 and "is finished: it takes no new seeds" in added.stderr


def _normalise_calls_in_resume(data: Path, tmp: Path) -> int:
    """Normaliser calls made by `trawler crawl --data DIR`, counted by cProfile
    (the real code, profiled: no hook of ours)."""
    profile = tmp / "resume.prof"
    out = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "trawler", "crawl",
         "--data", str(data), "--max-pages", "3", "--delay", "0", "-q"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    return sum(
        calls for (path, _line, name), (_cc, calls, *_rest) in stats.items()
        if path.endswith("trawler/urls.py") and name in ("__call__", "normalise")
    )  # fmt: skip


def _stopped_job(served: Served, data: Path, *seeds: str, path: str = "/seed/") -> None:
    """A job stopped by SIGTERM once its seeds are in and a page under ``path`` is fetched."""
    crawl = subprocess.Popen(
        [*TRAWLER, "crawl", *seeds, "--data", str(data), "-q",
         "--allow-private", "--no-sitemaps", "--delay", "0.5"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(r["path"].startswith(path) for r in served.log()):
        assert time.monotonic() < deadline and crawl.poll() is None
        time.sleep(0.1)
    crawl.send_signal(signal.SIGTERM)
    assert crawl.wait(60) == 128 + signal.SIGTERM, crawl.stderr


def test_resume_normalises_no_seeds(testsite: Served, tmp_path: Path) -> None:
    """Before: every resume normalised every seed of the config again (twice)."""
    data, seeds_file = tmp_path / "data", tmp_path / "seeds.txt"
    seeds_file.write_text("\n".join(many_seeds(testsite, 50_000)) + "\n")
    _stopped_job(testsite, data, "--seeds-file", str(seeds_file))
    seeds_file.unlink()  # a resume must not need it
    calls = _normalise_calls_in_resume(data, tmp_path)
    assert calls < 1000, calls


def _state(data: Path) -> str | None:
    """The state the job's own database keeps: "seeding" until its seeds are all in."""
    try:
        path = job_data(data) / "trawler.db"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT state FROM jobs").fetchone()
    except (sqlite3.Error, FileNotFoundError):  # not created yet
        return None
    return row[0] if row else None


def test_a_run_killed_while_adding_seeds_asks_for_them_again(
    testsite: Served, tmp_path: Path
) -> None:
    """Seeds are read once: a kill -9 before all are in must not pass unnoticed."""
    data, seeds_file = tmp_path / "data", tmp_path / "seeds.txt"
    seeds_file.write_text("\n".join(many_seeds(testsite, 200_000)) + "\n")
    crawl = subprocess.Popen([*TRAWLER, "crawl", "--seeds-file", str(seeds_file), "--data",
                              str(data), *COMMON], stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while _state(data) != "seeding":
        assert time.monotonic() < deadline and crawl.poll() is None
        time.sleep(0.02)
    crawl.send_signal(signal.SIGKILL)
    crawl.wait(30)
    assert _state(data) == "seeding"
    job_id = job_data(data).name
    with sqlite3.connect(data / "jobs.db") as conn:  # the registry knows it too
        assert conn.execute("SELECT state, seeding FROM jobs").fetchone() == ("running", 1)
    resumed = run_trawler("crawl", "--data", str(data))
    assert resumed.returncode == 2 and f"give them again with --job {job_id}" in resumed.stderr
    again = run_trawler("crawl", "--seeds-file", str(seeds_file), "--data", str(data),
                        "--job", job_id, "--max-pages", "1", timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert _state(data) == "finished" and _jobs(data) == 1
    with sqlite3.connect(data / "jobs.db") as conn:
        assert conn.execute("SELECT state, seeding FROM jobs").fetchone() == ("finished", 0)
