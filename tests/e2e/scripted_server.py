"""A scripted web server for end-to-end tests: each host serves pages from a JSON script.

Run as ``python -m tests.e2e.scripted_server SCRIPT.json --access-log LOG``;
it prints one base URL per host, then ``ready``. The script maps host index
(as a string) to paths (with query, as requested) to a response, or to a list
of responses served in turn (the last one repeats)::

    {"0": {"/robots.txt": {"body": "User-agent: *\\nDisallow: /x"},
           "/": {"status": 200, "headers": {"Content-Type": "text/html"}, "body": "<a href=/a>"},
           "/flaky": [{"status": 503, "headers": {"Retry-After": "1"}}, {"body": "ok"}],
           "/slow": {"body": "late", "delay_s": 5}}}

Unknown paths answer 404. The access log has the same JSON-lines format as
trawler.testsite (arrival time ``t`` from this process's clock).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import time
from pathlib import Path

from aiohttp import web

HTML = "text/html; charset=utf-8"


class ScriptedServer:
    def __init__(self, script: dict[str, dict[str, object]], log_path: Path) -> None:
        self.script = script
        self.served: dict[tuple[int, str], int] = {}
        self.log = log_path.open("a", encoding="utf-8", buffering=1)
        self.addresses = [f"127.0.9.{int(i) + 1}" for i in sorted(script, key=int)]
        self.port = 0  # set once bound; "{port}" in a body is replaced by it

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        host, port = request.transport.get_extra_info("sockname")[:2]  # type: ignore[union-attr]
        index = int(host.rsplit(".", 1)[1]) - 1
        response, delay_s = self._response(index, request.raw_path)
        if delay_s:
            await asyncio.sleep(delay_s)
        agent = request.headers.get("User-Agent", "")
        entry = {"t": arrived, "host": f"{host}:{port}", "path": request.raw_path,
                 "status": response.status, "ua": agent}  # fmt: skip
        self.log.write(json.dumps(entry) + "\n")
        return response

    def _response(self, index: int, path: str) -> tuple[web.Response, float]:
        spec = self.script.get(str(index), {}).get(path)
        if spec is None:
            return web.Response(status=404, text="not found"), 0.0
        if isinstance(spec, list):
            turn = self.served.get((index, path), 0)
            self.served[(index, path)] = turn + 1
            spec = spec[min(turn, len(spec) - 1)]
        assert isinstance(spec, dict)
        headers = {"Content-Type": HTML, **spec.get("headers", {})}
        body = spec.get("body", "").replace("{port}", str(self.port))
        response = web.Response(status=spec.get("status", 200), text=body, headers=headers)
        return response, spec.get("delay_s", 0.0)


async def serve(script_path: Path, log_path: Path) -> None:
    server = ScriptedServer(json.loads(script_path.read_text()), log_path)
    app = web.Application()
    app.router.add_get("/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    port = 0
    for address in server.addresses:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        port = server.port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        print(f"http://{address}:{port}", flush=True)
    print("ready", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("script", type=Path)
    parser.add_argument("--access-log", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.script, args.access_log))


if __name__ == "__main__":
    main()
