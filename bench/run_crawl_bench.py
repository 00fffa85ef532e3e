"""Throughput benchmark: crawl a generated web served by nginx, at 1 request/s per host.

    .venv/bin/python bench/run_crawl_bench.py [--hosts 2000] [--pages 30] [--concurrency N]
        [--max-seconds 300] [--max-pages N] [--profile cpu|gil] [--json-out FILE]

Starts nginx with bench/nginx.sh (which installs it when missing), runs
``trawler crawl`` on every host's home page as a child process with robots.txt,
dedup and WARC+SQLite storage on (they always are), samples the child's CPU
time and RSS from /proc while it runs, then reports:

- pages stored (``trawler stats --json``), wall time, pages/s overall and in
  steady state (10%-90% of page completions in nginx's log: leaves out the
  robots.txt start and the tail), peak 5 s rate;
- CPU seconds (user + sys, from wait4's rusage) per 1,000 pages, peak RSS;
- nginx's CPU and the whole machine's, so other load on the box shows; and the
  CPU ms of a fixed piece of work before the run (``machine_speed_ms``), so a
  machine slower that day shows too; and the crawl's interpreter (``python``:
  an optimised build of CPython costs ~11 % less CPU a page than a plain one);
- politeness from nginx's access log (bench/access_log.py): per host, the
  minimum start-to-start gap and how many gaps are shorter than --delay.

A web of H hosts at 1 request/s per host cannot go faster than H requests/s,
so the default 2,000 hosts leaves room above the 1,000 pages/s target.
With --profile, py-spy (``pip install py-spy``) samples the crawler for the
whole run and bench/profile_summary.py buckets the samples.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling bench modules

import access_log  # noqa: E402
from procstat import (  # noqa: E402
    code_version,
    interpreter,
    machine_cpu_s,
    machine_speed_ms,
    nginx_cpu_s,
    prioritise_nginx,
    proc_cpu_s,
    proc_hwm_kb,
    tree_rss_kb,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_INTERVAL_S = 0.5
STOP_GRACE_S = 15.0
UVLOOP_MAIN = (
    "import asyncio, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy());"
    " from trawler.cli import main; main()"
)


@dataclass(slots=True)
class Sample:
    elapsed_s: float
    cpu_s: float  # user + sys of the crawler so far
    rss_kb: int
    tree_rss_kb: int = 0  # the crawler and its parser processes together, now
    loop_cpu_s: float = 0.0  # user + sys of the crawler's main thread (the event loop)


@dataclass(slots=True)
class ChildRun:
    wall_s: float
    cpu_user_s: float
    cpu_sys_s: float
    max_rss_kb: int  # wait4's ru_maxrss: the child's peak RSS
    exit_code: int
    stopped_by_bench: bool
    started_at: float  # epoch, to line up with nginx's log
    samples: list[Sample] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=30, help="/p/ pages per host")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--nginx-workers", default="1")
    parser.add_argument(
        "--concurrency", type=int, help="trawler --concurrency [trawler's default: 256]"
    )
    parser.add_argument("--delay", type=float, default=1.0, help="trawler --delay (s)")
    parser.add_argument(
        "--check-interval",
        type=float,
        help="politeness check: minimum start-to-start gap in s [--delay]; with --delay 0.5"
        " --check-interval 1 the check is shown to fail",
    )
    parser.add_argument("--max-seconds", type=float, default=300.0, help="SIGINT the crawl then")
    parser.add_argument("--max-pages", type=int, help="trawler --max-pages")
    parser.add_argument("--parse-processes", type=int, help="trawler --parse-processes")
    parser.add_argument(
        "--tdmrep", action="store_true", help="trawler --tdmrep: each host's tdmrep.json too"
    )
    parser.add_argument("--priority", choices=["depth", "importance"], help="trawler --priority")
    parser.add_argument("--work", type=Path, default=ROOT / "bench/work/crawl")
    parser.add_argument(
        "--profile",
        choices=["cpu", "gil"],
        help="sample the crawler with py-spy: every busy thread (cpu), or only the GIL holder",
    )
    parser.add_argument(
        "--uvloop",
        action="store_true",
        help="experiment: run the same CLI with uvloop's event loop policy installed",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="experiment: sys.setswitchinterval(S) in the crawler before it starts",
    )
    parser.add_argument("--keep-nginx", action="store_true", help="leave nginx running")
    parser.add_argument("--keep-data", action="store_true", help="keep the crawl's data dir")
    parser.add_argument("--json-out", type=Path, help="also write the report as JSON here")
    return parser.parse_args(argv)


def raise_fd_limit() -> int:
    """Sockets: --concurrency connections plus keep-alive ones; children inherit this."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(65536, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def nginx(action: str, args: argparse.Namespace) -> None:
    site = args.work / "site"
    cmd = [str(ROOT / "bench/nginx.sh"), action, "--out", str(site)]
    if action == "start":
        cmd += ["--hosts", str(args.hosts), "--pages", str(args.pages)]
        cmd += ["--port", str(args.port), "--workers", args.nginx_workers]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def crawl_command(args: argparse.Namespace, data: Path) -> list[str]:
    seeds = args.work / "site/seeds.txt"
    cmd = [str(ROOT / ".venv/bin/trawler")]
    if args.uvloop:  # asyncio.run() in cli.py then builds a uvloop loop; trawler/ unchanged
        cmd = [str(ROOT / ".venv/bin/python"), "-c", UVLOOP_MAIN]
    elif args.switch_interval is not None:
        prelude = f"import sys; sys.setswitchinterval({args.switch_interval});"
        main = prelude + " from trawler.cli import main; main()"
        cmd = [str(ROOT / ".venv/bin/python"), "-c", main]
    cmd += ["crawl", "--seeds-file", str(seeds)]
    cmd += ["--data", str(data), "--allow-private", "--scope", "any", "--delay", str(args.delay)]
    cmd += ["-q"] + (["--concurrency", str(args.concurrency)] if args.concurrency else [])
    if args.max_pages:
        cmd += ["--max-pages", str(args.max_pages)]
    if args.parse_processes is not None:
        cmd += ["--parse-processes", str(args.parse_processes)]
    if args.priority:
        cmd += ["--priority", args.priority]
    return cmd + (["--tdmrep"] if args.tdmrep else [])


