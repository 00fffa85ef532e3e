"""A site whose links and text exist only after JavaScript runs, for --render tests
and bench/bench_render.py. Served over real HTTP on loopback, with an access log
(JSON lines on the server's clock: each request as it arrives, with host, path
and start, and again once answered, with its end). A request's start is when
its first bytes reached the server's socket, as the kernel stamped them
(``SO_TIMESTAMPNS``), not when a handler thread got to it: on a loaded machine
the first request of a new connection was read up to ~100 ms after it arrived
(accept, a thread, parsing), and two requests the crawler sent 0.226 s apart
showed 0.13 s apart in the log (tests/e2e/test_render_crawl.py).

- ``/`` and every route: the same application shell (an empty ``#root`` and
  ``/app.js``, a client-side router whose links change the page with pushState).
  ``/`` also loads ``/api/links.json``, tries ``/private/secret.json`` (disallowed
  by robots.txt), an image, a video and a third-party script.
- ``/feed``: ten items, more links loaded from ``/api/feed?page=N`` on scroll.
- ``/static``: a complete static page (no rendering needed), linked from ``/``.
- ``/hang``: a shell whose script never arrives (the server holds it 60 s).
- ``/dull/N``: ``DULL_PAGES`` shells in a chain (each links the next in its static
  HTML) whose script adds nothing: ``--render auto`` learns to stop rendering.
- ``/gen/N`` (``--pages``): N shells, each with script-made links to the next ones,
  for the benchmark.

Run: ``python -m tests.e2e.js_site --port 0 --access-log PATH [--pages N]``;
prints the base URL (``--hosts N``: N sites on ports of their own, one a line),
then ``ready``.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SHELL = """<!doctype html><html><head><title>App</title></head><body>
<noscript>You need to enable JavaScript to run this app.</noscript>
<div id="root"></div><script src="/app.js"></script>{extra}</body></html>"""
HOME_EXTRA = """<img src="/logo.png"><video src="/clip.mp4"></video>
<script src="http://localhost:{port}/third-party.js"></script>"""
APP = r"""
const routes = {
  "/": ["Home", "Welcome to the shop, rendered by script.", ["/about", "/products", "/feed"]],
  "/about": ["About", "About this shop: a page only JavaScript can show.", ["/"]],
  "/products": ["Products", "All our products.", ["/products/1", "/products/2"]],
  "/products/1": ["Product 1", "The first product, described at length.", ["/products"]],
  "/products/2": ["Product 2", "The second product, described at length.", ["/products"]],
  "/feed": ["Feed", "Scroll for more.", []],
};
function show(path) {
  const r = routes[path] || ["Not found", "No such page.", ["/"]];
  const root = document.getElementById("root");
  root.innerHTML = "<h1>" + r[0] + "</h1><p>" + r[1] + "</p>" +
    r[2].map(l => '<a href="' + l + '" data-route>' + l + "</a> ").join("");
  if (path === "/feed") feed(root);
}
document.addEventListener("click", e => {  // a client-side router: no page load
  const a = e.target.closest("a[data-route]");
  if (!a) return;
  e.preventDefault();
  history.pushState({}, "", a.getAttribute("href"));
  show(location.pathname);
});
window.addEventListener("popstate", () => show(location.pathname));
function feed(root) {
  const list = document.createElement("div");
  for (let i = 0; i < 10; i++) list.innerHTML += '<p style="height:300px">Item ' + i + "</p>";
  root.appendChild(list);
  let page = 1, loading = false;
  window.addEventListener("scroll", () => {
    if (loading || page > 2) return;
    if (window.innerHeight + window.scrollY < document.body.scrollHeight - 100) return;
    loading = true;
    fetch("/api/feed?page=" + page).then(r => r.json()).then(links => {
      links.forEach(l => { list.innerHTML += '<p style="height:300px"><a href="' + l + '">' +
        l + "</a></p>"; });
      page += 1; loading = false;
    });
  });
}
show(location.pathname);
if (location.pathname === "/") {
  fetch("/api/links.json").then(r => r.json()).then(links => {
    document.getElementById("root").innerHTML +=
      links.map(l => '<a href="' + l + '">' + l + "</a> ").join("");
  });
  fetch("/private/secret.json").catch(() => {});
}
"""
GEN_APP = r"""
const n = Number(location.pathname.split("/").pop());
const links = [1, 2, 3].map(k => "/gen/" + ((n * 3 + k) % TOTAL));
document.getElementById("root").innerHTML = "<h1>Generated " + n + "</h1><p>" +
  "Words made by script for page " + n + ". ".repeat(5) + "</p>" +
  links.map(l => '<a href="' + l + '">' + l + "</a>").join(" ");
