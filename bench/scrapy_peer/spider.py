"""The Scrapy peer of the crawl benchmark: the same work as ``trawler crawl`` on the
generated web, run by bench/run_scrapy_bench.py with ``scrapy runspider``.

Same politeness as Trawler's defaults: robots.txt obeyed, one request at a time
per host, ``DOWNLOAD_DELAY`` between them (not randomised), rel=nofollow links
not followed. Every link is followed (the web is closed: all hosts are the
benchmark's), binary files included (Scrapy's link extractor skips .pdf and
.jpg unless told), and each response is an item in a JSON-lines feed, as each
is a page in Trawler's store.

It lives outside the package and its venv: Scrapy is the benchmark's peer,
never a dependency of Trawler.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor


class BenchSpider(scrapy.Spider):
    name = "trawler-bench-peer"

    def __init__(self, seeds_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = Path(seeds_file).read_text(encoding="utf-8").split()
        self.links = LinkExtractor(deny_extensions=[], unique=True)

    async def start(self) -> Any:  # Scrapy ≥ 2.13
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response: Response) -> Iterator[Any]:
        title = response.css("title::text").get() if isinstance(response, TextResponse) else None
        yield {"url": response.url, "status": response.status, "title": title}
        if not isinstance(response, TextResponse):
            return
        for link in self.links.extract_links(response):
            if not link.nofollow:
                yield response.follow(link.url)
