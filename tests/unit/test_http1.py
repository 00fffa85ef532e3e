"""The fetcher's own HTTP/1.1 client (http1.py) and its pools (connectors.py),
against a scripted keep-alive server on 127.0.0.1 that logs every connection
and every request it reads.

What is checked from the server's log: connections are reused, a request is
never sent twice, the server's wish to close is honoured, and no idle
connection outlives its time.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import ssl
import subprocess
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.connectors import (
    FD_RESERVE,
    MAX_IDLE,
    MAX_IDLE_PER_HOST,
    Connectors,
    process_idle_limit,
)
from trawler.fetch import Fetcher
from trawler.http1 import Connection

pytestmark = pytest.mark.timeout(30)

PAGE = b"<!doctype html><title>t</title>" + b"<p>hello</p>" * 50
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE

# answer(connection number, request number on that connection, target) ->
# (bytes to send, close after sending), or None: close without a word.
Answer = Callable[[int, int, str], tuple[bytes, bool] | None]


@dataclass
class Log:
    requests: list[tuple[int, str]] = field(default_factory=list)  # (connection, target)
    connections: int = 0
    closed_by_client: list[int] = field(default_factory=list)  # connections the client ended


@asynccontextmanager
async def server(
    answer: Answer, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[int, Log]]:
    log = Log()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, log.connections = log.connections, log.connections + 1
        try:
            for n in range(100):  # bounded: a test sends a handful
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode("latin-1")
                log.requests.append((conn, target))
                reply = answer(conn, n, target)
                if reply is None:
                    return
                writer.write(reply[0])
                await writer.drain()
                if reply[1]:
                    return
        except asyncio.IncompleteReadError:
            log.closed_by_client.append(conn)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    try:
        yield srv.sockets[0].getsockname()[1], log
    finally:
        srv.close()


@asynccontextmanager
async def fetcher(
    connectors: Connectors | None = None, **settings: float
) -> AsyncIterator[Fetcher]:
    connectors = connectors or Connectors()
    f = Fetcher(CrawlConfig(allow_private=True, **settings), connectors=connectors)
    await f.start()
    try:
        yield f
    finally:
        await f.close()
        await connectors.close()


def always(reply: bytes, close: bool = False) -> Answer:
    return lambda conn, n, target: (reply, close)


async def settle() -> None:
    """Let a close the server sent reach the client (loopback: well under this)."""
    await asyncio.sleep(0.2)


# --- keep-alive --------------------------------------------------------------------


async def test_connection_reused_for_each_request() -> None:
    async with server(always(OK)) as (port, log), fetcher() as f:
        for i in range(5):
            r = await f.fetch(f"http://127.0.0.1:{port}/p{i}")
            assert r.ok and r.body == PAGE
    assert log.requests == [(0, f"/p{i}") for i in range(5)]


async def test_jobs_share_the_process_pool() -> None:
    connectors = Connectors()
    async with server(always(OK)) as (port, log):
        for _ in range(2):  # two jobs, one after the other, one Services
            job = Fetcher(CrawlConfig(allow_private=True), connectors=connectors)
            await job.start()
            assert (await job.fetch(f"http://127.0.0.1:{port}/")).ok
            await job.close()
        await connectors.close()
    assert log.connections == 1


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n",  # 1.0: no keep-alive unless asked
    ],
)
async def test_server_wish_to_close_honoured(head: bytes) -> None:
    # The server keeps the socket open: only the header says it will not take another request.
    async with server(always(head % len(PAGE) + PAGE)) as (port, log), fetcher() as f:
        for _ in range(3):
            assert (await f.fetch(f"http://127.0.0.1:{port}/")).body == PAGE
        await settle()
    assert log.connections == 3
    assert sorted(log.closed_by_client) == [0, 1, 2]


async def test_http10_keep_alive_reused() -> None:
    head = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: %d\r\n\r\n"
    async with server(always(head % len(PAGE) + PAGE)) as (port, log), fetcher() as f:
        for _ in range(3):
            r = await f.fetch(f"http://127.0.0.1:{port}/")
            assert r.body == PAGE and r.http_version == "1.0"
    assert log.connections == 1


async def test_idle_connection_closed_by_server_is_not_reused() -> None:
    # Answers, then hangs up: the next fetch must see the close and open a new connection.
    async with server(always(OK, close=True)) as (port, log), fetcher() as f:
        first = await f.fetch(f"http://127.0.0.1:{port}/a")
        await settle()
        second = await f.fetch(f"http://127.0.0.1:{port}/b")
    assert first.ok and second.ok
    assert log.requests == [(0, "/a"), (1, "/b")]


async def test_stale_connection_is_an_error_never_a_resend() -> None:
    """The server takes the second request on the kept connection and hangs up
    without a word: that is connection_closed, and the request is not sent
    again on a new connection (the server would see it twice, back to back)."""

    def answer(conn: int, n: int, target: str) -> tuple[bytes, bool] | None:
        return (OK, False) if n == 0 else None

    async with server(answer) as (port, log), fetcher() as f:
        assert (await f.fetch(f"http://127.0.0.1:{port}/a")).ok
        r = await f.fetch(f"http://127.0.0.1:{port}/b")
        await settle()
    assert r.error == "connection_closed" and r.status is None
    assert log.requests == [(0, "/a"), (0, "/b")]


async def test_idle_connections_closed_after_idle_time() -> None:
    async with server(always(OK)) as (port, log), fetcher(Connectors(idle_s=0.3)) as f:
        assert (await f.fetch(f"http://127.0.0.1:{port}/a")).ok
        await asyncio.sleep(1.0)  # the sweep runs at 0.3 s, then every 0.1 s
        assert log.closed_by_client == [0]
        assert (await f.fetch(f"http://127.0.0.1:{port}/b")).ok
    assert log.requests == [(0, "/a"), (1, "/b")]


async def test_idle_connections_per_host_bounded() -> None:
    many = MAX_IDLE_PER_HOST + 3
    async with server(always(OK)) as (port, log), fetcher() as f:
        # Concurrent fetches need a connection each; then all but the bound are closed.
        results = await asyncio.gather(
            *(f.fetch(f"http://127.0.0.1:{port}/{i}") for i in range(many))
        )
        assert all(r.ok for r in results)
        await settle()
        assert log.connections == many
        assert len(log.closed_by_client) == many - MAX_IDLE_PER_HOST


async def test_idle_connections_of_the_process_bounded_the_newest_closed() -> None:
    """Past the process's bound on kept connections (from its descriptor limit), a
    connection that goes idle is closed, whichever host it is to; those kept stay,
    in use again or not."""
    async with (
        server(always(OK)) as (port_a, log_a),
        server(always(OK)) as (port_b, log_b),
        server(always(OK)) as (port_c, log_c),
        fetcher(Connectors(max_idle=2)) as f,
    ):
        for port in (port_a, port_b, port_c):
            assert (await f.fetch(f"http://127.0.0.1:{port}/1")).ok
        await settle()
        assert (log_a.closed_by_client, log_b.closed_by_client) == ([], [])
        assert log_c.closed_by_client == [0]
        for port in (port_b, port_c, port_a):
            assert (await f.fetch(f"http://127.0.0.1:{port}/2")).ok
    assert (log_a.connections, log_b.connections, log_c.connections) == (1, 1, 2)


async def test_hosts_taken_in_turn_past_the_bound_keep_their_connections() -> None:
    """A crawl takes its hosts in turn: with more hosts than places, closing the
    connection idle the longest (the next host's) would open one for every request,
    9 here; the two hosts that hold a place keep theirs."""
    async with (
        server(always(OK)) as (port_a, log_a),
        server(always(OK)) as (port_b, log_b),
        server(always(OK)) as (port_c, log_c),
        fetcher(Connectors(max_idle=2)) as f,
    ):
        for turn in range(3):
            for port in (port_a, port_b, port_c):
                assert (await f.fetch(f"http://127.0.0.1:{port}/{turn}")).ok
                await settle()
    assert (log_a.connections, log_b.connections, log_c.connections) == (1, 1, 3)


def test_idle_bound_leaves_descriptors_for_connections_in_use_and_files() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert process_idle_limit(256) == max(0, min(MAX_IDLE, soft - 256 - FD_RESERVE))


# --- bodies --------------------------------------------------------------------------


async def test_chunked_body_kept_as_decoded_from_chunks() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n"
    )
    async with server(always(chunked)) as (port, log), fetcher() as f:
        r1 = await f.fetch(f"http://127.0.0.1:{port}/1")
        r2 = await f.fetch(f"http://127.0.0.1:{port}/2")
    assert r1.raw_body == r2.raw_body == b"hello, world"
    assert ("Transfer-Encoding", "chunked") in r1.headers
    assert log.connections == 1  # a chunked body ends in-band: the connection stays


async def test_close_delimited_body() -> None:
    body = b"<p>until the end</p>" * 500
    reply = always(b"HTTP/1.0 200 OK\r\n\r\n" + body, close=True)
    async with server(reply) as (port, _), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.error is None and r.raw_body == body and r.http_version == "1.0"


async def test_interim_response_skipped() -> None:
    async with server(always(b"HTTP/1.1 100 Continue\r\n\r\n" + OK)) as (port, _), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.status == 200 and r.body == PAGE
    assert ("Content-Length", str(len(PAGE))) in r.headers and len(r.headers) == 2


async def test_interim_response_headers_are_not_the_final_ones() -> None:
    """103 Early Hints has headers of its own: the final response's are what count."""
    hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nContent-Type: text/plain\r\n\r\n"
    async with server(always(hints + OK)) as (port, _), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.status == 200 and r.body == PAGE and r.content_type == "text/html"
    assert r.headers == [("Content-Type", "text/html"), ("Content-Length", str(len(PAGE)))]


async def test_headers_as_sent() -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2  \r\nSet-Cookie: caf\xe9\r\n"
        b"Content-Length: 2\r\n\r\nhi"
    )
    async with server(always(head)) as (port, _), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.headers == [
        ("X-A", "1"),
        ("x-a", "2"),
        ("Set-Cookie", "caf\udce9"),  # surrogateescape: the WARC gets the byte back
        ("Content-Length", "2"),
    ]


