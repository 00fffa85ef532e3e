"""Issue 11, seeds: N seed URLs over H hosts through `trawler crawl` and `trawler submit`.

    nice -n 10 python bench/bench_seeds.py [--seeds 1000000] [--hosts 10000]

Seeds are URLs on the H hosts of `trawler testsite` (127.0.x.y, loopback only).
Embedded: `trawler crawl --seeds-file F --max-pages 1`: the run spools and checks
every seed, inserts them in chunks of 10,000, fetches one page and stops. Then a
resume adding one seed (the job's other seeds are not read again) and fetching
one page. Distributed: `trawler submit` into a real redis-server and PostgreSQL
(tests/servers.py). Reports wall time and peak RSS of each command (the process
and its parser processes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers import start_postgres, start_redis  # noqa: E402

TRAWLER = [sys.executable, "-m", "trawler"]


def start_site(hosts: int) -> tuple[subprocess.Popen[str], list[str]]:
    """`trawler testsite` on ``hosts`` loopback addresses; its host base URLs."""
    command = [sys.executable, "-m", "trawler.testsite", "--hosts", str(hosts),
               "--pages", "2", "--port", "0"]  # fmt: skip
    site = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert site.stdout is not None
    bases = []
    for line in site.stdout:
        if line.strip() == "ready":
            return site, bases
        bases.append(line.strip().rstrip("/"))
    raise SystemExit("testsite did not start")


def write_seeds(path: Path, seeds: int, bases: list[str]) -> None:
    with path.open("w") as out:
        for i in range(seeds):
            out.write(f"{bases[i % len(bases)]}/s/{i // len(bases)}\n")


def timed(*args: str) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the command with its children, stderr) of one command."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen([*TRAWLER, *args], stdout=subprocess.DEVNULL, stderr=err)
        _pid, status, usage = os.wait4(process.pid, 0)
        elapsed = time.monotonic() - started
        err.seek(0)
        said = err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"trawler {args[0]} failed ({status}): {said[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, said


def embedded(tmp: Path, seeds_file: Path, count: int, new_seed: str) -> dict:
    data = tmp / "data"
    common = ("--allow-private", "--no-sitemaps", "-q", "--delay", "0")
    first_s, first_rss, _ = timed("crawl", "--seeds-file", str(seeds_file), "--data", str(data),
                                  "--max-pages", "1", *common)  # fmt: skip
    size = (data / "trawler.db").stat().st_size
    resume_s, resume_rss, _ = timed("crawl", new_seed, "--data", str(data), "--max-pages", "2")
    return {
        "seeds": count, "ingest_and_first_fetch_s": round(first_s, 1),
        "ingest_rate_per_s": round(count / first_s), "peak_rss_mb": round(first_rss),
        "db_mb": round(size / 2**20), "resume_adding_one_seed_s": round(resume_s, 1),
        "resume_peak_rss_mb": round(resume_rss),
    }  # fmt: skip


def distributed(tmp: Path, seeds_file: Path, count: int, workers: int, seconds: float) -> dict:
    """`trawler submit`, then ``workers`` `trawler worker`s crawling for ``seconds``:
    each must still be running when it is told to stop (SIGTERM, exit 143)."""
    (tmp / "redis").mkdir()
    redis = start_redis(tmp / "redis", appendonly=False)
    postgres = start_postgres()
    connect = ("--redis", redis.url, "--postgres", postgres.url)
    try:
        before = _redis_used(redis.port)
        submit_s, rss, err = timed("submit", "--seeds-file", str(seeds_file), *connect,
                                   "--allow-private", "--no-sitemaps")  # fmt: skip
        used = _redis_used(redis.port) - before
        crawled = _run_workers(tmp, connect, workers, seconds)
        slowest_ms = _slowlog_max_ms(redis.port)
    finally:
        redis.stop()
        postgres.stop()
    return {"seeds": count, "submit_s": round(submit_s, 1), "submit_peak_rss_mb": round(rss),
            "redis_used_mb": round(used / 2**20), "redis_bytes_per_seed": round(used / count),
            "said": err.strip().splitlines()[-1], **crawled,
            "redis_slowest_call_ms": slowest_ms}  # fmt: skip


def _redis_used(port: int) -> int:
    info = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    return int(next(line.split(":")[1] for line in info.splitlines()
                    if line.startswith("used_memory:")))  # fmt: skip


def _slowlog_max_ms(port: int) -> float:
    command = ["redis-cli", "-p", str(port), "slowlog", "get", "1000"]
    out = subprocess.run(command, capture_output=True, check=True).stdout.decode(errors="replace")
    lines = out.splitlines()
    # Each entry: id, timestamp, microseconds, ...: the third line of each entry.
    micros = [int(lines[i + 2]) for i, line in enumerate(lines[:-2])
              if line.isdigit() and lines[i + 1].isdigit() and lines[i + 2].isdigit()
              and int(lines[i + 1]) > 1_000_000_000]  # fmt: skip
    return round(max(micros, default=0) / 1000, 1)


def _run_workers(tmp: Path, connect: tuple[str, ...], workers: int, seconds: float) -> dict:
    if not workers:
        return {}
    logs = [tmp / f"worker-{i}.log" for i in range(workers)]
    procs = []
    for i, log in enumerate(logs):
        with log.open("w") as out:
            command = [*TRAWLER, "worker", *connect, "--warc-dir", str(tmp / "warc"),
                       "--worker-id", f"bench-{i}", "-q"]  # fmt: skip
            procs.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
    time.sleep(seconds)
    alive = [p.poll() is None for p in procs]
    for p in procs:
        p.terminate()
    codes = [p.wait(60) for p in procs]
    stats = subprocess.run([*TRAWLER, "stats", *connect, "--json"],
                           capture_output=True, text=True).stdout  # fmt: skip
    return {"workers": workers, "worker_seconds": seconds, "workers_alive_at_end": sum(alive),
            "worker_exit_codes": codes, "stats": stats.strip()[-400:],
            "worker_log_tail": [log.read_text()[-300:] for log in logs]}  # fmt: skip


def raise_open_files_limit() -> None:
    """10,000 listening hosts plus three workers' keep-alive connections to them pass
    the usual 20,000 descriptors: the site then fails every accept. Root may raise it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, 200_000), max(hard, 200_000)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--only", choices=("embedded", "distributed"))
    parser.add_argument("--workers", type=int, default=0, help="workers to run after submit")
    parser.add_argument("--worker-seconds", type=float, default=60.0)
    args = parser.parse_args()
    raise_open_files_limit()  # the site and the workers inherit it
    with tempfile.TemporaryDirectory(prefix="bench-seeds-") as name:
        tmp = Path(name)
        seeds_file = tmp / "seeds.txt"
        site, bases = start_site(args.hosts)
        try:
            write_seeds(seeds_file, args.seeds, bases)
            if args.only in (None, "embedded"):
                result = embedded(tmp, seeds_file, args.seeds, bases[0] + "/new")
                print(json.dumps(result), flush=True)
            if args.only in (None, "distributed"):
                result = distributed(tmp, seeds_file, args.seeds, args.workers,
                                     args.worker_seconds)  # fmt: skip
                print(json.dumps(result), flush=True)
        finally:
            site.terminate()
            site.wait(30)


if __name__ == "__main__":
    main()
