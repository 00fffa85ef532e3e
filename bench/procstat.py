"""What the benchmarks read from /proc: a process's CPU and memory, its children's,
the whole machine's CPU by kind, and nginx's processes (found from their pid files,
given priority over the crawler); and what ran: the interpreter, the code's tree and
commit. Linux only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import time
import zlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent  # the checkout the bench scripts are in

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int, thread: int | None = None) -> float:
    """user + sys CPU seconds of a live process (all its threads), or of one of its
    threads (``thread``: its id; the main thread's is the pid), from /proc."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    with open(path, encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14, 15


def tree_rss_kb(pid: int) -> int:
    """RSS of a process and its descendants (parser processes), summed, from /proc."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{current}/status", encoding="ascii") as status:
                total += next((int(line.split()[1]) for line in status
                               if line.startswith("VmRSS:")), 0)  # fmt: skip
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as kids:
                    todo.extend(int(kid) for kid in kids.read().split())
    return total


def proc_hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def machine_cpu_s() -> dict[str, float]:
    """CPU seconds the whole machine spent so far, by kind, all cores (/proc/stat).

    Loopback TCP is largely processed in softirq, which the kernel charges to
    no process: it shows here, not in the crawler's or nginx's times.
    """
    with open("/proc/stat", encoding="ascii") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (
            int(v) / CLK_TCK for v in stat.readline().split()[1:9]
        )
    kinds = {"user": user + nice, "system": system, "irq_softirq": irq + softirq, "steal": steal}
    kinds["busy"] = sum(kinds.values())
    return kinds


def nginx_pids(site: Path) -> list[int]:
    """The masters and workers of nginx's instances (nginx.pid, nginx-1.pid, ...; none if
    nginx is gone)."""
    masters = set()
    for pid_file in site.glob("nginx*.pid"):
        with contextlib.suppress(OSError, ValueError):
            masters.add(int(pid_file.read_text()))
    pids = list(masters)
    for entry in os.listdir("/proc") if masters else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) in masters:
                        pids.append(int(entry))
            except (OSError, ValueError):
                continue
    return pids


def nginx_cpu_s(site: Path) -> float:
    """CPU seconds of nginx's master and workers so far (0 if nginx is gone)."""
    return sum(proc_cpu_s(pid) for pid in nginx_pids(site))


def prioritise_nginx(site: Path) -> None:
    """Schedule nginx ahead of the crawler, as the tests do their servers
    (tests/servers.py ``prioritise``): politeness is read from nginx's arrival
    times, and an nginx starved of CPU by the crawler on the same two cores logs
    some requests late, so the next gap looks short (seen: 85 gaps of
    0.987–0.999 s at --delay 1 with two parser processes, 0 with nginx ahead).
    Root may raise priority; elsewhere nginx keeps the default.

    nginx daemonises into a session of its own, and with sched_autogroup (on in
    Debian's kernels) each session is scheduled as one group: a process's nice
    only orders it within its group. The group's nice (/proc/PID/autogroup) is
    what weighs against the crawler's session; without it nginx was still read
    up to 44 ms late (the crawler's own send times, 1.023 s apart at least,
    logged against nginx's arrivals: bench/RESULTS.md, session 33)."""
    for pid in nginx_pids(site):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, -10)
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/autogroup").write_text("-10")


def machine_speed_ms() -> float:
    """CPU ms of a fixed piece of work (a dict, a sort, str formatting, zlib), best
    of 5: the same whatever Trawler's version, so runs of different days can be told
    apart from a machine that is slower that day (it drifts: the same commit measured
    0.607-0.666 CPU-s per 1,000 pages one day and 0.697-0.821 the next, bench/RESULTS.md,
    issue 14, session 38). Measured before the run, with the machine idle."""
    data = bytes(range(256)) * 256
    best = math.inf
    for _ in range(5):
        started = time.thread_time()
        counts: dict[str, int] = {}
        for i in range(20_000):
            key = f"host-{i % 997}"
            counts[key] = counts.get(key, 0) + i
        sorted(counts.items(), key=lambda item: item[1])
        zlib.compress(data, 6)
        best = min(best, time.thread_time() - started)
    return round(best * 1000, 2)


# Run by the crawl's own interpreter (the venv's): its build moves the CPU a page by
# ~12 % (a source build without PGO/LTO, libpython shared, against Debian's:
# bench/RESULTS.md, issue 14, session 40), so every report names it.
_INTERPRETER = """
import json, os, platform, sys
with open("/proc/self/maps") as maps:
    shared = any("libpython" in line for line in maps)
print(json.dumps({"version": platform.python_version(),
                  "executable": os.path.realpath(sys.executable),
                  "libpython_shared": shared}))
"""


def interpreter(python: Path) -> dict[str, object]:
    """``python``'s version, real executable, and whether libpython is a shared
    library loaded beside it (slower calls) rather than linked in."""
    out = subprocess.run([str(python), "-c", _INTERPRETER], check=True, capture_output=True)
    return json.loads(out.stdout)


def code_version(python: Path) -> dict[str, object]:
    """The commit benchmarked, and trawler/ files changed since (others edit in parallel):
    of the tree the crawl imports ``trawler`` from (``PYTHONPATH`` may name a worktree)."""
    tree = _trawler_tree(python)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "trawler"], cwd=tree, capture_output=True, text=True
    )  # fmt: skip
    return {
        "tree": str(tree),
        "commit": head.stdout.decode().strip(),
        "trawler_uncommitted": sorted(line[3:] for line in dirty.stdout.splitlines()),
    }


def _trawler_tree(python: Path) -> Path:
    """The checkout whose ``trawler`` package ``python`` imports."""
    found = subprocess.run(
        [str(python), "-c", "import trawler; print(trawler.__file__)"],
        capture_output=True, text=True, cwd="/",
    )  # fmt: skip
    path = found.stdout.strip()
    return Path(path).parent.parent if found.returncode == 0 and path else _ROOT
