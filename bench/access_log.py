"""Read the benchmark's nginx access log: politeness per host and the crawl's timeline.

    .venv/bin/python bench/access_log.py bench/work/crawl/site/logs/access.log [--delay 1]

The log is JSON lines in bench/make_nginx_site.py's format. nginx writes
``$msec`` when the response is done, so a request *arrived* at ``t - rt``;
politeness is about arrivals (start-to-start), so that is what the gaps use.
Both fields have millisecond resolution.

Run on a crawl with ``--delay 0.5`` (bench/run_crawl_bench.py --delay 0.5)
to see the check fail: it then reports gaps below 1 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(slots=True)
class Request:
    arrived_at: float  # epoch seconds: t - rt
    done_at: float  # epoch seconds: t
    host: str
    path: str
    status: int
    # The request's number on its connection (nginx's $connection_requests): 1 on a
    # new connection; 0 in logs written before the field.
    connection_requests: int = 0


@dataclass(slots=True)
class Politeness:
    hosts: int
    gaps: int
    min_gap_s: float | None
    min_gap_host: str | None
    gaps_below_delay: int  # start-to-start gaps shorter than the configured delay
    gaps_below_delay_2ms: int  # ... by more than the log's rounding (2 ms)
    max_in_flight_per_host: int  # overlapping requests on one host (must be 1)


@dataclass(slots=True)
class ConnectionReuse:
    requests: int
    on_new_connections: int  # nginx's $connection_requests is 1
    # A host's requests that came less than idle_s after its previous one was done:
    # its kept connection could have carried them (the crawler keeps one idle_s).
    soon_after: int
    soon_after_on_new_connections: int


@dataclass(slots=True)
class Timeline:
    requests: int
    robots_requests: int
    pages: int  # requests other than robots.txt
    first_arrival: float
    last_done: float
    page_done_times: list[float]  # sorted


def read_log(path: Path) -> list[Request]:
    requests = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            done_at, duration_s = float(entry["t"]), float(entry["rt"])
            requests.append(
                Request(
                    done_at - duration_s,
                    done_at,
                    entry["host"],
                    entry["path"],
                    entry["status"],
                    entry.get("cr", 0),
                )
            )
    return requests


def _by_host(requests: list[Request]) -> dict[str, list[Request]]:
    """Each host's requests in order of arrival."""
    by_host: dict[str, list[Request]] = defaultdict(list)
    for request in requests:
        by_host[request.host].append(request)
    for host_requests in by_host.values():
        host_requests.sort(key=lambda r: r.arrived_at)
    return by_host


def check_politeness(requests: list[Request], delay_s: float) -> Politeness:
    """Start-to-start gaps per host, and overlap of requests to one host."""
    gaps = below = below_2ms = max_in_flight = 0
    min_gap: tuple[float, str] | None = None
    by_host = _by_host(requests)
    for host, host_requests in by_host.items():
        max_in_flight = max(max_in_flight, _max_overlap(host_requests))
        for before, after in zip(host_requests, host_requests[1:], strict=False):
            gap = after.arrived_at - before.arrived_at
            gaps += 1
            below += gap < delay_s
            # t and rt are each rounded to 1 ms, so an arrival is known to +-1 ms.
            below_2ms += gap < delay_s - 0.002
            if min_gap is None or gap < min_gap[0]:
                min_gap = (gap, host)
    return Politeness(
        hosts=len(by_host),
        gaps=gaps,
        min_gap_s=round(min_gap[0], 3) if min_gap else None,
        min_gap_host=min_gap[1] if min_gap else None,
        gaps_below_delay=below,
        gaps_below_delay_2ms=below_2ms,
        max_in_flight_per_host=max_in_flight,
    )


