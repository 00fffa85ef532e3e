"""What every crawl in one process shares: ``Services``, built once per process.

- ``hosts``: the host table (frontier/hosts.py). Politeness is per host across
  all the jobs of the process: never two requests in flight to one host, and
  each job's interval held after any job's request.
- ``http``: the HTTP connection pools (connectors.py): keep-alive connections
  and the DNS cache serve every job.
- ``parsers``: the page-analysis processes (parsers.py), one set for all jobs.
- ``robots``: robots.txt fetches (robotscache.ProcessRobots), so a second job
  does not ask a host for its robots.txt again.
- ``politeness``: the operator's live politeness settings (``PolitenessSettings``)
  and ``throttle``, the limit on requests in flight over all jobs they set.
- ``blocklist``: domains no job may fetch from (blocklist.py).
- ``browser``: the chromium that renders pages (render/browser.py ``SharedBrowser``),
  started by the first job with --render auto or always, one for all jobs.
- ``analysing``: the bytes of the pages waiting for the parsers (engine_url.py), bounded
  over all jobs.

A ``Crawler`` given no ``Services`` builds its own and closes them when its run
ends (``trawler crawl``, ``trawler worker``: one job at a time); the job runner
(jobs/runner.py) builds one for all its jobs. No module-level state: whoever
builds them closes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp.abc import AbstractResolver

from trawler.blocklist import Blocklist
from trawler.connectors import Connectors
from trawler.frontier.hosts import HostTable
from trawler.parsers import ParserProcesses, default_processes
from trawler.render.browser import SharedBrowser
from trawler.robotscache import ProcessRobots
from trawler.throttle import ANALYSIS_QUEUE_BYTES, ByteBudget, Throttle


@dataclass(slots=True, frozen=True)
class PolitenessSettings:
    """An operator's politeness settings, applied live to every job of the process.

    Each field, while set, takes the place of the same option of every job
    (None: each job keeps its own): ``delay_s`` the delay between two requests to
    a host (--delay), ``max_crawl_delay_s`` the ceiling on robots.txt Crawl-delay
    (--max-crawl-delay); ``concurrency`` caps the requests in flight over all the
    jobs together (each job's --concurrency still holds too).
    """

    delay_s: float | None = None
    max_crawl_delay_s: float | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        for name in ("delay_s", "max_crawl_delay_s"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 86_400:
                raise ValueError(f"{name} must be between 0 and 86400 seconds")
        if self.concurrency is not None and not 1 <= self.concurrency <= 100_000:
            raise ValueError("concurrency must be between 1 and 100000")


class Services:
    def __init__(
        self,
        *,
        connection_limit: int = 0,
        parse_processes: int | None = None,
        resolver: AbstractResolver | None = None,
        render_contexts: int | None = None,
    ) -> None:
        """``connection_limit``: connections in use at once over all jobs, 0 for no
        limit beyond each job's --concurrency; ``parse_processes``: None, one per
        spare core (started with the first job); ``resolver``: tests pass a stub;
        ``render_contexts``: pages rendered at a time over all jobs (None: the
        --render-concurrency of the first job that renders)."""
        self.hosts = HostTable()
        self.http = Connectors(connection_limit, resolver)
        if parse_processes is None:
            parse_processes = default_processes()
        self.parsers = ParserProcesses(parse_processes)
        self.robots = ProcessRobots()
        self.politeness = PolitenessSettings()
        self.throttle = Throttle()
        self.analysing = ByteBudget(ANALYSIS_QUEUE_BYTES)  # pages waiting for the parsers
        self.blocklist = Blocklist()
        self.browser = SharedBrowser(render_contexts)

    async def close(self) -> None:
        """After every crawler using them has ended."""
        self.parsers.close()
        await self.browser.close()
        await self.http.close()