def start_profiler(pid: int, out: Path, mode: str) -> subprocess.Popen[bytes]:
    """py-spy, non-blocking (it does not pause the crawler), 100 samples/s, per thread.

    ``gil`` samples only the thread holding the GIL: the time that competes
    for the one core the event loop can use.
    """
    cmd = [str(ROOT / ".venv/bin/py-spy"), "record", "--pid", str(pid), "--nonblocking"]
    cmd += ["--threads", "--subprocesses", "--rate", "100", "--format", "raw", "--output", str(out)]
    cmd += ["--gil"] if mode == "gil" else []
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_child(
    cmd: list[str], max_seconds: float, profile_out: Path | None, profile_mode: str | None
) -> ChildRun:
    """Run the crawl, sampling it; SIGINT (a clean stop) at max_seconds, SIGKILL later."""
    started_at, start = time.time(), time.monotonic()
    child = subprocess.Popen(cmd, cwd=ROOT)
    try:
        profiler = start_profiler(child.pid, profile_out, profile_mode) if profile_out else None
    except OSError:  # no py-spy: an orphaned crawler would crawl into the next run's nginx
        child.kill()
        child.wait()
        raise
    samples, stopped, killed = [], False, False
    # Woken by the exit itself, not the next sample's tick: sleeping the interval
    # counted up to 0.5 s after the crawl had exited into its wall time (~1 %).
    exited = os.pidfd_open(child.pid)
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:  # reaped here, with its rusage; Popen must not wait again
            child.returncode = os.waitstatus_to_exitcode(status)
            break
        elapsed = time.monotonic() - start
        with contextlib.suppress(OSError):  # it may exit between wait4 and the read
            samples.append(Sample(elapsed, proc_cpu_s(child.pid), proc_hwm_kb(child.pid),
                                  tree_rss_kb(child.pid),
                                  proc_cpu_s(child.pid, child.pid)))  # fmt: skip
        if elapsed > max_seconds and not stopped:
            child.send_signal(signal.SIGINT)
            stopped = True
        if elapsed > max_seconds + STOP_GRACE_S and not killed:
            child.kill()
            killed = True
        select.select([exited], [], [], SAMPLE_INTERVAL_S)
    wall = time.monotonic() - start
    os.close(exited)
    if profiler is not None:
        _, err = profiler.communicate(timeout=60)
        if profiler.returncode:
            print(f"py-spy failed: {err.decode(errors='replace')}", file=sys.stderr)
    return ChildRun(
        wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss, child.returncode, stopped,
        started_at, samples,
    )  # fmt: skip