"""
STATIC = """<!doctype html><html><head><title>Static</title></head><body><h1>Static</h1>
<p>{text}</p><a href="/about">About</a></body></html>""".format(
    text="This page is complete without JavaScript. " * 12
)
ROUTES = ("/", "/about", "/products", "/products/1", "/products/2", "/feed")
# What a user clicking through reaches (the hang page aside, which never renders).
REACHABLE = frozenset({*ROUTES, "/static", "/hang", "/items/1", "/items/2", "/items/3", "/items/4"})
DULL_PAGES = 12
DULL = """<!doctype html><html><head><title>Dull</title></head><body>
<noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div>
<a href="/dull/{next}">next</a><script src="/dull.js"></script></body></html>"""
ROBOTS = b"User-agent: *\nDisallow: /private/\n"
# Linux's values (asm-generic/socket.h); Python's socket module does not name them.
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("qq")


def arrived_at(conn: socket.socket) -> float:
    """When the next request's first bytes reached ``conn`` (the kernel's stamp, wall
    clock), waiting for them; now when the kernel gave no stamp. Peeks: the bytes
    stay for the handler to read. Needs an empty read buffer in front of ``conn``,
    true between requests as no client here pipelines."""
    try:
        _, ancillary, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(_TIMESPEC.size), socket.MSG_PEEK)
    except OSError:
        ancillary = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack(data[: _TIMESPEC.size])
            return seconds + nanoseconds / 1e9
    return time.time()


class Handler(BaseHTTPRequestHandler):
    server: JsSite
    protocol_version = "HTTP/1.1"
    arrived = 0.0

    def handle_one_request(self) -> None:
        self.arrived = arrived_at(self.connection)
        super().handle_one_request()

    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        host, started = self.headers.get("Host", ""), self.arrived
        self.server.log({"host": host, "path": self.path, "start": started})
        status, kind, body = self.server.answer(self.path)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.log({"host": host, "path": self.path, "start": started, "end": time.time()})

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # the JSON access log is the log


class JsSite(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, log_path: Path, pages: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        # Accepted connections inherit it: the kernel stamps what they receive.
        self.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.log_file = log_path.open("a", encoding="utf-8", buffering=1)
        self.lock = threading.Lock()
        self.pages = pages

    def log(self, entry: dict) -> None:
        """A request as it arrives (``start``), and again once answered (``end`` too)."""
        with self.lock:
            self.log_file.write(json.dumps(entry) + "\n")

    def answer(self, path: str) -> tuple[int, str, bytes]:
        html, js, data = "text/html; charset=utf-8", "application/javascript", "application/json"
        port = self.server_address[1]
        if path == "/robots.txt":
            return 200, "text/plain", ROBOTS
        if path == "/":
            return 200, html, SHELL.format(extra=HOME_EXTRA.format(port=port)).encode()
        if path in ROUTES or path == "/hang":
            extra = '<script src="/never.js"></script>' if path == "/hang" else ""
            return 200, html, SHELL.format(extra=extra).encode()
        if path == "/app.js":
            return 200, js, APP.encode()
        if path == "/never.js":
            time.sleep(60)  # the page never finishes loading
            return 200, js, b""
        if path == "/api/links.json":
            return 200, data, json.dumps(["/static", "/hang"]).encode()
        if path.startswith("/api/feed?page="):
            page = int(path.rsplit("=", 1)[1])
            return 200, data, json.dumps([f"/items/{page * 2 - 1}", f"/items/{page * 2}"]).encode()
        if path.startswith("/items/"):
            return 200, html, f"<html><body><h1>Item</h1><p>{STATIC}</p></body></html>".encode()
        if path == "/static":
            return 200, html, STATIC.encode()
        return self.generated(path)

    def generated(self, path: str) -> tuple[int, str, bytes]:
        if path == "/dull.js":  # runs, and changes nothing a crawler would see
            return 200, "application/javascript", b"document.title = document.title;"
        if path.startswith("/dull/") and path[6:].isdigit() and int(path[6:]) < DULL_PAGES:
            body = DULL.format(next=min(int(path[6:]) + 1, DULL_PAGES - 1))
            return 200, "text/html; charset=utf-8", body.encode()
        if path == "/gen.js":
            return 200, "application/javascript", GEN_APP.replace("TOTAL", str(self.pages)).encode()
        if path.startswith("/gen/") and path[5:].isdigit() and int(path[5:]) < self.pages:
            body = SHELL.replace("/app.js", "/gen.js").format(extra="")
            return 200, "text/html; charset=utf-8", body.encode()
        return 404, "text/plain", b"not found"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--access-log", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=0)
    parser.add_argument("--hosts", type=int, default=1, help="sites on ports of their own")
    args = parser.parse_args()
    sites = [JsSite(args.port if i == 0 else 0, args.access_log, args.pages)
             for i in range(args.hosts)]  # fmt: skip
    for site in sites[1:]:  # one log, one lock: whole lines
        site.log_file, site.lock = sites[0].log_file, sites[0].lock
        threading.Thread(target=site.serve_forever, daemon=True).start()
    for site in sites:
        print(f"http://127.0.0.1:{site.server_address[1]}/", flush=True)
    print("ready", flush=True)
    sites[0].serve_forever()


if __name__ == "__main__":
    main()
