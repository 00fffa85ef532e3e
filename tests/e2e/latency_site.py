"""The generated test web with each answer held ``--latency`` seconds, and an access
log that says when each request arrived (``t``) and when its answer was ready
(``done``), both on the server's clock: enough to see from the server's side
whether two requests to one host were ever in flight at once.

Run as ``python -m tests.e2e.latency_site --hosts 4 --pages 30 --latency 0.05
--access-log LOG``; like ``trawler.testsite`` it prints the seeds, then ``ready``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from pathlib import Path

from aiohttp import web

from trawler.sitegen import SiteSpec
from trawler.testsite import TestSite


class LatencySite(TestSite):
    __test__ = False

    def __init__(self, spec: SiteSpec, access_log: Path, latency_s: float) -> None:
        super().__init__(spec, access_log)
        self.latency_s = latency_s

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(self.latency_s)
        return await super()._handle(request)

    def _write_log(self, request: web.Request, arrived_at: float, status: int) -> None:
        if self._log_file is None:
            return
        _, netloc = self._host_of(request)
        entry = {"t": arrived_at, "done": time.time(), "host": netloc, "path": request.raw_path,
                 "status": status, "ua": request.headers.get("User-Agent", "")}  # fmt: skip
        self._log_file.write(json.dumps(entry) + "\n")
        self._log_file.flush()


async def serve(spec: SiteSpec, access_log: Path, latency_s: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with LatencySite(spec, access_log, latency_s) as site:
        for seed in site.seeds():
            print(seed)
        print("ready", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--access-log", type=Path, required=True)
    args = parser.parse_args()
    spec = SiteSpec(hosts=args.hosts, pages=args.pages, port=0)
    asyncio.run(serve(spec, args.access_log, args.latency))


if __name__ == "__main__":
    main()
