"""Distributed-mode benchmark: 1, 2 and 4 workers on one Redis and one PostgreSQL.

    .venv/bin/python bench/run_distributed_bench.py [--workers 1 2 4] [--hosts 1000] [--pages 20]
        [--port 8950] [--work bench/work/dist] [--json-out bench/work/dist.json]

A benchmark, not a test. It serves the generated web with nginx
(bench/nginx.sh, its own port and site directory), starts a redis-server and
a PostgreSQL cluster on free loopback ports (tests/servers.py), and for each
worker count N:

- FLUSHALL and CONFIG RESETSTAT on Redis, a fresh PostgreSQL database;
- ``trawler submit`` the site's seeds (--allow-private --scope any --delay 1
  --no-sitemaps --concurrency C);
- starts N ``trawler worker --exit-when-idle -q`` processes at once and waits
  for all of them (SIGINT after --max-seconds, SIGKILL 15 s later);

then reports:

- pages stored (``trawler stats --job ID --json``), wall time from the first
  worker's start to the last one's exit, pages/s;
- the workers' CPU: every process in the workers' sessions (the worker and
  its forkserver and parse processes), sampled from /proc every 0.5 s, with
  wait4's final rusage for the workers themselves; CPU s per 1,000 pages;
- Redis: ``INFO commandstats`` calls per page, scripts (EVALSHA) and every
  command (those run inside the scripts are counted too), and Redis's own CPU
  (``INFO cpu`` deltas) per 1,000 pages; used_memory at the end;
- PostgreSQL's and nginx's CPU (/proc, including reaped children) and the
  whole machine's (/proc/stat), so other load on the box shows;
- politeness from nginx's access log for this run (bench/access_log.py): the
  minimum start-to-start gap per host across all workers, gaps under --delay,
  requests in flight per host; and how many robots.txt requests were made
  (each worker keeps its own robots.txt cache).

On a 2-core machine, nginx, Redis, PostgreSQL and all the workers share two
cores: more workers than cores compete for them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/access_log.py
sys.path.insert(0, str(ROOT))  # tests/servers.py

import access_log  # noqa: E402
import redis  # noqa: E402
from procstat import code_version  # noqa: E402

from tests.servers import PostgresServer, RedisServer, start_postgres, start_redis  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
TRAWLER = str(ROOT / ".venv/bin/trawler")
STOP_GRACE_S = 15.0
# Commands the benchmark itself sends between RESETSTAT and the measurement.
OWN_COMMANDS = ("config|resetstat", "info", "flushall", "ping", "client|setinfo")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=20, help="/p/ pages per host")
    parser.add_argument("--port", type=int, default=8950)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=90,
        help="per worker; above ~100 a worker dies of redis-py's MaxConnectionsError"
        " (its asyncio pool allows 100 connections and does not wait)",
    )
    parser.add_argument("--max-seconds", type=float, default=120.0, help="SIGINT workers then")
    parser.add_argument("--work", type=Path, default=ROOT / "bench/work/dist")
    parser.add_argument("--keep-nginx", action="store_true")
    parser.add_argument("--json-out", type=Path)
    return parser.parse_args(argv)


# -- /proc ----------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def proc_cpu_s(pid: int, children: bool = False) -> float:
    """user + sys of a live process; with ``children`` also of its reaped children."""
    try:
        f = _stat_fields(pid)
    except OSError:
        return 0.0
    ticks = int(f[11]) + int(f[12])  # utime, stime
    if children:
        ticks += int(f[13]) + int(f[14])  # cutime, cstime
    return ticks / CLK_TCK


def tree_cpu_s(root_pid: int | None) -> float:
    """CPU of a server: its master (with reaped children) plus the live children."""
    if root_pid is None:
        return 0.0
    total = proc_cpu_s(root_pid, children=True)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(_stat_fields(int(entry))[1]) == root_pid:
                    total += proc_cpu_s(int(entry))
    return total


def machine_busy_s() -> float:
    with open("/proc/stat", encoding="ascii") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (
            int(v) / CLK_TCK for v in stat.readline().split()[1:9]
        )
    return user + nice + system + irq + softirq + steal


def nginx_pid(site: Path) -> int | None:
    try:
        return int((site / "nginx.pid").read_text())
    except (OSError, ValueError):
        return None


# -- servers --------------------------------------------------------------------------


def nginx(action: str, args: argparse.Namespace) -> None:
    cmd = [str(ROOT / "bench/nginx.sh"), action, "--out", str(args.work / "site")]
    if action == "start":
        cmd += ["--hosts", str(args.hosts), "--pages", str(args.pages), "--port", str(args.port)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def redis_info(client: redis.Redis, section: str) -> dict:
    return client.info(section)


def redis_cpu_s(client: redis.Redis) -> float:
    cpu = redis_info(client, "cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def command_calls(client: redis.Redis) -> dict[str, int]:
    stats = redis_info(client, "commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    for own in OWN_COMMANDS:
        calls.pop(own, None)
    return dict(sorted(calls.items(), key=lambda kv: -kv[1]))


# -- one run --------------------------------------------------------------------------


def submit(args: argparse.Namespace, redis_url: str, pg_url: str) -> tuple[str, list[str]]:
    cmd = [TRAWLER, "submit", "--redis", redis_url, "--postgres", pg_url]
    cmd += ["--seeds-file", str(args.work / "site/seeds.txt"), "--allow-private"]
    cmd += ["--scope", "any", "--delay", str(args.delay), "--no-sitemaps"]
    cmd += ["--concurrency", str(args.concurrency)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip().splitlines()[-1], cmd


def session_cpu_s(sessions: set[int], seen: dict[int, float]) -> None:
    """Record the CPU of every live process in the workers' sessions (parse processes too).

    The parse processes are forked by a multiprocessing forkserver, not by the
    worker, so the worker's rusage does not include them: sample /proc instead.
    ``seen`` keeps the last value per pid; a process that exits loses at most
    one sampling interval.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat_fields(int(entry))
            if int(fields[3]) in sessions:  # field 6: session id
                seen[int(entry)] = (int(fields[11]) + int(fields[12])) / CLK_TCK


