"""`trawler recrawl`: the crawl engine (engine.py) over a job's data directory with
the job's stored pages as its only work.

One pass revisits every stored page now; continuous mode keeps running and revisits
each page when its estimated interval (recrawl.py) has passed, until ``stop()``
(SIGINT, SIGTERM) or ``max_seconds``. Politeness, robots.txt, the private-address
guard, back-off and redirects are the crawl's own (recrawl_flow.py says what differs).
robots.txt is fetched again before a host's first revisit of the run (an earlier
run's copy is not used): an operator asking for a pass wants the rules as they are.
New URLs found on changed pages are queued in the job's frontier for its next crawl
run; `trawler crawl --recrawl` crawls them at once, beside the revisits.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trawler.config import CrawlConfig
from trawler.recrawl import RevisitWindow
from trawler.recrawl_flow import RecrawlTotals, RevisitOptions

if TYPE_CHECKING:
    from trawler.engine import Crawler
    from trawler.services import Services
    from trawler.store.base import Backend

__all__ = ["RecrawlOptions", "RecrawlTotals", "Recrawler", "revisit_crawler"]


@dataclass(slots=True)
class RecrawlOptions:
    window: RevisitWindow = field(default_factory=RevisitWindow)
    continuous: bool = False
    max_seconds: float | None = None


def revisit_crawler(
    config: CrawlConfig, backend: Backend, options: RecrawlOptions, services: Services | None = None
) -> Crawler:
    """The engine over a job's backend with its stored pages as its only work: what
    `trawler recrawl` runs, and a job's revisit pass in `trawler serve` (jobs/runner.py,
    over the process's ``services``)."""
    from trawler.engine import Crawler

    config = config.model_copy()
    config.max_pages = None  # the budget is the crawl's: a revisit stores no page
    revisits = RevisitOptions(options.window, options.continuous, discovery=False,
                              reread_robots=True)  # fmt: skip
    return Crawler(config, backend, services=services, revisits=revisits)


class Recrawler:
    def __init__(self, job_dir: Path, config: CrawlConfig, options: RecrawlOptions) -> None:
        from trawler.store.embedded import EmbeddedBackend

        self.options = options
        self.crawler = revisit_crawler(config, EmbeddedBackend(job_dir), options)

    def stop(self) -> None:
        self.crawler.stop()

    async def run(self) -> RecrawlTotals:
        timer = None
        if self.options.max_seconds is not None:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(self.options.max_seconds, self.crawler.stop)
        try:
            await self.crawler.run(0)
        finally:
            if timer is not None:
                timer.cancel()
        assert self.crawler.revisits is not None
        return self.crawler.revisits.totals