def trawler_stats(data: Path) -> dict:
    out = subprocess.run(
        [str(ROOT / ".venv/bin/trawler"), "stats", "--data", str(data), "--json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def steady_cpu_per_1k(run: ChildRun, done_times: list[float]) -> float | None:
    """CPU s per 1,000 pages between the 10% and 90% page completions."""
    n = len(done_times)
    if n < 10 or len(run.samples) < 2:
        return None
    t10, t90 = done_times[int(n * 0.1)], done_times[int(n * 0.9) - 1]
    cpu10 = _cpu_at(run, t10 - run.started_at)
    cpu90 = _cpu_at(run, t90 - run.started_at)
    pages = int(n * 0.9) - 1 - int(n * 0.1)
    return (cpu90 - cpu10) / pages * 1000 if pages > 0 else None


def _cpu_at(run: ChildRun, elapsed_s: float) -> float:
    """CPU seconds at ``elapsed_s``, linearly interpolated between samples."""
    samples = run.samples
    for before, after in zip(samples, samples[1:], strict=False):
        if after.elapsed_s >= elapsed_s:
            share = (elapsed_s - before.elapsed_s) / (after.elapsed_s - before.elapsed_s)
            return before.cpu_s + share * (after.cpu_s - before.cpu_s)
    return samples[-1].cpu_s


def build_report(args, cmd, run, stats, requests, nginx_s, machine_s) -> dict:  # noqa: ANN001
    pages = stats["pages_stored"]
    line = access_log.timeline(requests)
    cpu_s = run.cpu_user_s + run.cpu_sys_s
    return {
        "command": " ".join(cmd),
        "hosts": args.hosts,
        "pages_per_host": args.pages,
        "concurrency": args.concurrency or "default",
        "pages_stored": pages,
        "errors": stats["errors"],
        "status": stats["status"],
        "requests_logged": line.requests,
        "robots_requests": line.robots_requests,
        # Requests that opened a connection (nginx's $connection_requests is 1), in all
        # and where the host's kept one could have served (access_log.connection_reuse).
        "connections": asdict(access_log.connection_reuse(requests)),
        "wall_s": round(run.wall_s, 2),
        "crawl_span_s": round(line.last_done - line.first_arrival, 2),
        # Before the first request (imports, seeds, parser processes) and after the
        # last answer (final commit, WARC and seen set closed, processes joined).
        "startup_s": round(line.first_arrival - run.started_at, 2),
        "shutdown_s": round(run.started_at + run.wall_s - line.last_done, 2),
        "pages_per_s_overall": round(pages / run.wall_s, 1),
        "pages_per_s_steady": round(access_log.steady_rate(line.page_done_times) or 0, 1),
        "pages_per_s_peak_5s": round(access_log.peak_rate(line.page_done_times), 1),
        "cpu_user_s": round(run.cpu_user_s, 2),
        "cpu_sys_s": round(run.cpu_sys_s, 2),
        "cpu_s_per_1k_pages": round(cpu_s / pages * 1000, 3) if pages else None,
        "cpu_s_per_1k_pages_steady": _round(steady_cpu_per_1k(run, line.page_done_times)),
        # The main process (event loop, writer thread) apart from its parser processes:
        # its CPU at the last sample, ≤ 0.5 s before it exited.
        "cpu_s_main_process": round(run.samples[-1].cpu_s, 2) if run.samples else None,
        "cpu_s_other_processes": round(cpu_s - run.samples[-1].cpu_s, 2) if run.samples else None,
        # The main process split: its main thread (the event loop) and the rest (the
        # writer, the WAL checkpoint and thread-pool threads), at the same sample.
        "cpu_s_event_loop_thread": round(run.samples[-1].loop_cpu_s, 2) if run.samples else None,
        "cpu_s_other_threads": (
            round(run.samples[-1].cpu_s - run.samples[-1].loop_cpu_s, 2) if run.samples else None
        ),
        "crawler_cores_busy_avg": round(cpu_s / run.wall_s, 2),
        "peak_rss_mb": round(run.max_rss_kb / 1024, 1),
        # All the crawler's processes at once, sampled every 0.5 s (peak_rss_mb is the
        # largest single process's, from wait4).
        "peak_tree_rss_mb": round(max((s.tree_rss_kb for s in run.samples), default=0) / 1024, 1),
        # Every 10 s: [seconds since start, the main process's peak RSS so far, all the
        # crawler's processes' RSS now] (MB): when memory grows, not only how far.
        "rss_timeline_mb": [
            [round(s.elapsed_s), round(s.rss_kb / 1024), round(s.tree_rss_kb / 1024)]
            for s in run.samples[:: round(10 / SAMPLE_INTERVAL_S)]
        ],
        "nginx_cpu_s": round(nginx_s, 2),
        "machine_busy_cores_avg": round(machine_s["busy"] / run.wall_s, 2),
        "machine_cpu_s": {k: round(v, 2) for k, v in machine_s.items()},
        # softirq (loopback TCP), kernel threads, and anything else running on the box
        "other_cpu_s": round(machine_s["busy"] - cpu_s - nginx_s, 2),
        "exit_code": run.exit_code,
        "stopped_by_max_seconds": run.stopped_by_bench,
        "politeness": asdict(
            access_log.check_politeness(requests, args.check_interval or args.delay)
        ),
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def lock_work_dir(work: Path) -> int:
    """Two runs on one --work directory would restart each other's nginx: refuse."""
    fd = os.open(work / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"another benchmark is running in {work} (use --work and --port to run apart)")
    return fd  # held until the process exits


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.work = args.work.resolve()
    raise_fd_limit()
    args.work.mkdir(parents=True, exist_ok=True)
    lock_work_dir(args.work)
    loadavg = Path("/proc/loadavg").read_text().split()[:3]
    speed_ms = machine_speed_ms()  # before nginx and the crawl: the machine idle
    # Before the run: the child imports trawler/ as it is now.
    version = code_version(ROOT / ".venv/bin/python")
    nginx("start", args)
    prioritise_nginx(args.work / "site")
    data = Path(tempfile.mkdtemp(prefix="data-", dir=args.work))
    profile_out = args.work / f"profile-{args.profile}.txt" if args.profile else None
    try:
        cmd = crawl_command(args, data)
        nginx_before, machine_before = nginx_cpu_s(args.work / "site"), machine_cpu_s()
        run = run_child(cmd, args.max_seconds, profile_out, args.profile)
        nginx_s = nginx_cpu_s(args.work / "site") - nginx_before
        machine_after = machine_cpu_s()
        machine_s = {k: v - machine_before[k] for k, v in machine_after.items()}
        stats = trawler_stats(data)
        requests = access_log.read_log(args.work / "site/logs/access.log")
    finally:
        if not args.keep_nginx:
            nginx("stop", args)
    report = build_report(args, cmd, run, stats, requests, nginx_s, machine_s)
    report["loadavg_before"] = loadavg
    report["machine_speed_ms"] = speed_ms
    report["code"] = version
    report["python"] = interpreter(ROOT / ".venv/bin/python")
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if profile_out:
        print(f"py-spy samples: {profile_out} (bench/profile_summary.py {profile_out})")
    if not args.keep_data:
        subprocess.run(["rm", "-rf", str(data)], check=True)


if __name__ == "__main__":
    main()