def run_workers(n: int, redis_url: str, pg_url: str, warc_root: Path, logs: Path,
                max_seconds: float) -> dict:  # fmt: skip
    """Start n workers at once; reap each with wait4 (its rusage); stop them if too slow."""
    procs: dict[int, subprocess.Popen] = {}
    started, start_epoch = time.monotonic(), time.time()
    for i in range(n):
        cmd = [TRAWLER, "worker", "--redis", redis_url, "--postgres", pg_url]
        cmd += ["--warc-dir", str(warc_root / f"w{i}"), "--worker-id", f"bench-w{i}"]
        cmd += ["--exit-when-idle", "-q"]
        log = (logs / f"worker-{i}.log").open("wb")
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        procs[proc.pid] = proc
    sessions, seen = set(procs), {}
    user = sys_ = 0.0
    exits, stopped, killed = {}, False, False
    next_sample = 0.0
    while len(exits) < n:
        if time.monotonic() >= next_sample:
            session_cpu_s(sessions, seen)
            next_sample = time.monotonic() + 0.5
        for pid, proc in procs.items():
            if pid in exits:
                continue
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got:
                proc.returncode = os.waitstatus_to_exitcode(status)
                exits[pid] = (proc.returncode, round(time.monotonic() - started, 2))
                user += usage.ru_utime
                sys_ += usage.ru_stime
                seen[pid] = usage.ru_utime + usage.ru_stime
        elapsed = time.monotonic() - started
        if elapsed > max_seconds and not stopped:
            for pid, proc in procs.items():
                if pid not in exits:
                    proc.send_signal(signal.SIGINT)
            stopped = True
        if elapsed > max_seconds + STOP_GRACE_S and not killed:
            for pid, proc in procs.items():
                if pid not in exits:
                    proc.kill()
            killed = True
        time.sleep(0.05)
    session_cpu_s(sessions, seen)
    return {
        "wall_s": time.monotonic() - started,
        "started_at": start_epoch,
        "cpu_user_s": user,
        "cpu_sys_s": sys_,
        "cpu_all_s": sum(seen.values()),  # workers + their parse processes
        "processes": len(seen),
        "exits": [exits[pid] for pid in procs],  # (exit code, seconds after start)
        "stopped_by_bench": stopped,
    }


