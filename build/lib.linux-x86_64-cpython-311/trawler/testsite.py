"""Serve a generated Site (sitegen.py) over real HTTP on loopback.

One aiohttp app, one listening socket per host address (127.0.x.y:port; Linux
routes all of 127.0.0.0/8 to lo, so no setup is needed). The host a request
was for is taken from the local socket address, never from the Host header.

The access log is JSON lines, one per request, flushed as written so tests can
read it while the server runs::

    {"t": 1700000000.123, "host": "127.0.1.5:8800", "method": "GET",
     "path": "/p/1.html?x=1", "status": 200, "ua": "Trawler/0.1.0 ..."}

``t`` is time.time() when the request arrived (before the handler ran); lines
are written when the response is ready, so they may be slightly out of ``t``
order under concurrency.

Run it as ``python -m trawler.testsite --hosts 20 --pages 50 --port 8800``; it
prints the seed URLs, then ``ready``, and serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import IO

from aiohttp import web

from trawler.sitegen import Site, SiteSpec

# A special path's handler gets the request and the index of the host it came to.
Handler = Callable[[web.Request, int], Awaitable[web.StreamResponse]]


class TestSite:
    """A running test web: ``site = await TestSite(spec).start()`` ... ``await stop()``.

    ``special`` maps a request path (without query) to a handler that answers
    it instead of the Site, on every host: the hook for slow, redirecting or
    misbehaving endpoints that later tests need.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        spec: SiteSpec,
        access_log: Path | None = None,
        special: dict[str, Handler] | None = None,
    ) -> None:
        self.spec = spec
        self.site = Site(spec)
        self.access_log = access_log
        self.special: dict[str, Handler] = dict(special or {})
        self._runner: web.AppRunner | None = None
        self._log_file: IO[str] | None = None

    async def start(self) -> Site:
        """Bind every host address; with port 0, pick one free port for all."""
        sockets = _bind_all(self.site, self.spec.port)
        port = sockets[0].getsockname()[1]
        if port != self.spec.port:
            self.spec = replace(self.spec, port=port)
            self.site = Site(self.spec)
        if self.access_log is not None:
            self._log_file = self.access_log.open("a", encoding="utf-8", buffering=1)
        app = web.Application(middlewares=[self._log_middleware])
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        for sock in sockets:
            await web.SockSite(self._runner, sock, backlog=1024).start()
        return self.site

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    async def __aenter__(self) -> Site:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _host_of(self, request: web.Request) -> tuple[int | None, str]:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        netloc = f"{sockname[0]}:{sockname[1]}" if sockname else request.host
        return self.site.host_index(netloc), netloc

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        i, _ = self._host_of(request)
        if i is None:
            raise web.HTTPNotFound(text="unknown host\n")
        special = self.special.get(request.path)
        if special is not None:
            return await special(request, i)
        found = self.site.page(i, request.raw_path)
        if found is None:
            raise web.HTTPNotFound(text="not found\n")
        return web.Response(
            status=found.status, body=found.body, headers={"Content-Type": found.content_type}
        )

    @web.middleware
    async def _log_middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        arrived_at = time.time()  # first thing: the arrival time politeness tests compare
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self._write_log(request, arrived_at, status)

    def _write_log(self, request: web.Request, arrived_at: float, status: int) -> None:
        if self._log_file is None:
            return
        _, netloc = self._host_of(request)
        entry = {
            "t": arrived_at,
            "host": netloc,
            "method": request.method,
            "path": request.raw_path,
            "status": status,
            "ua": request.headers.get("User-Agent", ""),
        }
        self._log_file.write(json.dumps(entry) + "\n")
        self._log_file.flush()


def _bind_all(site: Site, port: int) -> list[socket.socket]:
    """One listening socket per host address, all on the same port."""
    sockets: list[socket.socket] = []
    try:
        for i in range(site.spec.hosts):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((site.address(i), port))
            port = sock.getsockname()[1]  # port 0: the kernel's pick, reused for the rest
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def serve_until_stopped(spec: SiteSpec, access_log: Path | None = None) -> None:
    """Serve, print the seeds and "ready", and return on SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with TestSite(spec, access_log) as site:
        for seed in site.seeds():
            print(seed)
        print("ready", flush=True)
        await stop.wait()


def run_testsite(
    hosts: int,
    pages: int,
    port: int,
    access_log: Path | None = None,
    seed: int = 1,
    *,
    spec: SiteSpec | None = None,
) -> None:
    """Block serving the test web until Ctrl-C (``trawler testsite``)."""
    spec = spec or SiteSpec(hosts=hosts, pages=pages, port=port, seed=seed)
    asyncio.run(serve_until_stopped(spec, access_log))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trawler.testsite", description=__doc__)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--port", type=int, default=8800, help="0: pick a free port")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--access-log", type=Path, default=None)
    parser.add_argument("--disallow-fraction", type=float, default=1.0)
    parser.add_argument("--crawl-delay-hosts", type=int, default=0)
    parser.add_argument("--crawl-delay", type=float, default=1.0)
    args = parser.parse_args(argv)
    spec = SiteSpec(
        hosts=args.hosts,
        pages=args.pages,
        port=args.port,
        seed=args.seed,
        disallow_fraction=args.disallow_fraction,
        crawl_delay_hosts=args.crawl_delay_hosts,
        crawl_delay_s=args.crawl_delay,
    )
    try:
        run_testsite(spec.hosts, spec.pages, spec.port, args.access_log, spec.seed, spec=spec)
    except OSError as exc:
        print(f"testsite: cannot listen: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
