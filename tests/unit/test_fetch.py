"""Fetcher tests against a real aiohttp server on 127.0.0.1.

No test resolves a name through the system resolver: names go through a stub
resolver, so nothing here can send a DNS query off the machine.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import ipaddress
import socket
import time
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from email.utils import formatdate
from typing import Any
from urllib.parse import quote

import brotli
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from trawler import netguard
from trawler.config import CrawlConfig
from trawler.fetch import Fetcher
from trawler.httpcodec import decode_body, parse_content_type, parse_retry_after
from trawler.netguard import GuardedResolver, PrivateAddressError, is_forbidden_address

pytestmark = pytest.mark.timeout(20)

HTML = b"<!doctype html><title>t</title>" + b"<p>hello</p>" * 100


@functools.cache
def gzip_bomb() -> bytes:
    return gzip.compress(bytes(50 * 1024 * 1024), compresslevel=9)


@functools.cache
def brotli_bomb() -> bytes:
    return brotli.compress(bytes(50 * 1024 * 1024), quality=5)


# --- the server -------------------------------------------------------------


async def html(request: web.Request) -> web.Response:
    return web.Response(body=HTML, content_type="text/html", charset="utf-8")


def encoded(coding: str, payload: bytes) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        headers = {"Content-Encoding": coding, "Content-Type": "text/html"}
        return web.Response(body=payload, headers=headers)

    return handler


async def big_with_length(request: web.Request) -> web.Response:
    return web.Response(body=bytes(2 * 1024 * 1024))


async def endless_chunked(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for _ in range(100_000):  # bounded, but far past any cap in these tests
        await resp.write(b"x" * 16384)
    return resp


async def chain(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    if n == 0:
        return await html(request)
    raise web.HTTPFound(f"/chain/{n - 1}")


async def redirect_to(request: web.Request) -> web.Response:
    status = int(request.query.get("status", "302"))
    return web.Response(status=status, headers={"Location": request.query["location"]})


async def loop_a(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("/loop-b")


async def loop_b(request: web.Request) -> web.Response:
    raise web.HTTPTemporaryRedirect("/loop-a")


async def slow(request: web.Request) -> web.Response:
    await asyncio.sleep(3)
    return await html(request)


async def late_body(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)  # headers at once, the rest of the body later
    await response.write(b"early")
    await asyncio.sleep(1.0)
    await response.write(b" late")
    await response.write_eof()
    return response


async def retry_after(request: web.Request) -> web.Response:
    return web.Response(
        status=int(request.query["status"]), headers={"Retry-After": request.query["value"]}
    )


async def content_type(request: web.Request) -> web.Response:
    return web.Response(body=b"x", headers={"Content-Type": request.query["value"]})


def build_app(hits: list[str]) -> web.Application:
    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        hits.append(request.path_qs)
        return await handler(request)

    app = web.Application(middlewares=[record])
    deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    routes = {
        "/html": html,
        "/gzip": encoded("gzip", gzip.compress(HTML)),
        "/deflate": encoded("deflate", zlib.compress(HTML)),
        "/deflate-raw": encoded("deflate", deflate.compress(HTML) + deflate.flush()),
        "/br": encoded("br", brotli.compress(HTML)),
        "/broken-gzip": encoded("gzip", b"\x1f\x8b\x08\x00garbage-not-gzip"),
        "/unknown-coding": encoded("compress", b"whatever"),
        "/bomb": encoded("gzip", gzip_bomb()),
        "/br-bomb": encoded("br", brotli_bomb()),
        "/big": big_with_length,
        "/endless": endless_chunked,
        "/chain/{n}": chain,
        "/to": redirect_to,
        "/loop-a": loop_a,
        "/loop-b": loop_b,
        "/slow": slow,
        "/late-body": late_body,
        "/retry": retry_after,
        "/ctype": content_type,
    }
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    return app


@pytest.fixture
def hits() -> list[str]:
    return []


@pytest.fixture
async def server(hits: list[str]) -> AsyncIterator[TestServer]:
    srv = TestServer(build_app(hits), host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()


def url(server: TestServer, path: str) -> str:
    return str(server.make_url(path))


class StubResolver(AbstractResolver):
    """Answers from a dict; any other name fails as NXDOMAIN would, locally."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        ip = self.names[host]
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        return [{"hostname": host, "host": ip, "port": port, "family": fam, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


@asynccontextmanager
async def fetcher(
    resolver: AbstractResolver | None = None, **settings: Any
) -> AsyncIterator[Fetcher]:
    settings.setdefault("allow_private", True)
    settings.setdefault("timeout_s", 5.0)
    f = Fetcher(CrawlConfig(**settings), resolver=resolver or StubResolver({}))
    await f.start()
    try:
        yield f
    finally:
        await f.close()


@pytest.fixture
def only_127_0_0_1_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the guard pass the test server's 127.0.0.1 but still refuse every
    other private address, so a redirect *from* the server can be tested."""
    real = netguard.is_forbidden_address
    test_server = ipaddress.ip_address("127.0.0.1")
    monkeypatch.setattr(netguard, "is_forbidden_address", lambda ip: ip != test_server and real(ip))


# --- plain responses ----------------------------------------------------------


async def test_html_200(server: TestServer) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, "/html"))
    assert r.ok and r.error is None
    assert r.status == 200
    assert r.body == HTML and r.raw_body == HTML
    assert (r.content_type, r.charset) == ("text/html", "utf-8")
    assert r.http_version == "1.1"
    assert r.ip_address == "127.0.0.1"
    assert r.final_url == r.url and r.redirects == []
    assert ("Content-Length", str(len(HTML))) in r.headers
    sent = dict(r.request_headers)
    assert sent["Host"] == f"127.0.0.1:{server.port}"
    assert sent["User-Agent"].startswith("Trawler/")
    assert "br" in sent["Accept-Encoding"]
    assert r.started_at == pytest.approx(time.time(), abs=5) and r.duration_s > 0


async def test_non_2xx_is_not_an_error(server: TestServer) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, "/nowhere"))
    assert r.status == 404 and r.error is None and not r.ok


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/deflate-raw", "/br"])
async def test_content_encodings_decoded(server: TestServer, path: str) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, path))
    assert r.error is None
    assert r.body == HTML
    assert r.raw_body != HTML  # the wire bytes are kept for the WARC


@pytest.mark.parametrize("path", ["/broken-gzip", "/unknown-coding"])
async def test_bad_encoding_keeps_raw(server: TestServer, path: str) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, path))
    assert r.error == "bad_encoding" and r.status == 200
    assert r.raw_body and r.body == b""


@pytest.mark.parametrize("path", ["/bomb", "/br-bomb"])
async def test_compression_bomb_is_too_large(server: TestServer, path: str) -> None:
    async with fetcher(max_bytes=1024 * 1024) as f:
        r = await f.fetch(url(server, path))
    assert r.error == "too_large"
    assert len(r.raw_body) < 1024 * 1024  # the wire body was small; its expansion was not


# --- size caps ----------------------------------------------------------------


async def test_content_length_over_cap(server: TestServer) -> None:
    async with fetcher(max_bytes=64 * 1024) as f:
        r = await f.fetch(url(server, "/big"))
    assert r.error == "too_large" and r.status == 200
    assert "Content-Length" in (r.error_detail or "")


async def test_endless_chunked_body_stops_at_cap(server: TestServer) -> None:
    async with fetcher(max_bytes=256 * 1024) as f:
        started = time.monotonic()
        r = await f.fetch(url(server, "/endless"))
    assert r.error == "too_large"
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("path", ["/big", "/endless", "/bomb"])
async def test_robots_is_cut_at_512_kib_not_refused(server: TestServer, path: str) -> None:
    # RFC 9309 §2.5: parse at least 500 KiB; a longer file is cut, not an error
    # (an error would make the whole host unavailable).
    async with fetcher() as f:  # max_bytes defaults to 10 MiB; robots has its own cap
        r = await f.fetch_robots(url(server, path))
    assert r.error is None and r.status == 200
    assert len(r.body) == 512 * 1024


def test_decode_body_caps_each_coding() -> None:
    payload = bytes(10_000)
    assert decode_body(gzip.compress(payload), "gzip", 10_000) == payload
    assert decode_body(payload, None, 10) == payload  # no coding: the raw cap applied already


# --- redirects -----------------------------------------------------------------


async def test_redirect_chain_followed(server: TestServer) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, "/chain/5"))
    assert r.ok and r.body == HTML
    assert r.final_url == url(server, "/chain/0")
    assert [h.status for h in r.redirects] == [302] * 5
    assert r.redirects[0].url == url(server, "/chain/5")
    assert r.redirects[0].location == "/chain/4"


async def test_more_than_max_redirects(server: TestServer) -> None:
    async with fetcher(max_redirects=5) as f:
        r = await f.fetch(url(server, "/chain/6"))
    assert r.error == "too_many_redirects"
    assert len(r.redirects) == 6


async def test_redirect_loop(server: TestServer) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, "/loop-a"))
    assert r.error == "redirect_loop"
    assert [h.status for h in r.redirects] == [301, 307]


@pytest.mark.parametrize("location", ["ftp://example.com/x", "mailto:someone@example.com"])
async def test_redirect_to_non_http(server: TestServer, location: str) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, f"/to?location={location}"))
    assert r.error == "bad_redirect"


@pytest.mark.parametrize("location", ["\\chain\\0", "..\\chain\\0", "/x/..\\chain/0"])
async def test_redirect_resolved_as_browsers_do(server: TestServer, location: str) -> None:
    # WHATWG URL: "\\" is "/" in an http(s) URL (IIS and Windows-made sites send these).
    async with fetcher() as f:
        r = await f.fetch(url(server, f"/to?location={quote(location)}"))
    assert r.ok and r.body == HTML
    assert r.final_url == url(server, "/chain/0")


@pytest.mark.parametrize("location", ["http://?", "http://[::1", "https://256.0.0.1/", "https:"])
async def test_redirect_to_no_url(server: TestServer, location: str) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, f"/to?location={quote(location)}"))
    assert r.error == "bad_redirect"


async def test_hop_check_vetoes_hop(server: TestServer, hits: list[str]) -> None:
    checked: list[str] = []

    async def hop_check(target: str) -> str | None:
        checked.append(target)
        return "out_of_scope" if target.endswith("/chain/1") else None

    async with fetcher() as f:
        r = await f.fetch(url(server, "/chain/3"), hop_check=hop_check)
    assert r.error == "out_of_scope"
    assert r.final_url == url(server, "/chain/1")
    assert checked == [url(server, "/chain/2"), url(server, "/chain/1")]
    assert "/chain/1" not in hits  # the vetoed hop was never requested


async def test_robots_follows_five_redirects_without_hop_check(server: TestServer) -> None:
    async with fetcher(max_redirects=0) as f:
        r = await f.fetch_robots(url(server, "/chain/5"))
    assert r.ok and len(r.redirects) == 5


async def test_on_sent_called_once_per_hop(server: TestServer) -> None:
    sent: list[float] = []
    async with fetcher() as f:
        before = time.monotonic()
        r = await f.fetch(url(server, "/chain/2"), on_sent=sent.append)
        after = time.monotonic()
    assert r.ok
    assert len(sent) == 3
    assert before <= sent[0] <= sent[1] <= sent[2] <= after


# --- private-network guard -------------------------------------------------------


async def test_loopback_literal_refused_unless_allowed(server: TestServer, hits: list[str]) -> None:
    async with fetcher(allow_private=False) as f:
        r = await f.fetch(url(server, "/html"))
    assert r.error == "private_address" and r.status is None
    assert hits == []
    async with fetcher(allow_private=True) as f:
        r = await f.fetch(url(server, "/html"))
    assert r.ok


@pytest.mark.parametrize(
    "host", ["[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "169.254.169.254", "127.0.0.2"]
)
async def test_private_literals_refused_before_connecting(host: str) -> None:
    async with fetcher(allow_private=False) as f:
        r = await f.fetch(f"http://{host}:9/")
    assert r.error == "private_address"


async def test_non_canonical_ipv4_refused() -> None:
    async with fetcher(allow_private=False) as f:
        r = await f.fetch("http://127.1:9/")
    assert r.error in ("bad_url", "private_address")


async def test_name_resolving_to_private_refused(server: TestServer, hits: list[str]) -> None:
    resolver = StubResolver({"intranet.test": "127.0.0.1"})
    async with fetcher(resolver, allow_private=False) as f:
        r = await f.fetch(f"http://intranet.test:{server.port}/html")
    assert r.error == "private_address"
    assert hits == []
    async with fetcher(resolver, allow_private=True) as f:
        r = await f.fetch(f"http://intranet.test:{server.port}/html")
    assert r.ok and r.ip_address == "127.0.0.1"


@pytest.mark.usefixtures("only_127_0_0_1_public")
@pytest.mark.parametrize("target_host", ["127.0.0.2", "intranet.test"])
async def test_redirect_to_private_refused(server: TestServer, target_host: str) -> None:
    resolver = StubResolver({"intranet.test": "127.0.0.2"})
    target = f"http://{target_host}:{server.port}/html"
    async with fetcher(resolver, allow_private=False) as f:
        assert (await f.fetch(url(server, "/html"))).ok  # the patched guard lets the server pass
        r = await f.fetch(url(server, f"/to?location={target}"))
    assert r.error == "private_address"
    assert r.final_url == target
    assert len(r.redirects) == 1


async def test_guarded_resolver_drops_private_answers() -> None:
    class TwoAnswers(StubResolver):
        async def resolve(self, host: str, port: int = 0, family: Any = 0) -> list[ResolveResult]:
            return [
                {"hostname": host, "host": ip, "port": port, "family": 2, "proto": 0, "flags": 0}
                for ip in ("10.0.0.7", "93.184.215.14")
            ]

    answers = await GuardedResolver(TwoAnswers({})).resolve("mixed.test", 80)
    assert [a["host"] for a in answers] == ["93.184.215.14"]
    with pytest.raises(PrivateAddressError):
        await GuardedResolver(StubResolver({"lan.test": "192.168.1.1"})).resolve("lan.test")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
        "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "255.255.255.255",
        "::1", "::", "fe80::1", "fc00::1", "ff02::1", "::ffff:127.0.0.1",
        "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:c0a8:101::1",
    ],
)  # fmt: skip
def test_forbidden_addresses(address: str) -> None:
    assert is_forbidden_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_allowed(address: str) -> None:
    assert not is_forbidden_address(ipaddress.ip_address(address))


# --- network failures ------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_connection_refused() -> None:
    async with fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{closed_port()}/")
    assert r.error == "connect" and r.status is None
    assert r.error_detail and "\n" not in r.error_detail


async def test_timeout(server: TestServer) -> None:
    async with fetcher(timeout_s=0.5) as f:
        r = await f.fetch(url(server, "/slow"))
    assert r.error == "timeout"
    assert 0.4 < r.duration_s < 2


async def test_timeouts_hold_for_requests_out_together_and_after_a_quiet_spell(
    server: TestServer,
) -> None:
    """Deadlines are checked on one shared tick that stops while no request is out:
    each of several requests out at once times out, and so does one sent after."""
    async with fetcher(timeout_s=0.5) as f:
        together = await asyncio.gather(*(f.fetch(url(server, f"/slow?{i}")) for i in range(3)))
        await asyncio.sleep(0.3)  # past a tick with nothing out
        alone = await f.fetch(url(server, "/slow"))
    for r in [*together, alone]:
        assert r.error == "timeout"
        assert 0.4 < r.duration_s < 2


async def test_first_byte_timeout_is_shorter_than_the_total() -> None:
    # Accepts the connection, never answers: only the kernel's listen queue.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        async with fetcher(timeout_s=30, first_byte_timeout_s=0.5) as f:
            r = await f.fetch(f"http://127.0.0.1:{silent.getsockname()[1]}/")
    assert r.error == "timeout" and r.status is None
    assert r.error_detail == "no response headers within 0.5 s"
    assert 0.4 < r.duration_s < 2


async def test_first_byte_timeout_does_not_cut_a_slow_body(server: TestServer) -> None:
    async with fetcher(timeout_s=5, first_byte_timeout_s=0.5) as f:
        r = await f.fetch(url(server, "/late-body"))
    assert r.error is None and r.body == b"early late"


@pytest.mark.parametrize("allow_private", [True, False])
async def test_dns_failure(allow_private: bool) -> None:
    # The stub fails the lookup locally; the system resolver would ask the network.
    async with fetcher(allow_private=allow_private) as f:
        r = await f.fetch("http://nonexistent.invalid/")
    assert r.error == "dns"


@asynccontextmanager
async def raw_server(response: bytes) -> AsyncIterator[int]:
    """A socket server that sends ``response`` to each client, then hangs up."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(response)
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        await srv.wait_closed()


async def test_server_closes_mid_body() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
    async with raw_server(head + b"x" * 1000) as port, fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.error == "connection_closed"


@pytest.mark.parametrize("bad", ["not a url", "http://", "ftp://example.com/", "http://a:99999/"])
async def test_bad_url(bad: str) -> None:
    async with fetcher() as f:
        r = await f.fetch(bad)
    assert r.error == "bad_url", r.error_detail


# --- header parsing ---------------------------------------------------------------


async def test_retry_after_seconds_and_date(server: TestServer) -> None:
    date = formatdate(time.time() + 120, usegmt=True)
    async with fetcher() as f:
        seconds = await f.fetch(url(server, "/retry?status=429&value=120"))
        dated = await f.fetch(url(server, f"/retry?status=503&value={date}"))
        ignored = await f.fetch(url(server, "/retry?status=200&value=120"))
    assert seconds.retry_after_s == 120.0
    assert dated.retry_after_s == pytest.approx(120, abs=3)
    assert ignored.retry_after_s is None


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("0", now) == 0.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now) == pytest.approx(30)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now) == 0.0  # past: no wait
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("-5", now) is None
    assert parse_retry_after(None, now) is None
    # Digits to str.isdigit() but not to float(): raised ValueError, and the
    # fetch of a 503 with "Retry-After: ²" was recorded as bad_url.
    assert parse_retry_after("\u00b2", now) is None
    assert parse_retry_after("\u0663", now) is None  # Arabic-Indic three


async def test_content_type_parsed_from_response(server: TestServer) -> None:
    async with fetcher() as f:
        r = await f.fetch(url(server, '/ctype?value=Text/HTML; Charset="ISO-8859-1"'))
    assert (r.content_type, r.charset) == ("text/html", "ISO-8859-1")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (None, None)),
        ("", (None, None)),
        ("text/html", ("text/html", None)),
        ("application/XHTML+xml; q=1; charset=utf-8", ("application/xhtml+xml", "utf-8")),
        ("text/plain; charset='latin1' ", ("text/plain", "latin1")),
        ("; charset=utf-8", (None, "utf-8")),
    ],
)
def test_parse_content_type(value: str | None, expected: tuple[str | None, str | None]) -> None:
    assert parse_content_type(value) == expected


def test_profile_differs_by_what_decides_a_servers_answer() -> None:
    """Shared robots.txt is keyed by the profile: the User-Agent and the reach count;
    options that do not change the request (the delay) do not."""

    def profile(**settings: Any) -> str:
        return Fetcher(CrawlConfig(**settings)).profile

    assert profile() == profile(delay_s=5.0)
    assert profile() != profile(allow_private=True)
    assert profile() != profile(user_agent="OtherBot/1.0")
