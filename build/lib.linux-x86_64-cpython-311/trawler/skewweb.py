"""A generated web with a skewed link structure, for importance-first order (issue 18).

The web itself is pure (no I/O); ``python -m trawler.skewweb`` serves it on
loopback (testsite.py's server), prints the seeds and ``ready``, and writes the
access log tests and bench/bench_importance.py read the fetch order from.

Host *i* has ``pages`` pages: ``/`` (page 0) and ``/g/{n}.html``. Every page is
reachable through a tree (page n's parent is ``(n - 1) // fanout``, so the home
page is the root), and each page also links to ``links`` pages drawn from a Zipf
law over a random ranking of all pages of the web: a few pages get most links,
the rest almost none (power-law in-degree, as on the web). The ranking is a
shuffle, so a popular page sits at any depth of the tree: the depth order cannot
find them by accident.

``top(share)`` is the share of pages with the most links in (true in-degree,
counted over the whole graph), the yardstick for "important pages first".
``early_share`` is the share of those fetched within the first part of a crawl.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trawler.testsite import Handler

Page = tuple[int, int]  # (host index, page number)


@dataclass(frozen=True, slots=True)
class SkewSpec:
    hosts: int = 4
    pages: int = 200  # per host, the home page included
    fanout: int = 6  # tree children per page
    links: int = 8  # Zipf-drawn links per page
    alpha: float = 1.1  # Zipf exponent: larger, more skewed
    seed: int = 1


class SkewWeb:
    def __init__(self, spec: SkewSpec) -> None:
        self.spec = spec
        rng = random.Random(spec.seed)
        everyone = [(h, n) for h in range(spec.hosts) for n in range(spec.pages)]
        ranked = everyone[:]
        rng.shuffle(ranked)  # popularity independent of place in the tree
        weights = [1.0 / (rank + 1) ** spec.alpha for rank in range(len(ranked))]
        self.out: dict[Page, list[Page]] = {}
        for host, n in everyone:
            tree = [(host, c) for c in range(n * spec.fanout + 1, (n + 1) * spec.fanout + 1)]
            drawn = rng.choices(ranked, weights, k=spec.links)
            self.out[host, n] = list(dict.fromkeys(t for t in tree + drawn if t[1] < spec.pages))

    def in_degree(self) -> Counter[Page]:
        counts: Counter[Page] = Counter({page: 0 for page in self.out})
        for page, targets in self.out.items():
            counts.update(t for t in targets if t != page)
        return counts

    def top(self, share: float = 0.1) -> set[Page]:
        """The ``share`` of pages with the highest in-degree (ties by page)."""
        ordered = sorted(self.in_degree().items(), key=lambda item: (-item[1], item[0]))
        return {page for page, _ in ordered[: max(1, round(share * len(ordered)))]}

    @staticmethod
    def path(n: int) -> str:
        return "/" if n == 0 else f"/g/{n}.html"

    @staticmethod
    def page_of(path: str) -> int | None:
        if path == "/":
            return 0
        if path.startswith("/g/") and path.endswith(".html"):
            number = path[3:-5]
            return int(number) if number.isdigit() else None
        return None

    def html(self, page: Page, netloc: Callable[[int], str]) -> str:
        hrefs = "".join(
            f'<li><a href="http://{netloc(h)}{self.path(n)}">page {h}-{n}</a></li>'
            for h, n in self.out[page]
        )
        title = f"page {page[0]}-{page[1]}"
        return f"<html><head><title>{title}</title></head><body><ul>{hrefs}</ul></body></html>"

    def handlers(self, netloc: Callable[[int], str]) -> dict[str, Handler]:
        """TestSite ``special`` handlers: every page, and an empty robots.txt."""
        from aiohttp import web

        async def page(request: web.Request, host: int) -> web.Response:
            n = self.page_of(request.path)
            assert n is not None
            return web.Response(text=self.html((host, n), netloc), content_type="text/html")

        async def robots(request: web.Request, host: int) -> web.Response:
            return web.Response(text="User-agent: *\nDisallow:\n", content_type="text/plain")

        paths: dict[str, Handler] = {self.path(n): page for n in range(self.spec.pages)}
        paths["/robots.txt"] = robots
        return paths


def early_share(top: set[Page], fetched: list[Page], early: float = 0.2) -> float:
    """The share of ``top`` among the first ``early`` part of ``fetched`` (in order)."""
    first = set(fetched[: round(early * len(fetched))])
    return len(top & first) / len(top)


async def serve(spec: SkewSpec, access_log: Path | None) -> None:
    """Serve until SIGINT/SIGTERM; prints each host's home page, then "ready"."""
    from trawler.sitegen import SiteSpec
    from trawler.testsite import TestSite

    web = SkewWeb(spec)
    served = TestSite(SiteSpec(hosts=spec.hosts, port=0), access_log)
    served.special = web.handlers(lambda i: served.site.netloc(i))
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with served as site:
        for i in range(spec.hosts):
            print(f"{site.base(i)}/")
        print("ready", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trawler.skewweb", description=__doc__)
    default = SkewSpec()
    parser.add_argument("--hosts", type=int, default=default.hosts)
    parser.add_argument("--pages", type=int, default=default.pages)
    parser.add_argument("--seed", type=int, default=default.seed)
    parser.add_argument("--access-log", type=Path, default=None)
    args = parser.parse_args(argv)
    asyncio.run(serve(SkewSpec(args.hosts, args.pages, seed=args.seed), args.access_log))


if __name__ == "__main__":
    main()
