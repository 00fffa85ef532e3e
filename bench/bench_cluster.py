"""One Redis against a 3-master Redis Cluster: the same small distributed crawl on each.

    .venv/bin/python bench/bench_cluster.py [--hosts 100] [--pages 20] [--delay 0.2]
        [--workers 2] [--max-pages N] [--work bench/work/cluster]

A benchmark, not a test. It starts PostgreSQL, a redis-server and a local Redis
Cluster (3 masters, tests/redis_cluster.py) on free loopback ports, and for each
frontier serves a fresh generated site (python -m trawler.testsite), runs
``trawler submit`` then N ``trawler worker --exit-when-idle`` at once, and
reports pages stored, wall time from the workers' start to the last exit,
pages/s, and Redis commands per page from ``INFO commandstats`` summed over
every master (reset before the run): scripts (EVALSHA/EVAL) and all commands,
those run inside scripts included. ``--max-pages``: the job's page budget (on the
cluster, places reserved in the job's own slot: frontier/redis_reserve.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.conftest import start_testsite  # noqa: E402
from tests.redis_cluster import LocalCluster, start_cluster  # noqa: E402
from tests.servers import start_postgres, start_redis  # noqa: E402

TRAWLER = [sys.executable, "-m", "trawler"]


def calls(cli: list[list[str]]) -> tuple[int, int]:
    """(scripts, all commands) from INFO commandstats on each node."""
    scripts = total = 0
    for base in cli:
        out = subprocess.run([*base, "info", "commandstats"], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("cmdstat_"):
                n = int(line.split("calls=", 1)[1].split(",", 1)[0])
                total += n
                if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                    scripts += n
    return scripts, total


def one_run(name: str, url: str, cli: list[list[str]], pg_url: str, args, work: Path) -> dict:  # type: ignore[no-untyped-def]
    tmp = work / name
    tmp.mkdir(parents=True, exist_ok=True)
    served = start_testsite(tmp, hosts=args.hosts, pages=args.pages)
    try:
        connect = ["--redis", url, "--postgres", pg_url]
        budget = ["--max-pages", str(args.max_pages)] if args.max_pages else []
        out = subprocess.run([*TRAWLER, "submit", *served.seeds, *connect, "--allow-private",
                              "--scope", "any", "--no-sitemaps", "--delay", str(args.delay),
                              *budget],
                             capture_output=True, text=True, check=True)  # fmt: skip
        job = out.stdout.strip().splitlines()[-1]
        for base in cli:
            subprocess.run([*base, "config", "resetstat"], capture_output=True, check=True)
        started = time.monotonic()
        workers = [subprocess.Popen([*TRAWLER, "worker", *connect, "--warc-dir", str(tmp / "warc"),
                                     "--exit-when-idle", "-q"], stderr=subprocess.DEVNULL)
                   for _ in range(args.workers)]  # fmt: skip
        for worker in workers:
            worker.wait(600)
        wall_s = time.monotonic() - started
        scripts, total = calls(cli)
    finally:
        served.process.terminate()
    export = [*TRAWLER, "export", "--postgres", pg_url, "--job", job, "--include-noindex"]
    rows = subprocess.run(export, capture_output=True, text=True, check=True)
    pages = len(rows.stdout.splitlines())
    return {"frontier": name, "pages": pages, "wall_s": round(wall_s, 1),
            "pages_per_s": round(pages / wall_s, 1), "scripts_per_page": round(scripts / pages, 2),
            "commands_per_page": round(total / pages, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-pages", type=int, default=0)
    parser.add_argument("--work", type=Path, default=ROOT / "bench/work/cluster")
    args = parser.parse_args()
    work = args.work / uuid.uuid4().hex[:8]
    work.mkdir(parents=True)
    pg = start_postgres(work)
    single = start_redis(work / "redis")
    cluster: LocalCluster = start_cluster(work / "cluster")
    cli = str(Path(single.binary).with_name("redis-cli"))
    try:
        masters = [[cli, "-p", str(n.port)] for n in cluster.nodes]
        runs = [("one-redis", single.url, [[cli, "-p", str(single.port)]]),
                ("cluster-3", cluster.url, masters)]  # fmt: skip
        for name, url, clis in runs:
            pg_url = pg.create_database(f"b_{name.replace('-', '_')}")
            print(json.dumps(one_run(name, url, clis, pg_url, args, work)), flush=True)
    finally:
        cluster.stop()
        single.stop()
        pg.stop()


if __name__ == "__main__":
    main()
