"""Scrapy, the side-by-side peer: the crawl benchmark's web, crawled by Scrapy.

    .venv/bin/python bench/run_scrapy_bench.py [--hosts 2000] [--pages 39]
        [--concurrency 256] [--delay 1] [--max-seconds 300] [--json-out FILE]

Starts nginx on the same generated web as bench/run_crawl_bench.py (same
--hosts, --pages, --port), runs bench/scrapy_peer/spider.py with Scrapy from
its own venv (bench/work/scrapy-venv, made and filled from PyPI on first use:
Scrapy is no dependency of Trawler), samples its CPU and RSS, and reports the
same figures as the Trawler benchmark: pages, pages/s overall and steady,
CPU-s per 1,000 pages, peak RSS and politeness from nginx's log.

Scrapy's settings: ROBOTSTXT_OBEY, DOWNLOAD_DELAY = --delay without
randomisation, CONCURRENT_REQUESTS = --concurrency (Trawler's default 256),
CONCURRENT_REQUESTS_PER_DOMAIN 1; everything else at Scrapy's defaults.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling bench modules

import access_log  # noqa: E402
import procstat  # noqa: E402
import run_crawl_bench as bench  # noqa: E402

ROOT = bench.ROOT
SPIDER = ROOT / "bench/scrapy_peer/spider.py"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=39, help="/p/ pages per host")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--nginx-workers", default="1")
    parser.add_argument("--concurrency", type=int, default=256, help="CONCURRENT_REQUESTS")
    parser.add_argument("--delay", type=float, default=1.0, help="DOWNLOAD_DELAY (s)")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="SIGINT Scrapy then")
    parser.add_argument("--work", type=Path, default=ROOT / "bench/work/crawl")
    parser.add_argument("--venv", type=Path, default=ROOT / "bench/work/scrapy-venv")
    parser.add_argument("--keep-nginx", action="store_true", help="leave nginx running")
    parser.add_argument("--json-out", type=Path, help="also write the report as JSON here")
    return parser.parse_args(argv)


def scrapy_bin(env_dir: Path) -> Path:
    """Scrapy in its own venv, installed from PyPI the first time."""
    scrapy = env_dir / "bin/scrapy"
    if not scrapy.exists():
        venv.create(env_dir, with_pip=True)
        pip = [str(env_dir / "bin/python"), "-m", "pip", "install", "--quiet", "scrapy"]
        subprocess.run(pip, check=True)
    return scrapy


def scrapy_command(args: argparse.Namespace, scrapy: Path, feed: Path) -> list[str]:
    settings = {
        "ROBOTSTXT_OBEY": "True",
        "DOWNLOAD_DELAY": str(args.delay),
        "DOWNLOAD_DELAY_JITTER": "0",  # RANDOMIZE_DOWNLOAD_DELAY is deprecated (2.19)
        "CONCURRENT_REQUESTS": str(args.concurrency),
        "CONCURRENT_REQUESTS_PER_DOMAIN": "1",
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": "False",
        "USER_AGENT": "scrapy-bench-peer",
    }
    cmd = [str(scrapy), "runspider", str(SPIDER), "-a", f"seeds_file={seeds_file(args)}"]
    cmd += ["-O", f"{feed}:jsonl"]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


def seeds_file(args: argparse.Namespace) -> Path:
    return args.work / "site/seeds.txt"


def count_items(feed: Path) -> tuple[int, dict[str, int]]:
    statuses: dict[str, int] = {}
    if not feed.exists():
        return 0, statuses
    items = 0
    with feed.open(encoding="utf-8") as lines:
        for line in lines:
            status = str(json.loads(line)["status"])
            statuses[status] = statuses.get(status, 0) + 1
            items += 1
    return items, statuses


def build_report(args, cmd, run, pages, statuses, requests) -> dict:  # noqa: ANN001
    line = access_log.timeline(requests)
    cpu_s = run.cpu_user_s + run.cpu_sys_s
    return {
        "crawler": "scrapy",
        "command": " ".join(cmd),
        "hosts": args.hosts,
        "pages_per_host": args.pages,
        "concurrency": args.concurrency,
        "pages_stored": pages,
        "status": statuses,
        "requests_logged": line.requests,
        "robots_requests": line.robots_requests,
        "wall_s": round(run.wall_s, 2),
        "pages_per_s_overall": round(pages / run.wall_s, 1),
        "pages_per_s_steady": round(access_log.steady_rate(line.page_done_times) or 0, 1),
        "pages_per_s_peak_5s": round(access_log.peak_rate(line.page_done_times), 1),
        "cpu_s_per_1k_pages": round(cpu_s / pages * 1000, 3) if pages else None,
        "crawler_cores_busy_avg": round(cpu_s / run.wall_s, 2),
        "peak_rss_mb": round(run.max_rss_kb / 1024, 1),
        "exit_code": run.exit_code,
        "stopped_by_max_seconds": run.stopped_by_bench,
        "politeness": bench.asdict(access_log.check_politeness(requests, args.delay)),
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.work = args.work.resolve()
    bench.raise_fd_limit()
    args.work.mkdir(parents=True, exist_ok=True)
    bench.lock_work_dir(args.work)
    scrapy = scrapy_bin(args.venv.resolve())
    bench.nginx("start", args)
    procstat.prioritise_nginx(args.work / "site")
    feed = Path(tempfile.mkdtemp(prefix="scrapy-", dir=args.work)) / "items.jsonl"
    try:
        cmd = scrapy_command(args, scrapy, feed)
        run = bench.run_child(cmd, args.max_seconds, None, None)
        requests = access_log.read_log(args.work / "site/logs/access.log")
    finally:
        if not args.keep_nginx:
            bench.nginx("stop", args)
    pages, statuses = count_items(feed)
    report = build_report(args, cmd, run, pages, statuses, requests)
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    subprocess.run(["rm", "-rf", str(feed.parent)], check=True)


if __name__ == "__main__":
    main()
