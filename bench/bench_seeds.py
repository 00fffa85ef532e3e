"""Issue 11, seeds: N seed URLs over H hosts through `trawler crawl` and `trawler submit`.

    nice -n 10 python bench/bench_seeds.py [--seeds 1000000] [--hosts 10000]

Embedded: `trawler crawl --seeds-file F --max-pages 1` on loopback addresses
where nothing listens (127.1.x.y, port 9: refused at once, no network): the run
spools and checks every seed, inserts them in chunks, fetches one URL and stops.
Then a resume adding one seed (the job's seeds are not read again) to its first
fetch. Distributed: `trawler submit` into a real redis-server and PostgreSQL
(tests/servers.py). Reports wall time and peak RSS of each command.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers import start_postgres, start_redis  # noqa: E402

TRAWLER = [sys.executable, "-m", "trawler"]


def write_seeds(path: Path, seeds: int, hosts: int) -> None:
    with path.open("w") as out:
        for i in range(seeds):
            host = i % hosts
            out.write(f"http://127.1.{host // 250}.{host % 250 + 1}:9/s/{i // hosts}\n")


def timed(*args: str) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of this child, stderr) of one trawler command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    out = subprocess.run([*TRAWLER, *args], capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - started
    if out.returncode not in (0,):
        raise SystemExit(f"trawler {args[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024, out.stderr


def embedded(tmp: Path, seeds_file: Path, count: int) -> dict:
    data = tmp / "data"
    common = ("--allow-private", "--no-sitemaps", "-q", "--max-attempts", "1",
              "--robots-retry-wait", "0.01", "--connect-timeout", "1")  # fmt: skip
    first_s, first_rss, _ = timed("crawl", "--seeds-file", str(seeds_file), "--data", str(data),
                                  "--max-pages", "1", *common)  # fmt: skip
    size = (data / "trawler.db").stat().st_size
    resume_s, _rss, _ = timed("crawl", "http://127.1.250.1:9/new", "--data", str(data),
                              "--max-pages", "2")  # fmt: skip
    return {
        "seeds": count, "ingest_and_first_fetch_s": round(first_s, 1),
        "ingest_rate_per_s": round(count / first_s), "peak_rss_mb": round(first_rss),
        "db_mb": round(size / 2**20), "resume_adding_one_seed_s": round(resume_s, 1),
    }  # fmt: skip


def distributed(tmp: Path, seeds_file: Path, count: int) -> dict:
    (tmp / "redis").mkdir()
    redis = start_redis(tmp / "redis", appendonly=False)
    postgres = start_postgres()
    try:
        submit_s, rss, err = timed("submit", "--seeds-file", str(seeds_file), "--redis",
                                   redis.url, "--postgres", postgres.url)  # fmt: skip
        info = subprocess.run(["redis-cli", "-p", str(redis.port), "info", "memory"],
                              capture_output=True, text=True).stdout  # fmt: skip
        used = int(next(line.split(":")[1] for line in info.splitlines()
                        if line.startswith("used_memory:")))  # fmt: skip
    finally:
        redis.stop()
        postgres.stop()
    return {"seeds": count, "submit_s": round(submit_s, 1), "submit_peak_rss_mb": round(rss),
            "redis_used_mb": round(used / 2**20), "redis_bytes_per_seed": round(used / count),
            "said": err.strip().splitlines()[-1]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--only", choices=("embedded", "distributed"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-seeds-") as name:
        tmp = Path(name)
        seeds_file = tmp / "seeds.txt"
        write_seeds(seeds_file, args.seeds, args.hosts)
        results = {}
        if args.only in (None, "embedded"):
            results["embedded"] = embedded(tmp, seeds_file, args.seeds)
            print(json.dumps(results["embedded"]), flush=True)
        if args.only in (None, "distributed"):
            results["distributed"] = distributed(tmp, seeds_file, args.seeds)
            print(json.dumps(results["distributed"]), flush=True)


if __name__ == "__main__":
    main()