def job_stats(redis_url: str, pg_url: str, job_id: str) -> dict:
    cmd = [TRAWLER, "stats", "--redis", redis_url, "--postgres", pg_url, "--job", job_id, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def log_slice(log: Path, offset: int, out: Path) -> None:
    """Copy this run's part of nginx's access log (from ``offset``) to ``out``."""
    with log.open("rb") as src:
        src.seek(offset)
        out.write_bytes(src.read())


def one_run(
    n: int,
    args: argparse.Namespace,
    redis_srv: RedisServer,
    pg: PostgresServer,
) -> dict:
    client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    client.flushall()
    pg_url = pg.create_database(f"bench_w{n}_{int(time.time())}")
    job_id, submit_cmd = submit(args, redis_srv.url, pg_url)
    warc_root = Path(tempfile.mkdtemp(prefix=f"w{n}-", dir=args.work))
    logs = args.work / f"logs-w{n}"
    logs.mkdir(exist_ok=True)
    site = args.work / "site"
    access = site / "logs/access.log"
    log_offset = access.stat().st_size if access.exists() else 0  # this run's lines only
    client.config_resetstat()  # after submit: count the crawl only
    redis_cpu0, nginx0 = redis_cpu_s(client), tree_cpu_s(nginx_pid(site))
    pg0, machine0 = tree_cpu_s(pg.process.pid), machine_busy_s()
    loadavg = Path("/proc/loadavg").read_text().split()[:3]
    run = run_workers(n, redis_srv.url, pg_url, warc_root, logs, args.max_seconds)
    redis_cpu = redis_cpu_s(client) - redis_cpu0
    nginx_s = tree_cpu_s(nginx_pid(site)) - nginx0
    pg_s = tree_cpu_s(pg.process.pid) - pg0
    machine_s = machine_busy_s() - machine0
    calls = command_calls(client)
    memory = redis_info(client, "memory")
    keyspace = client.dbsize()
    client.close()
    stats = job_stats(redis_srv.url, pg_url, job_id)
    run_log = warc_root.parent / f"access-w{n}.log"
    log_slice(access, log_offset, run_log)
    requests = access_log.read_log(run_log)
    line = access_log.timeline(requests)
    pages = stats["pages_stored"]
    cpu_s = run["cpu_all_s"]  # workers and their parse processes
    main_s = run["cpu_user_s"] + run["cpu_sys_s"]
    scripts = calls.get("evalsha", 0) + calls.get("eval", 0)
    total = sum(calls.values())
    warc_bytes = sum(p.stat().st_size for p in warc_root.rglob("*.warc.gz*"))
    report = {
        "workers": n,
        "job": job_id,
        "submit_command": " ".join(submit_cmd),
        "pages_stored": pages,
        "errors": stats.get("errors"),
        "urls_queued_after": stats.get("urls_queued"),
        "urls_leased_after": stats.get("urls_leased"),
        "wall_s": round(run["wall_s"], 2),
        "pages_per_s": round(pages / run["wall_s"], 1),
        "pages_per_s_steady": round(access_log.steady_rate(line.page_done_times) or 0, 1),
        "pages_per_s_peak_5s": round(access_log.peak_rate(line.page_done_times), 1),
        "worker_cpu_s": round(cpu_s, 2),
        "worker_cpu_s_per_1k_pages": round(cpu_s / pages * 1000, 3) if pages else None,
        "worker_cores_avg": round(cpu_s / run["wall_s"], 2),
        "worker_main_cpu_s": round(main_s, 2),  # the worker processes alone (wait4)
        "worker_processes": run["processes"],
        "redis_cpu_s": round(redis_cpu, 2),
        "redis_cpu_s_per_1k_pages": round(redis_cpu / pages * 1000, 3) if pages else None,
        "redis_scripts_per_page": round(scripts / pages, 2) if pages else None,
        "redis_commands_per_page": round(total / pages, 2) if pages else None,
        "redis_commands_in_scripts_per_page": round((total - scripts) / pages, 2)
        if pages
        else None,
        "redis_calls": calls,
        "redis_used_memory_mb": round(memory["used_memory"] / 2**20, 1),
        "redis_keys_after": keyspace,
        "postgres_cpu_s": round(pg_s, 2),
        "nginx_cpu_s": round(nginx_s, 2),
        "machine_busy_s": round(machine_s, 2),
        "machine_cores_avg": round(machine_s / run["wall_s"], 2),
        "other_cpu_s": round(machine_s - cpu_s - redis_cpu - pg_s - nginx_s, 2),
        "requests_logged": line.requests,
        "robots_requests": line.robots_requests,
        "politeness": asdict(access_log.check_politeness(requests, args.delay)),
        "warc_mb": round(warc_bytes / 2**20, 1),
        "exits": run["exits"],
        "stopped_by_bench": run["stopped_by_bench"],
        "loadavg_before": loadavg,
    }
    subprocess.run(["rm", "-rf", str(warc_root)], check=True)
    return report


def lock_work_dir(work: Path) -> int:
    fd = os.open(work / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"another benchmark is running in {work}")
    return fd


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    lock_work_dir(args.work)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(65536, hard) if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    nginx("start", args)
    redis_srv = start_redis(args.work / "redis")
    pg = start_postgres()
    reports = []
    try:
        for n in args.workers:
            report = one_run(n, args, redis_srv, pg)
            reports.append(report)
            print(json.dumps({k: v for k, v in report.items() if k != "redis_calls"}), flush=True)
    finally:
        redis_srv.stop()
        pg.stop()
        if not args.keep_nginx:
            nginx("stop", args)
    result = {
        "commit": code_version(ROOT / ".venv/bin/python")["commit"],
        "hosts": args.hosts,
        "pages_per_host": args.pages,
        "nproc": os.cpu_count(),
        "redis": "appendonly yes, appendfsync everysec (tests/servers.py)",
        "runs": reports,
    }
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
