"""The fetcher: one HTTP GET, with its redirects, caps and guards, into a FetchResult.

This and the backends are the only modules that do network I/O. Everything a
response can do wrong — redirect loops, endless bodies, gzip bombs, slow or
vanishing servers, private addresses — ends as an error code on the
FetchResult; fetch() never raises (except on cancellation).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from trawler.config import CrawlConfig
from trawler.connectors import Connectors, new_connector
from trawler.httpcodec import FetchError, decode_body, parse_content_type, parse_retry_after
from trawler.netguard import PrivateAddressError, check_literal_host
from trawler.records import FetchResult, Hop
from trawler.resolve import resolve_reference
from trawler.safetext import safe_text, safe_url

log = logging.getLogger(__name__)

HopCheck = Callable[[str], Awaitable[str | None]]
OnSent = Callable[[float], None]

ROBOTS_MAX_BYTES = 512 * 1024
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 §2.3.1.2: follow at least five consecutive redirects
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# A redirect's own body is read (to keep the connection alive) only when this small.
_DRAIN_MAX_BYTES = 64 * 1024
_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@dataclass(frozen=True, slots=True)
class _Limits:
    """What one fetch may cost: redirect hops, and body bytes (wire and decoded)."""

    max_redirects: int
    max_bytes: int
    truncate: bool = False  # keep the first max_bytes of a longer body instead of failing


class _PeerResponse(aiohttp.ClientResponse):
    """Remembers the peer address: a small body releases the connection before we see it."""

    peername: Any = None

    async def start(self, connection: Any) -> aiohttp.ClientResponse:
        transport = connection.transport
        if transport is not None:
            self.peername = transport.get_extra_info("peername")
        return await super().start(connection)


# The on_sent callback of the request being sent by the current task. A ContextVar
# (task-local, not shared state) because aiohttp builds the request object itself;
# cheaper than aiohttp's tracing, which builds a Trace and fires signals per request.
_on_sent_var: ContextVar[OnSent | None] = ContextVar("trawler_on_sent", default=None)
# Already percent-encoded (what urls.normalise produces): yarl need not re-encode it.
_ENCODED_URL = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]+\Z")


class _TimedRequest(aiohttp.ClientRequest):
    """Reports when the request line and headers went to the socket.

    With no body, aiohttp writes the buffered headers in ``send()`` itself
    (``set_eof``), so the time right after it returns is when they left: the
    closest the client can get to the server's arrival time, and never early.
    """

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        response = await super().send(conn)
        on_sent = _on_sent_var.get()
        if on_sent is not None:
            on_sent(time.monotonic())
        return response


class Fetcher:
    """Owns one aiohttp ClientSession; start() before fetching, close() after."""

    def __init__(
        self,
        config: CrawlConfig,
        *,
        resolver: AbstractResolver | None = None,
        connectors: Connectors | None = None,
    ) -> None:
        """``resolver`` replaces the system resolver (tests pass a stub); it is
        wrapped by the private-address guard unless ``config.allow_private``.
        ``connectors``: the process's connection pools (Services); None: its own."""
        self._config = config
        self._resolver = resolver
        self._connectors = connectors
        self._session: aiohttp.ClientSession | None = None
        self._default_timeout = self._timeout(config.timeout_s)
        self._headers = {
            "User-Agent": config.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "gzip, deflate, br",
        }

    @property
    def profile(self) -> str:
        """What decides how a server answers this fetcher, as a short digest: the
        headers it sends and whether it may reach private addresses. Answers are
        shared (robots.txt between jobs) only between fetchers of one profile."""
        reach = "private" if self._config.allow_private else "public"
        text = "\n".join([reach, *(f"{k}: {v}" for k, v in sorted(self._headers.items()))])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    async def start(self) -> None:
        config, shared = self._config, self._connectors
        if shared is not None:
            connector = shared.get(config.allow_private)
        else:
            connector = new_connector(config.concurrency, config.allow_private, self._resolver)
        self._session = aiohttp.ClientSession(
            connector=connector,
            connector_owner=shared is None,
            headers=self._headers,
            timeout=self._default_timeout,
            auto_decompress=False,  # we decode ourselves, to cap the decoded size
            cookie_jar=aiohttp.DummyCookieJar(),  # no state between pages or hosts
            request_class=_TimedRequest,
            response_class=_PeerResponse,
            trust_env=False,  # never pick up a proxy from the environment
        )
        # aiohttp (3.10+) silently sends an idempotent request a second time when
        # the server closes the connection before answering, on a fresh connection
        # too. That second request skips the host's politeness interval (the server
        # sees two requests back to back), so we send each request once and record
        # connection_closed. No public switch exists; aiohttp's test client uses this.
        if hasattr(self._session, "_retry_connection"):
            self._session._retry_connection = False

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _timeout(self, total_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=total_s,
            sock_connect=self._config.connect_timeout_s,
            sock_read=self._config.timeout_s,
        )

    async def fetch(
        self, url: str, hop_check: HopCheck | None = None, on_sent: OnSent | None = None
    ) -> FetchResult:
        """GET ``url``, following redirects; ``hop_check(target)`` may veto each hop
        by returning a reason; ``on_sent(monotonic)`` is called as each hop's
        request goes out."""
        limits = _Limits(self._config.max_redirects, self._config.max_bytes)
        return await self._fetch(url, hop_check, on_sent, limits)

    async def fetch_robots(self, url: str, on_sent: OnSent | None = None) -> FetchResult:
        """GET a robots.txt: five redirects, only the private-address guard, and
        the first 512 KiB of the body kept (RFC 9309 §2.5: a crawler MUST parse
        at least 500 KiB; a longer file is cut, not refused)."""
        limits = _Limits(ROBOTS_MAX_REDIRECTS, ROBOTS_MAX_BYTES, truncate=True)
        return await self._fetch(url, None, on_sent, limits)

    async def _fetch(
        self, url: str, hop_check: HopCheck | None, on_sent: OnSent | None, limits: _Limits
    ) -> FetchResult:
        result = FetchResult(url=url, final_url=url, started_at=time.time())
        started = time.monotonic()
        try:
            await self._follow(result, hop_check, on_sent, limits)
        except Exception as exc:  # fetch() never raises; CancelledError is not an Exception
            result.error, detail = classify_error(exc)
            result.error_detail = safe_text(" ".join(detail.split()))  # one line
        result.duration_s = time.monotonic() - started
        return result

    async def _follow(
        self,
        result: FetchResult,
        hop_check: HopCheck | None,
        on_sent: OnSent | None,
        limits: _Limits,
    ) -> None:
        assert self._session is not None, "Fetcher.start() was not called"
        deadline = time.monotonic() + self._config.timeout_s
        timeout = None  # the session default covers the first hop
        seen = {result.url}
        while True:
            location = await self._request(result, on_sent, limits, timeout)
            if location is None:
                return
            target = _redirect_target(result, location, seen, limits.max_redirects)
            if hop_check is not None:
                reason = await hop_check(target)
                if reason is not None:
                    result.final_url = target
                    raise FetchError(reason, f"redirect to {target} refused: {reason}")
            seen.add(target)
            result.final_url = target
            # One time budget for the whole chain, not one per hop.
            timeout = self._timeout(max(deadline - time.monotonic(), 0.001))

    async def _request(
        self,
        result: FetchResult,
        on_sent: OnSent | None,
        limits: _Limits,
        timeout: aiohttp.ClientTimeout | None,
    ) -> str | None:
        """One hop. Returns the Location to follow, or None once the final response is read."""
        assert self._session is not None
        target = result.final_url
        url = URL(target, encoded=_ENCODED_URL.match(target) is not None)
        if not self._config.allow_private and url.raw_host:
            check_literal_host(url.raw_host)  # IP literals never reach the resolver
        _on_sent_var.set(on_sent)
        resp = await self._first_byte(url, timeout or self._default_timeout)
        async with resp:
            _record_response(result, resp)
            location = resp.headers.get("Location") if resp.status in REDIRECT_STATUSES else None
            if location is not None:
                result.redirects.append(Hop(result.final_url, resp.status, location))
                if resp.content_length is not None and resp.content_length <= _DRAIN_MAX_BYTES:
                    await resp.read()  # cheap, and keeps the connection reusable
                return location
            result.raw_body = await _read_body(resp, limits)
        coding = resp.headers.get("Content-Encoding")
        result.body = decode_body(result.raw_body, coding, limits.max_bytes, limits.truncate)
        return None

    async def _first_byte(self, url: URL, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """Send the request and read the response headers, within --first-byte-timeout.

        A host that accepts connections and never answers would otherwise hold
        the request (and the crawl's slot) for the whole --timeout.
        """
        assert self._session is not None
        limit_s = self._config.first_byte_timeout_s
        deadline = asyncio.timeout(limit_s)
        try:
            async with deadline:
                return await self._session.get(url, allow_redirects=False, timeout=timeout)
        except TimeoutError:
            if not deadline.expired():
                raise  # aiohttp's own connect or total timeout
            raise FetchError("timeout", f"no response headers within {limit_s:g} s") from None


def _record_response(result: FetchResult, resp: aiohttp.ClientResponse) -> None:
    """Status line, headers and peer of this hop (the last hop's values stay)."""
    result.status = resp.status
    # As aiohttp decodes them: bytes that are not UTF-8 become lone surrogates,
    # which the WARC writer turns back into the bytes that were sent.
    result.headers = [(_decode(k), _decode(v)) for k, v in resp.raw_headers]
    result.http_version = f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1"
    result.request_headers = list(resp.request_info.headers.items())
    peer = getattr(resp, "peername", None)
    result.ip_address = peer[0] if peer else None
    content_type = resp.headers.get("Content-Type")
    if content_type is not None:  # stored with the page: it must be text
        content_type = safe_text(content_type)
    result.content_type, result.charset = parse_content_type(content_type)
    if resp.status in (429, 503):
        result.retry_after_s = parse_retry_after(resp.headers.get("Retry-After"))


def _redirect_target(result: FetchResult, location: str, seen: set[str], max_redirects: int) -> str:
    """The absolute URL a redirect points to, or FetchError if it must not be followed.

    Bytes of the Location that are not UTF-8 (``/caf\\xe9.html``, from old
    servers) are percent-encoded as browsers do: the target is stored and
    archived, so it must be text.
    """
    # WHATWG URL, as browsers follow redirects: "\\" is "/", "https:host/" names a host.
    target = resolve_reference(result.final_url, safe_url(location))
    if target is None:
        raise FetchError("bad_redirect", f"redirect to {safe_url(location)!r}: no http(s) URL")
    if target in seen:
        raise FetchError("redirect_loop", f"redirect loop back to {target}")
    if len(result.redirects) > max_redirects:
        raise FetchError("too_many_redirects", f"more than {max_redirects} redirects")
    return target


def _decode(header_bytes: bytes) -> str:
    return header_bytes.decode("utf-8", "surrogateescape")


async def _read_body(resp: aiohttp.ClientResponse, limits: _Limits) -> bytes:
    """The body as sent on the wire, refusing (or with ``truncate``, cutting)
    anything over ``max_bytes``."""
    max_bytes, length = limits.max_bytes, resp.content_length
    if length is not None and length <= max_bytes:
        return await resp.read()  # the parser stops at Content-Length
    if length is not None and not limits.truncate:
        raise FetchError("too_large", f"Content-Length {length} exceeds {max_bytes} bytes")
    body = bytearray()
    while chunk := await resp.content.readany():
        body += chunk
        if len(body) > max_bytes:
            # Leaving the `async with` closes the connection mid-body.
            if limits.truncate:
                return bytes(body[:max_bytes])
            raise FetchError("too_large", f"body exceeds {max_bytes} bytes")
    return bytes(body)


def classify_error(exc: Exception) -> tuple[str, str]:
    """Map an exception from one fetch to (error code, human detail)."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, FetchError):
        return exc.code, exc.detail
    if isinstance(exc, PrivateAddressError):
        return "private_address", str(exc)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        if isinstance(exc.os_error, PrivateAddressError):
            return "private_address", str(exc.os_error)
        return "dns", detail
    if isinstance(exc, TimeoutError):  # includes aiohttp's ServerTimeoutError family
        return "timeout", detail or "TimeoutError"
    if isinstance(exc, aiohttp.ClientSSLError):
        return "tls", detail
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return "connection_closed", detail
    if isinstance(exc, aiohttp.ClientOSError):  # refused, reset, unreachable
        return "connect", detail
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError | ValueError):
        return "bad_url", detail
    if isinstance(exc, aiohttp.ClientError):
        return "http_error", detail
    log.warning("unexpected error fetching", exc_info=exc)
    return "internal", detail
