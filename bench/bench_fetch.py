"""CPU per fetch of the Fetcher: GETs of a ~4 KB page over loopback keep-alive connections.

A small asyncio server in its own process answers every GET with the same
~4 KB HTML page and the headers nginx sends for a static file (Content-Length,
keep-alive), as the crawl benchmark's nginx hosts do. For each Trawler source
tree given (``--src``, e.g. the main checkout for "before" and this one for
"after") a client process imports that
tree's ``trawler.fetch.Fetcher`` and runs ``--requests`` fetches from
``--concurrency`` tasks over one shared pool; it reports the CPU time of the
client process only (``time.process_time``) per request, after a warm-up
round that opens the connections. Trees are measured in turn, ``--repeat``
rounds, and the median is reported.

    .venv/bin/python bench/bench_fetch.py --src /work/main --src .
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PAGE = (
    b"<!doctype html><html><head><title>bench page</title></head><body>"
    + b"".join(
        b'<p><a href="/p/%d.html">link %d</a> a few words here</p>' % (i, i) for i in range(60)
    )
    + b"</body></html>"
)[:4096]


# --- the server (its own process) ---------------------------------------------------


class _Server(asyncio.Protocol):
    """Answers each request head with the page and nginx's headers for a static file;
    keeps the connection open."""

    response = (
        b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Wed, 25 Nov 2026 17:00:00 GMT\r\n"
        b"Content-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n"
        b"Last-Modified: Tue, 24 Nov 2026 10:00:00 GMT\r\nConnection: keep-alive\r\n"
        b'ETag: "6924a3a0-1000"\r\nAccept-Ranges: bytes\r\n\r\n' % len(PAGE) + PAGE
    )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answers = self.buffer.count(b"\r\n\r\n")
        if answers:
            self.buffer = self.buffer[self.buffer.rindex(b"\r\n\r\n") + 4 :]
            self.transport.write(self.response * answers)  # type: ignore[attr-defined]


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Server, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin


# --- the client (its own process, the tree under test on its path) ------------------


async def _client(port: int, requests: int, concurrency: int) -> dict[str, float]:
    import trawler
    from trawler.config import CrawlConfig
    from trawler.connectors import Connectors
    from trawler.fetch import Fetcher

    config = CrawlConfig(allow_private=True, concurrency=concurrency)
    connectors = Connectors(concurrency)
    fetcher = Fetcher(config, connectors=connectors)
    await fetcher.start()
    base = f"http://127.0.0.1:{port}/p/"

    async def worker(n: int, offset: int) -> int:
        failed = 0
        for i in range(n):
            result = await fetcher.fetch(f"{base}{offset + i}.html")
            failed += result.body != PAGE
        return failed

    async def run(total: int) -> int:
        per_task = total // concurrency
        tasks = [worker(per_task, t * per_task) for t in range(concurrency)]
        return sum(await asyncio.gather(*tasks))

    await run(concurrency * 4)  # warm-up: opens the connections
    cpu, wall = time.process_time(), time.perf_counter()
    failed = await run(requests)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await fetcher.close()
    await connectors.close()
    done = requests // concurrency * concurrency
    return {
        "cpu_us_per_request": cpu / done * 1e6,
        "wall_s": wall,
        "failed": failed,
        "tree": str(Path(trawler.__file__).parent.parent),
    }


def _measure(src: Path, port: int, requests: int, concurrency: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    args = [sys.executable, __file__, "--client", str(port), "--requests", str(requests)]
    args += ["--concurrency", str(concurrency)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, help="a Trawler source tree")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve())
        return
    if args.client:
        result = asyncio.run(_client(args.client, args.requests, args.concurrency))
        print(json.dumps(result))
        return
    trees = args.src or [Path(".")]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
        for _ in range(args.repeat):
            for tree in trees:  # in turn, so both see the same machine load
                runs[tree].append(_measure(tree, port, args.requests, args.concurrency))
        for tree, results in runs.items():
            cpu = [r["cpu_us_per_request"] for r in results]
            wall = [r["wall_s"] for r in results]
            failed = sum(r["failed"] for r in results)
            assert results[0]["tree"] == str(tree.resolve()), results[0]["tree"]
            print(
                f"{str(tree):40} CPU/request median {statistics.median(cpu):7.1f} µs "
                f"(runs {', '.join(f'{c:.1f}' for c in cpu)}); "
                f"wall median {statistics.median(wall):.2f} s; failed {failed}"
            )
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