async def test_extra_bytes_after_a_response_spoil_the_connection() -> None:
    async with server(always(OK + b"HTTP/1.1 200 OK\r\n")) as (port, log), fetcher() as f:
        for _ in range(2):
            assert (await f.fetch(f"http://127.0.0.1:{port}/")).body == PAGE
    assert log.connections == 2


async def test_garbage_is_http_error() -> None:
    async with server(always(b"SSH-2.0-OpenSSH_9.6\r\n", close=True)) as (port, _), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
    assert r.error == "http_error" and r.status is None


# --- https ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl, as on every CI image)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


async def test_https_untrusted_certificate_is_tls_error(certificate: tuple[Path, Path]) -> None:
    async with server(always(OK), server_tls(certificate)) as (port, log), fetcher() as f:
        r = await f.fetch(f"https://127.0.0.1:{port}/")
    assert r.error == "tls" and r.status is None
    assert log.requests == []


async def test_https_fetch_with_keep_alive(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # the default context trusts it
    async with server(always(OK), server_tls(certificate)) as (port, log), fetcher() as f:
        for _ in range(3):
            r = await f.fetch(f"https://127.0.0.1:{port}/")
            assert r.ok and r.body == PAGE and r.ip_address == "127.0.0.1"
    assert log.connections == 1


async def test_endless_header_refused_at_a_bound() -> None:
    """llhttp keeps a header line whole until it ends: the head is bounded, or a
    server sending one endless header would fill the memory until the timeout."""

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nX-Endless: ")
        try:
            for _ in range(10_000):  # 640 MB at most; the client stops it far sooner
                writer.write(b"a" * 65536)
                await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    srv = await asyncio.start_server(endless, "127.0.0.1", 0)
    try:
        async with fetcher(timeout_s=20, first_byte_timeout_s=20) as f:
            r = await f.fetch(f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/")
    finally:
        srv.close()
    assert r.error == "http_error" and "too large" in (r.error_detail or "")
    assert r.duration_s < 5


async def test_connection_limit_holds_over_concurrent_fetches() -> None:
    async with server(always(OK)) as (port, log), fetcher(Connectors(limit=2)) as f:
        results = await asyncio.gather(*(f.fetch(f"http://127.0.0.1:{port}/{i}") for i in range(6)))
    assert all(r.ok for r in results)
    assert log.connections == 2 and len(log.requests) == 6


# --- memory --------------------------------------------------------------------------


def _holds(root: object, marker: bytes, depth: int = 4) -> bool:
    """Whether anything reachable from ``root`` (within ``depth`` references) is a
    bytes object containing ``marker``."""
    seen: set[int] = set()
    level = [root]
    for _ in range(depth):
        following = []
        for obj in level:
            if id(obj) in seen or isinstance(obj, type | asyncio.AbstractEventLoop):
                continue
            seen.add(id(obj))
            if isinstance(obj, bytes | bytearray | memoryview) and marker in bytes(obj):
                return True
            following.extend(gc.get_referents(obj))
        level = following
    return False


async def test_idle_pooled_connection_holds_no_body() -> None:
    """At 8,000 hosts the last response of each kept connection was ~230 MB."""
    marker = b"<p>a body an idle connection must not keep</p>"
    body = marker * 2000
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    async with server(always(reply)) as (port, log), fetcher() as f:
        r = await f.fetch(f"http://127.0.0.1:{port}/")
        assert r.raw_body == body
        del r
        idle = [o for o in gc.get_objects() if isinstance(o, Connection) and o.reusable]
        assert len(idle) == 1  # the fetch's connection, back in the pool
        assert not _holds(idle[0], marker)
    assert log.connections == 1


async def test_a_closed_connection_is_freed_without_the_collector() -> None:
    """A finished connection leaves no cycle for the collector: its parser holds the
    connection's bound methods. With young collections every 100,000 new objects
    (gcpolicy.py), 64,000 closed connections (~150 MB) waited for the collector on
    the 20,000-host benchmark (bench/RESULTS.md, session 34)."""
    closing = OK.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    async with server(always(closing, close=True)) as (port, log), fetcher() as f:
        gc.collect()
        gc.disable()
        try:
            assert (await f.fetch(f"http://127.0.0.1:{port}/a")).ok
            used = [weakref.ref(o) for o in gc.get_objects() if isinstance(o, Connection)]
            await settle()  # the close reaches the protocol: connection_lost
            assert len(used) == 1 and used[0]() is None
        finally:
            gc.enable()
    assert log.connections == 1
