"""``/metrics``: Prometheus text format (prometheus-client), labelled by job only.

The numbers are read from each job's store at scrape time, so they survive a
restart of the server and agree with `trawler stats`. Labels are the job id, a
status class, an error code (a fixed vocabulary) or a job state: never a host
or a URL, so the number of series stays bounded however wide the crawl.
A registry is built for each scrape: no process-wide collector state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

# Fetch latency buckets, seconds (upper bounds; +Inf added).
LATENCY_BOUNDS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(slots=True)
class JobNumbers:
    """One job's numbers at scrape time (store/sqlite_read.metric_numbers and
    fetch_durations)."""

    job: str
    state: str
    totals: dict
    latency_buckets: list[float]  # cumulative counts at each of LATENCY_BOUNDS_S
    latency_sum_s: float
    latency_count: int


class StoreCollector(Collector):
    def __init__(self, jobs: list[JobNumbers], active_workers: int) -> None:
        self.jobs = jobs
        self.active_workers = active_workers

    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._gauges()
        latency = HistogramMetricFamily(
            "trawler_fetch_duration_seconds", "Duration of fetch attempts.", labels=["job"]
        )
        for job in self.jobs:
            buckets = [(_bound(b), c) for b, c in zip(LATENCY_BOUNDS_S, job.latency_buckets,
                                                       strict=True)]  # fmt: skip
            buckets.append(("+Inf", job.latency_count))
            latency.add_metric([job.job], buckets, job.latency_sum_s)
        yield latency

    def _counters(self) -> Iterator[Metric]:
        pages = CounterMetricFamily("trawler_pages_fetched", "Pages stored.", labels=["job"])
        size = CounterMetricFamily("trawler_bytes_downloaded", "Body bytes.", labels=["job"])
        denied = CounterMetricFamily(
            "trawler_robots_denials", "URLs robots.txt disallowed.", labels=["job"]
        )
        responses = CounterMetricFamily(
            "trawler_responses", "Pages by HTTP status class.", labels=["job", "status_class"]
        )
        errors = CounterMetricFamily(
            "trawler_fetch_errors", "Failed fetches by error code.", labels=["job", "code"]
        )
        for job in self.jobs:
            totals = job.totals
            pages.add_metric([job.job], totals["pages"])
            size.add_metric([job.job], totals["bytes"])
            denied.add_metric([job.job], totals["robots_denied"])
            for status_class, count in sorted(totals["status_classes"].items()):
                responses.add_metric([job.job, status_class], count)
            for code, count in sorted(totals["errors"].items()):
                errors.add_metric([job.job, code], count)
        yield from (pages, responses, errors, denied, size)

    def _gauges(self) -> Iterator[Metric]:
        frontier = GaugeMetricFamily("trawler_frontier_size", "URLs queued.", labels=["job"])
        hosts = GaugeMetricFamily("trawler_active_hosts", "Hosts with queued URLs.", labels=["job"])
        states = GaugeMetricFamily("trawler_jobs", "Jobs by state.", labels=["state"])
        by_state: dict[str, int] = {}
        for job in self.jobs:
            frontier.add_metric([job.job], job.totals["frontier"])
            hosts.add_metric([job.job], job.totals["active_hosts"])
            by_state[job.state] = by_state.get(job.state, 0) + 1
        for state, count in sorted(by_state.items()):
            states.add_metric([state], count)
        workers = GaugeMetricFamily("trawler_active_workers", "Workers crawling now.")
        workers.add_metric([], self.active_workers)
        yield from (frontier, hosts, states, workers)


def _bound(value: float) -> str:
    return repr(float(value))


def render(jobs: list[JobNumbers], active_workers: int) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(jobs, active_workers))
    return generate_latest(registry)
