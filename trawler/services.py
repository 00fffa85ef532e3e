"""What every crawl in one process shares: ``Services``, built once per process.

- ``hosts``: the host table (frontier/hosts.py). Politeness is per host across
  all the jobs of the process: never two requests in flight to one host, and
  each job's interval held after any job's request.
- ``http``: the HTTP connection pools (connectors.py): keep-alive connections
  and the DNS cache serve every job.
- ``robots``: robots.txt fetches (robotscache.ProcessRobots), so a second job
  does not ask a host for its robots.txt again.

A ``Crawler`` given no ``Services`` builds its own and closes them when its run
ends (``trawler crawl``, ``trawler worker``: one job at a time); the job runner
(jobs/runner.py) builds one for all its jobs. No module-level state: whoever
builds them closes them.
"""

from __future__ import annotations

from aiohttp.abc import AbstractResolver

from trawler.connectors import Connectors
from trawler.frontier.hosts import HostTable
from trawler.robotscache import ProcessRobots


class Services:
    def __init__(
        self, *, connection_limit: int = 0, resolver: AbstractResolver | None = None
    ) -> None:
        """``connection_limit``: connections in use at once over all jobs, 0 for no
        limit beyond each job's --concurrency; ``resolver``: tests pass a stub."""
        self.hosts = HostTable()
        self.http = Connectors(connection_limit, resolver)
        self.robots = ProcessRobots()

    async def close(self) -> None:
        """After every crawler using them has ended."""
        await self.http.close()
