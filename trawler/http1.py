"""A lean HTTP/1.1 client connection: one GET at a time over an ``asyncio.Protocol``.

The crawl's event loop is its bottleneck, and a general client (aiohttp) spends
much of it on stream plumbing, several timers and futures per request. Here a
connection parses with ``httptools`` (llhttp, in C) straight into one response
record, wakes its one waiting task with one future per wait, and arms no timer
per request: the pool's ``Deadlines`` checks every connection with a request out
on one coarse tick (data arriving never touches it).

What it does not do, on purpose: re-send a request (politeness: the server
must never see a request twice back to back), cookies, proxies, request bodies.
Pools of these connections are in connectors.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httptools

from trawler.httpcodec import FetchError

# As aiohttp's parser: no more headers than this, no longer a header than this.
MAX_HEADERS = 128
MAX_FIELD_BYTES = 8190
MAX_HEAD_BYTES = MAX_HEADERS * MAX_FIELD_BYTES


class ConnectionClosed(Exception):
    """The server closed (or reset) the connection before the response was complete."""


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.x response."""


@dataclass(slots=True)
class Response:
    """One response as received: the head, and the body as sent on the wire."""

    status: int = 0
    http_version: str = "1.1"
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    content_length: int | None = None
    chunks: list[bytes] = field(default_factory=list)
    body_bytes: int = 0
    # Lowercase name → its first value, filled as the headers arrive: the five or so
    # lookups of a response (length, codings, type, location) are one dict get each.
    first: dict[bytes, bytes] = field(default_factory=dict)

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lowercase), or None."""
        return self.first.get(name)


_HEAD, _BODY, _DONE = 0, 1, 2  # what the waiting task waits for
# How often the request deadlines are checked: a timeout ends at most this much late.
TICK_S = 0.1


class Deadlines:
    """The request deadlines of one loop's connections, checked on one coarse tick.

    A timer per request (``call_at``, then ``cancel``) cost a TimerHandle and two
    heap operations of Python-level comparisons per request in the crawl's
    saturated event loop; one tick every ``TICK_S`` over the connections with a
    request out costs a set add and discard per request, and runs only while
    some request is out.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._out: set[Connection] = set()
        self._tick: asyncio.TimerHandle | None = None

    def watch(self, conn: Connection) -> None:
        self._out.add(conn)
        if self._tick is None:
            self._tick = self.loop.call_later(TICK_S, self._check)

    def unwatch(self, conn: Connection) -> None:
        self._out.discard(conn)

    def close(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self._out.clear()

    def _check(self) -> None:
        self._tick = None
        now = self.loop.time()
        late = [conn for conn in self._out if conn.due <= now]
        for conn in late:  # (a list first: expiring one unwatches it)
            conn.expire(now)
        if self._out:
            self._tick = self.loop.call_later(TICK_S, self._check)


class Connection(asyncio.Protocol):
    """One keep-alive connection; ``key`` is its pool's (scheme, host, port)."""

    def __init__(
        self, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop, deadlines: Deadlines
    ) -> None:
        self.key = key
        self.peer: str | None = None
        self.idle_since = 0.0
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser: Any = _new_parser(self)  # None once the connection is lost
        self._lost = False
        self._reusable = False
        self._active = False  # a request is out and its response not yet complete
        self._response = Response()
        self._stage = _DONE
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._read_until_close = False
        self._body_limit = 0  # wake the reader once the body is past this many bytes
        self._head_bytes = 0  # received while waiting for the headers
        self._deadlines = deadlines
        self.due = 0.0  # (loop clock) when Deadlines must look at this request next
        self._head_deadline = 0.0
        self._deadline = 0.0
        self._head_timeout_s = 0.0

    # --- used by the pool and the fetcher ------------------------------------

    @property
    def reusable(self) -> bool:
        """Idle, complete, and the server did not ask to close."""
        transport = self._transport
        return (
            self._reusable
            and not self._lost
            and not self._active
            and transport is not None
            and not transport.is_closing()
        )

    def send(
        self, request: bytes, head_deadline: float, deadline: float, head_timeout_s: float
    ) -> float:
        """Write ``request``; returns the time.monotonic() it was handed to the transport.

        Deadlines are on the loop's clock. ``head_deadline``: the response headers
        must be in by then (--first-byte-timeout, whose length ``head_timeout_s``
        names the error); ``deadline``: the whole response.
        """
        if self._lost or self._transport is None:
            raise ConnectionClosed("connection closed before the request was sent")
        # self._response is a fresh one: from __init__, or from finish() after the last exchange.
        self._active, self._reusable, self._error = True, False, None
        self._stage, self._read_until_close = _HEAD, False
        self._body_limit = self._head_bytes = 0
        self._head_deadline, self._deadline = head_deadline, deadline
        self._head_timeout_s = head_timeout_s
        self.due = min(head_deadline, deadline)
        self._deadlines.watch(self)
        self._transport.write(request)
        return time.monotonic()  # politeness is measured on this clock

    async def read_head(self) -> Response:
        """Wait for the response's status line and headers."""
        while self._stage == _HEAD and self._error is None:
            await self._wait_for_data()
        self._raise_error()
        return self._response

    async def read_body(self, max_bytes: int) -> bool:
        """Read the body, up to a little past ``max_bytes``; True once it is complete.

        False: the body grew past ``max_bytes`` (the caller cuts or refuses it and
        must ``close()`` the connection, mid-body).
        """
        response = self._response
        while self._stage == _BODY and response.body_bytes <= max_bytes:
            self._raise_error()
            self._body_limit = max_bytes
            await self._wait_for_data()
        self._raise_error()
        return self._stage == _DONE

    def finish(self) -> None:
        """The exchange is over (read, refused or failed): stop watching its deadlines,
        and let go of the response (the caller has it): an idle connection must not
        keep a body alive."""
        self._deadlines.unwatch(self)
        if self._stage != _DONE:
            self.close()
        self._response, self._waiter = Response(), None

    def close(self) -> None:
        self._reusable = False
        if self._transport is not None:
            self._transport.close()

    # --- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else None

    def data_received(self, data: bytes) -> None:
        if not self._active:  # bytes nobody asked for: this connection is not to be trusted
            self.close()
            return
        if self._stage == _HEAD:  # llhttp buffers a header line whole: bound it first
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(ProtocolError("response headers too large"))
                return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # 101: a response without a body, and the end
            self._reusable = False
            if self._stage == _BODY:
                self._stage, self._active = _DONE, False
                self._wake()
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"not an HTTP response: {exc}"))
        except ProtocolError as exc:
            self._fail(exc)
        if self._stage == _BODY and self._response.body_bytes > self._body_limit > 0:
            self._wake()  # past the caller's cap: let it decide now

    def eof_received(self) -> bool:
        self._end(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        # The parser holds this protocol's bound methods: a cycle, which the young
        # collections (every 100,000 new objects: gcpolicy.py) rarely reach once the
        # connection has outlived one. Cut, a closed connection is freed as its last
        # user lets go (64,000 waited for the collector, ~150 MB, on the 20,000-host
        # benchmark: bench/RESULTS.md, session 34). No bytes come after this call.
        self._parser = None
        self._transport = None

    # --- httptools callbacks ---------------------------------------------------

    def on_message_begin(self) -> None:
        if self._stage == _DONE:  # a second response to one request
            self._reusable = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._stage != _HEAD:
            return
        response = self._response
        if len(name) + len(value) > MAX_FIELD_BYTES or len(response.raw_headers) >= MAX_HEADERS:
            raise ProtocolError("response headers too large")
        # llhttp strips the whitespace before a value, not after (RFC 9110 §5.5: OWS).
        value = value.rstrip(b" \t")
        response.raw_headers.append((name, value))
        response.first.setdefault(name.lower(), value)

    def on_headers_complete(self) -> None:
        if self._stage != _HEAD:
            return
        parser, response = self._parser, self._response
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # RFC 9110 §15.2: interim; the real one follows
            response.raw_headers, response.first = [], {}
            return
        response.status = status
        response.http_version = parser.get_http_version()
        length = response.header(b"content-length")
        response.content_length = int(length) if length is not None and length.isdigit() else None
        coding = response.header(b"transfer-encoding")
        chunked = coding is not None and coding.rstrip().lower().endswith(b"chunked")
        # RFC 9112 §6.3: neither chunked nor a length: the body ends when the server closes.
        self._read_until_close = response.content_length is None and not chunked
        self._stage = _BODY
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._stage == _BODY:
            self._response.chunks.append(body)
            self._response.body_bytes += len(body)

    def on_message_complete(self) -> None:
        if self._stage != _BODY:  # the end of an interim response
            return
        self._stage = _DONE
        self._active = False
        self._reusable = self._parser.should_keep_alive()
        self.idle_since = self._loop.time()
        self._wake()

    # --- internals ---------------------------------------------------------------

    def _end(self, exc: Exception | None) -> None:
        """The server closed: a close-delimited body is complete, anything else cut."""
        self._lost = True
        self._reusable = False
        if not self._active:
            return
        if self._stage == _BODY and self._read_until_close and exc is None:
            self._stage, self._active = _DONE, False
            self._wake()
            return
        if self._stage == _HEAD and exc is not None:
            self._fail(exc)  # reset before the response: an OSError, "connect" (as aiohttp)
            return
        where = "before the response" if self._stage == _HEAD else "mid-body"
        detail = f"server closed the connection {where}"
        self._fail(ConnectionClosed(f"{detail}: {exc}" if exc else detail))

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._active = False
        self.close()
        self._wake()

    def expire(self, now: float) -> None:
        """``due`` has passed (Deadlines): fail the request if its deadline has."""
        if not self._active:
            self._deadlines.unwatch(self)
            return
        head = self._stage == _HEAD and self._head_deadline <= self._deadline
        due = self._head_deadline if head else self._deadline
        if now < due:  # the headers came in time: now the body's deadline
            self.due = due
            return
        self._deadlines.unwatch(self)
        if head:
            limit = f"{self._head_timeout_s:g}"
            self._fail(FetchError("timeout", f"no response headers within {limit} s"))
        else:
            self._fail(TimeoutError("the response did not complete within --timeout"))

    def _wait_for_data(self) -> asyncio.Future[None]:
        """A future the protocol's callbacks resolve (``_wake``), awaited by the
        reader itself: no coroutine of its own, one level less to resume a page.
        ``_wake`` may find it done already (cancelled): it is replaced by the next."""
        waiter = self._waiter = self._loop.create_future()
        return waiter

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error


def _new_parser(protocol: Connection) -> Any:
    parser = httptools.HttpResponseParser(protocol)
    # What aiohttp's response parser allows too: real servers send these.
    parser.set_dangerous_leniencies(
        lenient_headers=True,
        lenient_optional_cr_before_lf=True,
        lenient_spaces_after_chunk_size=True,
    )
    return parser
