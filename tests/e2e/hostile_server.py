"""A hostile web on loopback: every way a server or a page can go wrong.

Each host has a *role* and its own address (``127.0.77.<n>``, one port for
all). Its home page ``/`` links to the role's hostile paths and to a few
ordinary "canary" pages (``/canary/...``) that a crawl must still fetch and
store exactly once. Most roles are served by aiohttp; the ``http10`` role is a
raw asyncio socket server (HTTP/1.0 without keep-alive, connections closed
mid-body, no Content-Type, garbage instead of a status line), which aiohttp
cannot be made to send.

The access log has the format of trawler.testsite's (JSON lines, flushed as
written), with ``t`` = the time the request arrived.

Run it as ``python -m tests.e2e.hostile_server --port 0 --access-log F``; it
prints one ``<role> <base URL>`` line per host, then ``ready``, and serves
until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import functools
import gzip
import json
import random
import signal
import socket
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

import brotli
from aiohttp import web

ADDRESS_PREFIX = "127.0.77."
# Role → address suffix. The order is the order of the printed lines.
ROLES = {
    "pages": 1,
    "charset": 2,
    "links": 3,
    "redirects": 4,
    "redirects2": 5,
    "robots-huge": 6,
    "robots-binary": 7,
    "robots-loop": 8,
    "robots-chain": 9,
    "robots-5xx": 10,
    "robots-timeout": 11,
    "http10": 12,
}
RAW_ROLES = frozenset({"http10"})
UNSERVED_ADDRESS = ADDRESS_PREFIX + "250"  # nobody listens here: a redirect target

MANY_LINKS = 100_000
BOMB_BYTES = 50 * 1024 * 1024  # what each compression bomb inflates to
TRICKLE_BYTES = 60  # one a second
STALL_S = 8.0  # a response that never comes in time (crawl timeouts are shorter)
ROBOTS_HUGE_PAD = 600 * 1024  # comment bytes between the first and the last rule
FRENCH = "Café crème, déjà vu à la carte: où est la fenêtre? Très élégant, naïve façade. "

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def page(title: str, *hrefs: str, extra: str = "") -> bytes:
    links = "".join(f'<li><a href="{href}">{href}</a></li>' for href in hrefs)
    return (
        f"<!doctype html><html><head><title>{title}</title></head>"
        f"<body><h1>{title}</h1><ul>{links}</ul>{extra}</body></html>"
    ).encode()


def html(body: bytes, content_type: str = "text/html; charset=utf-8", **headers: str):
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, headers={"Content-Type": content_type, **headers})

    return handler


def redirect(location: str, status: int = 302) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
        return web.Response(status=status, headers={"Location": location.format(port=port)})

    return handler


def chain(prefix: str) -> Handler:
    """``<prefix>/N`` redirects to ``<prefix>/N-1``; ``<prefix>/0`` is a page."""

    async def handler(request: web.Request) -> web.StreamResponse:
        n = int(request.match_info["n"])
        if n == 0:
            return web.Response(body=page("end of chain"), content_type="text/html")
        return web.Response(status=302, headers={"Location": f"{prefix}/{n - 1}"})

    return handler


async def stream(request: web.Request, chunks, delay_s: float = 0.0) -> web.StreamResponse:
    """Send ``chunks`` as a chunked text/html body until the client goes away."""
    resp = web.StreamResponse(headers={"Content-Type": "text/html"})
    await resp.prepare(request)
    try:
        for chunk in chunks:
            await resp.write(chunk)
            if delay_s:
                await asyncio.sleep(delay_s)
    except ConnectionError:  # the client gave up: that is the point
        pass
    return resp


async def endless(request: web.Request) -> web.StreamResponse:
    deadline = time.monotonic() + 60  # a safety net, not part of the test
    filler = b"<p>" + b"x" * (64 * 1024 - 3)
    return await stream(request, iter(lambda: filler if time.monotonic() < deadline else b"", b""))


async def trickle(request: web.Request) -> web.StreamResponse:
    body = page("trickle").ljust(TRICKLE_BYTES)[:TRICKLE_BYTES]
    return await stream(request, (bytes([b]) for b in body), delay_s=1.0)


async def stall(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(STALL_S)
    return web.Response(body=page("too late"), content_type="text/html")


async def status_500(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500, text="boom\n")


@functools.cache
def bombs() -> dict[str, bytes]:
    zeros = bytes(BOMB_BYTES)
    return {
        "gzip": gzip.compress(zeros, compresslevel=9),
        "br": brotli.compress(zeros, quality=5),
        "deflate": zlib.compress(zeros, 9),
    }


def bomb(coding: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "text/html", "Content-Encoding": coding}
        return web.Response(body=bombs()[coding], headers=headers)

    return handler


def pages_routes() -> dict[str, Handler]:
    malformed = (
        b"<html><head><title>Broken page</title><body><div><p>unclosed <b><i>tags</b>"
        b"<table><tr><td><a href='/canary/from-malformed-1'>one<td><a href=/canary/from-"
        b"malformed-2>two</table></div></span></p><<<>>>&&&;<a href=></a><!-- never closed"
    )
    binary = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(7).randbytes(20_000)
    return {
        "/malformed": html(malformed),
        "/too-large": html(b"<p>" + b"x" * (3 * 1024 * 1024)),
        "/endless": endless,
        "/trickle": trickle,
        "/stall": stall,
        "/gzip-bomb": bomb("gzip"),
        "/br-bomb": bomb("br"),
        "/deflate-bomb": bomb("deflate"),
        "/gzip-ok": html(
            gzip.compress(page("gzipped")), "text/html", **{"Content-Encoding": "gzip"}
        ),
        "/wrong-type": html(page("html as text/plain"), "text/plain"),
        "/binary-as-html": html(binary, "text/html"),
        "/empty": html(b""),
        "/http-500": status_500,
    }


def charset_routes() -> dict[str, Handler]:
    title = "Café crème"
    utf8, cp1252 = page(title), page(title).decode().encode("cp1252")
    long_cp1252 = page(title, extra=FRENCH * 20).decode().encode("cp1252")
    sjis = '<meta charset="shift_jis"><title>日本語のページ</title><p>こんにちは'.encode(
        "shift_jis"
    )
    # UTF-8 with a few stray Latin-1 bytes in the body text.
    mixed = page(title, extra=FRENCH * 3).replace(b"vu", b"v\xfc\xfc")
    utf16 = codecs.BOM_UTF16_LE + page(title).decode().encode("utf-16-le")
    return {
        "/header-utf8-body-cp1252": html(cp1252, "text/html; charset=utf-8"),
        "/header-latin1-body-utf8": html(utf8, "text/html; charset=iso-8859-1"),
        "/unknown-charset-utf8": html(utf8, "text/html; charset=x-klingon"),
        "/unknown-charset-cp1252": html(long_cp1252, "text/html; charset=bogus"),
        "/mixed-encodings": html(mixed, "text/html"),
        "/meta-shift-jis": html(sjis, "text/html"),
        "/utf16-bom": html(utf16, "text/html; charset=utf-8"),  # the BOM wins
    }


def links_routes() -> dict[str, Handler]:
    many = b"<title>many links</title>" + b"".join(b"<a href=m/%d>." % i for i in range(MANY_LINKS))
    odd = page(
        "odd links",
        "../../../../canary/dotdot",
        "/canary/with space",
        "/canary/ünïcödé?q=ü",
        "/canary/%7Etilde",
        "http://bücher.example/",
        "http://xn--caf-dma.example/x",
        "http://☃.example/snow",
    )
    return {
        "/many": html(many),
        "/m/{n}": html(page("one of many")),
        "/odd/deep/links": html(odd),
    }


async def bare_302(request: web.Request) -> web.StreamResponse:
    return web.Response(status=302)


def redirects_routes() -> dict[str, Handler]:
    other = f"http://{ADDRESS_PREFIX}{ROLES['redirects2']}:{{port}}"
    return {
        "/loop/a": redirect("/loop/b"),
        "/loop/b": redirect("/loop/a"),  # not linked: reached only inline from /loop/a
        "/loop2/a": redirect("/loop2/b"),
        "/loop2/b": redirect("/loop2/a"),
        "/self": redirect("/self", 301),
        "/to-empty": redirect(""),
        "/chain5/{n}": chain("/chain5"),
        "/chain7/{n}": chain("/chain7"),
        "/to-ftp": redirect("ftp://127.0.77.4/file"),
        "/to-javascript": redirect("javascript:alert(1)"),
        "/to-mailto": redirect("mailto:someone@example.com"),
        "/to-unserved-loopback": redirect(f"http://{UNSERVED_ADDRESS}:{{port}}/"),
        "/no-location": bare_302,
        "/cross": redirect(other + "/cross-back"),
    }


def redirects2_routes() -> dict[str, Handler]:
    back = f"http://{ADDRESS_PREFIX}{ROLES['redirects']}:{{port}}/cross"
    return {"/cross-back": redirect(back)}


# Paths a home page links to, per role (the {n} routes get concrete paths).
HOME_LINKS = {
    "redirects": ["/chain5/5", "/chain7/7"],
    "links": ["/many", "/odd/deep/links"],
    "robots-huge": ["/early/secret", "/late/secret"],
    "robots-binary": ["/bin-secret"],
    "http10": [
        "/close-mid-body",
        "/close-mid-chunk",
        "/close-before-headers",
        "/no-content-type",
        "/garbage-status",
    ],  # fmt: skip
}
CANARIES = ("/canary/0", "/canary/1", "/canary/2")
UNLINKED = frozenset({"/loop/b"})


def robots_txt(role: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if role == "robots-huge":
            pad = b"".join(b"# padding line %d\n" % i for i in range(ROBOTS_HUGE_PAD // 16))
            body = b"User-agent: *\nDisallow: /early/\n" + pad + b"Disallow: /late/\n"
            return web.Response(body=body, content_type="text/plain")
        if role == "robots-binary":
            noise = random.Random(3).randbytes(8192)
            body = noise + b"\nUser-agent: *\nDisallow: /bin-secret\n" + noise
            return web.Response(body=body, content_type="application/octet-stream")
        if role == "robots-loop":
            return web.Response(status=302, headers={"Location": "/robots-again.txt"})
        if role == "robots-5xx":
            return web.Response(status=503, text="overloaded\n")
        if role == "robots-timeout":
            await asyncio.sleep(STALL_S)
            return web.Response(text="User-agent: *\nDisallow:\n")
        return web.Response(status=404, text="no robots here\n")

    return handler


def routes_for(role: str) -> dict[str, Handler]:
    routes = {
        "pages": pages_routes,
        "charset": charset_routes,
        "links": links_routes,
        "redirects": redirects_routes,
        "redirects2": redirects2_routes,
    }.get(role, dict)()
    if role == "robots-loop":
        routes["/robots-again.txt"] = redirect("/robots.txt")
    if role == "robots-chain":
        routes["/robots.txt"] = redirect("/rc/7")
        routes["/rc/{n}"] = chain("/rc")
    routes.setdefault("/robots.txt", robots_txt(role))
    return routes


def home_links(role: str) -> list[str]:
    """What the home page of ``role`` links to: canaries around the hostile paths."""
    hostile = [p for p in routes_for(role) if "{" not in p and "robots" not in p]
    hostile = [p for p in hostile if p not in UNLINKED]
    if role == "redirects2":
        hostile = []  # reached by the cross-host redirect only
    return [CANARIES[0], *hostile, *HOME_LINKS.get(role, []), *CANARIES[1:]]


def make_app(role: str, log: AccessLog) -> web.Application:
    @web.middleware
    async def log_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
        log.write(request.transport, request.method, request.raw_path, request.headers)
        return await handler(request)

    async def home(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=page(f"home of {role}", *home_links(role)), content_type="text/html"
        )

    async def canary(request: web.Request) -> web.StreamResponse:
        return web.Response(body=page("canary"), content_type="text/html")

    app = web.Application(middlewares=[log_requests])
    app.router.add_get("/", home)
    for path, handler in routes_for(role).items():
        app.router.add_get(path, handler)
    app.router.add_get("/canary/{tail:.*}", canary)
    return app


class AccessLog:
    def __init__(self, path: Path | None) -> None:
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path else None

    def write(self, transport, method: str, path: str, headers) -> None:
        if self._file is None:
            return
        sockname = transport.get_extra_info("sockname") if transport else ("?", 0)
        entry = {"t": time.time(), "host": f"{sockname[0]}:{sockname[1]}", "method": method,
                 "path": path, "status": None, "ua": headers.get("User-Agent", "")}  # fmt: skip
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


# --- the raw HTTP/1.0 host ------------------------------------------------------------


def _raw_response(path: str) -> tuple[bytes, bytes] | None:
    """(head, body) to send and then close, or None to close without a word."""
    v10 = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n"  # no length, no keep-alive
    if path == "/":
        return v10, page("home of http10", *home_links("http10"))
    if path.startswith("/canary/"):
        return v10, page("canary")
    if path == "/close-mid-body":
        return b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10000\r\n\r\n", page(
            "cut short"
        )[:100]
    if path == "/close-mid-chunk":
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
        return head, b"400\r\n" + page("cut short")[:100]
    if path == "/no-content-type":
        return b"HTTP/1.0 200 OK\r\n\r\n", b"  <!DOCTYPE html>" + page("no type", "/canary/sniffed")
    if path == "/garbage-status":
        return b"SSH-2.0-OpenSSH_9.6\r\n", b"\x00\x01garbage"
    if path == "/close-before-headers":
        return None
    return b"HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\n\r\n", b"not found\n"


async def _serve_raw(log: AccessLog, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        log.write(writer.transport, method, path, headers)
        response = _raw_response(path)
        if response is not None:
            writer.write(response[0] + response[1])
            await writer.drain()
    except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
        pass
    finally:
        writer.close()


# --- serving ----------------------------------------------------------------------------


def bind(port: int) -> tuple[int, dict[str, socket.socket]]:
    """One listening socket per role address, all on one port (0: the kernel's pick)."""
    for _attempt in range(20):
        sockets: dict[str, socket.socket] = {}
        chosen = port
        try:
            for role, n in ROLES.items():
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets[role] = sock
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((ADDRESS_PREFIX + str(n), chosen))
                chosen = sock.getsockname()[1]
            return chosen, sockets
        except OSError:
            for sock in sockets.values():
                sock.close()
            if port:  # a fixed port is taken: nothing to retry
                raise
    raise OSError("no port free on every role address")


async def serve(port: int, access_log: Path | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bombs()  # build them before "ready"
    port, sockets = bind(port)
    log = AccessLog(access_log)
    runners, raw_servers = [], []
    for role, sock in sockets.items():
        if role in RAW_ROLES:
            sock.listen(128)
            handler = functools.partial(_serve_raw, log)
            raw_servers.append(await asyncio.start_server(handler, sock=sock))
            continue
        runner = web.AppRunner(make_app(role, log), access_log=None, handle_signals=False,
                               shutdown_timeout=1.0)  # fmt: skip
        await runner.setup()
        await web.SockSite(runner, sock).start()
        runners.append(runner)
    for role, n in ROLES.items():
        print(f"{role} http://{ADDRESS_PREFIX}{n}:{port}/")
    print("ready", flush=True)
    await stop.wait()
    for server in raw_servers:
        server.close()
    for runner in runners:
        await runner.cleanup()
    log.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.hostile_server", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0: pick a free port")
    parser.add_argument("--access-log", type=Path, default=None)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.access_log))


if __name__ == "__main__":
    main()
