"""A site whose pages change at known rates, for the recrawl tests (issue 15).

Run as ``python -m tests.e2e.changing_site --access-log LOG [--period S]``; prints
its base URL, then ``ready``. Pages:

- ``/fast-N``: new content every ``--period`` seconds (its ETag changes with it);
- ``/never-N``: the same content forever, with ETag and Last-Modified;
- ``/plain``: the same content forever, without validators (a revisit gets a 200
  with the identical body: the WARC ``identical-payload-digest`` case);
- ``/``: links to all of them;
- ``/robots.txt``: the text of ``--robots-file`` when that file exists, else 404;
- ``/page-N`` (``--pages N``): N more pages that never change, linked from ``/``;
- with ``--births``, each edition of ``/fast-0`` links to ``/born-<edition>``, a page
  that did not exist before: what a continuous crawl must find;
- with ``--documents``, ``/doc-0.pdf``: a PDF (not HTML) that never changes, with
  ETag and Last-Modified, linked from ``/``;
- ``--status-file F``: while F exists, a JSON object ``{path: status}`` whose paths
  answer that status (a 503 or 404 after the crawl), or ``{path: [3xx, location]}``
  a redirect.

A conditional GET whose ETag (If-None-Match) or date (If-Modified-Since) still
holds answers 304 with no body (RFC 9110 §13.1). Each request is one JSON line in
the access log: arrival time ``t`` (this process's clock), path, status and the
If-None-Match it carried.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import signal
import time
from email.utils import formatdate
from pathlib import Path

from aiohttp import web

FAST_PAGES, NEVER_PAGES = 3, 3
BORN = formatdate(1_600_000_000, usegmt=True)


class ChangingSite:
    def __init__(self, log_path: Path, period_s: float, robots: Path | None,
                 options: argparse.Namespace) -> None:  # fmt: skip
        self.log = log_path.open("a", encoding="utf-8", buffering=1)
        self.period_s = period_s
        self.robots = robots
        self.pages = options.pages
        self.births = options.births
        self.status_file: Path | None = options.status_file
        self.documents: bool = options.documents

    def forced_status(self, path: str) -> int | list | None:
        if self.status_file is None or not self.status_file.exists():
            return None
        return json.loads(self.status_file.read_text()).get(path)

    def content(self, path: str) -> tuple[bytes, str | None, str | None] | None:
        """(body, ETag, Last-Modified) of a path, None for an unknown one."""
        if path == "/":
            links = [f"/fast-{i}" for i in range(FAST_PAGES)]
            links += [f"/never-{i}" for i in range(NEVER_PAGES)] + ["/plain"]
            links += [f"/page-{i}" for i in range(self.pages)]
            links += ["/doc-0.pdf"] if self.documents else []
            body = "".join(f'<p><a href="{link}">{link}</a></p>' for link in links)
            return _page("index", body), None, None
        if path.startswith("/fast-"):
            epoch = int(time.time() / self.period_s)  # the content of this period
            changed_at = formatdate(epoch * self.period_s, usegmt=True)
            born = self.births and path == "/fast-0"
            text = f"<p>{path} edition {epoch}: {'news ' * (epoch % 7 + 1)}</p>"
            body = _page(path, text + (f'<a href="/born-{epoch}">new</a>' if born else ""))
            return body, _etag(body), changed_at
        if path.startswith("/never-"):
            body = _page(path, f"<p>{path} stays the same, always and forever.</p>")
            return body, _etag(body), BORN
        if path.startswith(("/page-", "/born-", "/moved-")):
            body = _page(path, f"<p>{path}: a page of its own, unchanging.</p>")
            return body, _etag(body), BORN
        if path == "/doc-0.pdf" and self.documents:
            body = b"%PDF-1.4\n% a document that never changes\n%%EOF\n"
            return body, _etag(body), BORN
        if path == "/plain":
            return _page(path, "<p>served without validators</p>"), None, None
        return None

    async def handle(self, request: web.Request) -> web.Response:
        found = self.content(request.path)
        if isinstance(status := self.forced_status(request.path), list):
            response = web.Response(status=status[0], headers={"Location": status[1]})
        elif status is not None:
            response = web.Response(status=status, text="forced", headers={"Retry-After": "2"})
        elif request.path == "/robots.txt" and self.robots is not None and self.robots.exists():
            response = web.Response(text=self.robots.read_text())
        elif found is None:
            response = web.Response(status=404, text="not found")
        else:
            body, etag, last_modified = found
            response = self._answer(request, body, etag, last_modified)
        self.log.write(json.dumps({
            "t": time.time(), "path": request.path, "status": response.status,
            "if_none_match": request.headers.get("If-None-Match"),
        }) + "\n")  # fmt: skip
        return response

    def _answer(
        self, request: web.Request, body: bytes, etag: str | None, last_modified: str | None
    ) -> web.Response:
        headers = {}
        if etag:
            headers["ETag"] = etag
        if last_modified:
            headers["Last-Modified"] = last_modified
        if etag and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        since = request.headers.get("If-Modified-Since")
        if "If-None-Match" not in request.headers and last_modified and since == last_modified:
            return web.Response(status=304, headers=headers)
        kind = "application/pdf" if request.path.endswith(".pdf") else "text/html"
        return web.Response(body=body, content_type=kind, headers=headers)


def _page(title: str, body: str) -> bytes:
    return f"<!doctype html><title>{title}</title><main>{body}</main>".encode()


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


async def serve(log_path: Path, period_s: float, robots: Path | None,
                options: argparse.Namespace) -> None:  # fmt: skip
    site = ChangingSite(log_path, period_s, robots, options)
    app = web.Application()
    app.router.add_get("/{tail:.*}", site.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"http://127.0.0.1:{port}/", flush=True)
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--access-log", type=Path, required=True)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--robots-file", type=Path)
    parser.add_argument("--pages", type=int, default=0)
    parser.add_argument("--births", action="store_true")
    parser.add_argument("--status-file", type=Path)
    parser.add_argument("--documents", action="store_true")
    args = parser.parse_args()
    asyncio.run(serve(args.access_log, args.period, args.robots_file, args))


if __name__ == "__main__":
    main()