def connection_reuse(requests: list[Request], idle_s: float = 15.0) -> ConnectionReuse:
    """How many requests opened a connection, overall and where the host's kept one
    could have been used (connectors.py ``IDLE_S``, 15 s)."""
    soon = soon_new = 0
    for host_requests in _by_host(requests).values():
        for before, after in zip(host_requests, host_requests[1:], strict=False):
            if after.arrived_at - before.done_at < idle_s:
                soon += 1
                soon_new += after.connection_requests == 1
    return ConnectionReuse(
        requests=len(requests),
        on_new_connections=sum(r.connection_requests == 1 for r in requests),
        soon_after=soon,
        soon_after_on_new_connections=soon_new,
    )


def _max_overlap(host_requests: list[Request]) -> int:
    """Most requests to one host in flight at once (arrival-sorted input)."""
    worst, ends = 0, []
    for request in host_requests:
        ends = [end for end in ends if end > request.arrived_at]
        ends.append(request.done_at)
        worst = max(worst, len(ends))
    return worst


def timeline(requests: list[Request]) -> Timeline:
    page_done = sorted(r.done_at for r in requests if r.path != "/robots.txt")
    return Timeline(
        requests=len(requests),
        robots_requests=len(requests) - len(page_done),
        pages=len(page_done),
        first_arrival=min(r.arrived_at for r in requests),
        last_done=max(r.done_at for r in requests),
        page_done_times=page_done,
    )


def steady_rate(done_times: list[float], low: float = 0.1, high: float = 0.9) -> float | None:
    """Pages/s between the ``low`` and ``high`` quantiles of completion times.

    Leaves out the start (every host's robots.txt first, then one home page
    each) and the tail (the last hosts finishing their queues).
    """
    n = len(done_times)
    if n < 10:
        return None
    i, j = int(n * low), int(n * high) - 1
    span_s = done_times[j] - done_times[i]
    return (j - i) / span_s if span_s > 0 else None


def peak_rate(done_times: list[float], window_s: float = 5.0) -> float:
    """Highest pages/s over any ``window_s`` window (sorted input)."""
    best, start = 0, 0
    for end, t in enumerate(done_times):
        while t - done_times[start] > window_s:
            start += 1
        best = max(best, end - start + 1)
    return best / window_s


def gaps_by_position(requests: list[Request]) -> list[tuple[int, int, float, float]]:
    """(position, hosts, mean gap s, median arrival s from the first) of each host's
    n-th gap: where a crawl loses time against the bound (every gap = the delay)."""
    by_host: dict[str, list[float]] = defaultdict(list)
    for request in requests:
        by_host[request.host].append(request.arrived_at)
    start = min(r.arrived_at for r in requests)
    gaps: dict[int, list[float]] = defaultdict(list)
    at: dict[int, list[float]] = defaultdict(list)
    for arrivals in by_host.values():
        arrivals.sort()
        for n, (before, after) in enumerate(zip(arrivals, arrivals[1:], strict=False), 1):
            gaps[n].append(after - before)
            at[n].append(after - start)
    return [
        (n, len(gaps[n]), statistics.fmean(gaps[n]), statistics.median(at[n])) for n in sorted(gaps)
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--delay", type=float, default=1.0, help="configured --delay (s)")
    parser.add_argument("--positions", action="store_true", help="mean gap by position")
    parser.add_argument(
        "--connections", action="store_true", help="requests that opened a connection"
    )
    args = parser.parse_args(argv)
    requests = read_log(args.log)
    if not requests:
        sys.exit("empty access log")
    print(json.dumps(asdict(check_politeness(requests, args.delay)), indent=2))
    line = timeline(requests)
    steady = steady_rate(line.page_done_times) or 0.0
    print(
        f"{line.requests} requests ({line.robots_requests} robots.txt) in "
        f"{line.last_done - line.first_arrival:.1f} s; steady {steady:.0f} pages/s;"
        f" peak 5 s {peak_rate(line.page_done_times):.0f} pages/s"
    )
    if args.connections:
        print(json.dumps(asdict(connection_reuse(requests)), indent=2))
    if args.positions:
        print("position  hosts  mean gap s  at (median s)")
        for n, hosts, mean_gap, median_at in gaps_by_position(requests):
            print(f"{n:8d} {hosts:6d} {mean_gap:11.3f} {median_at:14.1f}")


if __name__ == "__main__":
    main()
