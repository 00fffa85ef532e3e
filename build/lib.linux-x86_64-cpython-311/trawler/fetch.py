"""The fetcher: one HTTP GET, with its redirects, caps and guards, into a FetchResult.

This and the backends are the only modules that do network I/O. Everything a
response can do wrong — redirect loops, endless bodies, gzip bombs, slow or
vanishing servers, private addresses — ends as an error code on the
FetchResult; fetch() never raises (except on cancellation).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import BasicAuth
from aiohttp.abc import AbstractResolver
from yarl import URL

from trawler.config import CrawlConfig
from trawler.connectors import Connectors, DnsError, HttpPool, Key
from trawler.http1 import Connection, ConnectionClosed, ProtocolError, Response
from trawler.httpcodec import FetchError, decode_body, parse_content_type, parse_retry_after
from trawler.netguard import PrivateAddressError, check_literal_host, looks_like_ip_literal
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
_HOSTS_CHECKED_MAX = 100_000  # past it the set of checked hosts starts over
_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@dataclass(frozen=True, slots=True)
class _Limits:
    """What one fetch may cost: redirect hops, and body bytes (wire and decoded)."""

    max_redirects: int
    max_bytes: int
    truncate: bool = False  # keep the first max_bytes of a longer body instead of failing
    # Request headers of this fetch only: a revisit's If-None-Match / If-Modified-Since.
    extra_headers: tuple[tuple[str, str], ...] = ()


# Already percent-encoded (what urls.normalise produces): yarl need not re-encode it.
_ENCODED_URL = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]+\Z")
# Such a URL with a lowercase host name (or IPv4 address, no trailing dot), no user
# information, a port if any in 1-99999 and a non-empty query if any, as urls.normalise
# writes nearly every URL: split by one match instead of yarl (~4 µs a request); the
# parts are yarl's (tests/unit/test_fetch_head.py compares them). Any other URL: yarl.
_PLAIN_URL = re.compile(
    r"(https?)://([a-z0-9](?:[a-z0-9.\-]*[a-z0-9])?)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~:/\[\]@!$&'()*+,;=%]*)?((?:\?[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]+)?)\Z"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Fetcher:
    """Fetches over the process's HTTP/1.1 pools (http1.py, connectors.py); start()
    before fetching, close() after."""

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
        self._own: Connectors | None = None
        self._pool: HttpPool | None = None
        self._headers = {
            "User-Agent": config.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "gzip, deflate, br",
        }
        # Every request's head after its Host line: the same bytes each time.
        tail = "".join(f"{k}: {v}\r\n" for k, v in self._headers.items()) + "\r\n"
        self._head_tail = tail.encode("utf-8")
        self._header_items = list(self._headers.items())
        self._hosts_checked: set[str] = set()
        self._page_limits = _Limits(config.max_redirects, config.max_bytes)

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
        if shared is None:
            shared = self._own = Connectors(config.concurrency, self._resolver)
        self._pool = shared.get(config.allow_private)

    async def close(self) -> None:
        self._pool = None
        if self._own is not None:
            await self._own.close()
            self._own = None

    async def fetch(
        self, url: str, hop_check: HopCheck | None = None, on_sent: OnSent | None = None,
        extra_headers: tuple[tuple[str, str], ...] = (),
    ) -> FetchResult:  # fmt: skip
        """GET ``url``, following redirects; ``hop_check(target)`` may veto each hop
        by returning a reason; ``on_sent(monotonic)`` is called as each hop's
        request goes out. ``extra_headers`` go with each hop (recrawl.py's validators)."""
        config, limits = self._config, self._page_limits
        # A frozen dataclass costs ~1 µs to build: the usual one is kept.
        if extra_headers or (limits.max_redirects, limits.max_bytes) != (
            config.max_redirects, config.max_bytes
        ):  # fmt: skip
            limits = _Limits(config.max_redirects, config.max_bytes, False, extra_headers)
            if not extra_headers:
                self._page_limits = limits
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
        assert self._pool is not None, "Fetcher.start() was not called"
        # One time budget for the whole chain, on the loop's clock (the timers' clock).
        deadline = asyncio.get_running_loop().time() + self._config.timeout_s
        seen = {result.url}
        while True:
            location = await self._request(result, on_sent, limits, deadline)
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

    async def _request(
        self, result: FetchResult, on_sent: OnSent | None, limits: _Limits, deadline: float
    ) -> str | None:
        """One hop. Returns the Location to follow, or None once the final response is read."""
        assert self._pool is not None
        key, request, sent_headers = self._request_head(result.final_url, limits.extra_headers)
        config = self._config
        now = asyncio.get_running_loop().time()
        head_by = now + config.first_byte_timeout_s  # connect, send, and the headers back
        connect_by = min(now + config.connect_timeout_s, deadline)
        conn = await self._pool.connect(key, connect_by, head_by, config.first_byte_timeout_s)
        try:
            sent_at = conn.send(request, head_by, deadline, config.first_byte_timeout_s)
            if on_sent is not None:
                on_sent(sent_at)
            resp = await conn.read_head()
            _record_response(result, resp, sent_headers, conn.peer)
            location = _location(resp)
            if location is not None:
                result.redirects.append(Hop(result.final_url, resp.status, location))
                if resp.content_length is not None and resp.content_length <= _DRAIN_MAX_BYTES:
                    await conn.read_body(_DRAIN_MAX_BYTES)  # cheap, and keeps the connection
                return location
            result.raw_body = await _read_body(conn, resp, limits)
        finally:
            conn.finish()
            self._pool.release(conn)
        coding = resp.header(b"content-encoding")
        result.body = decode_body(
            result.raw_body, _decode(coding) if coding is not None else None,
            limits.max_bytes, limits.truncate,
        )  # fmt: skip
        return None

    def _request_head(
        self, target: str, extra: tuple[tuple[str, str], ...] = ()
    ) -> tuple[Key, bytes, list[tuple[str, str]]]:
        """The pool key, the request's bytes and its headers as sent (for the WARC)."""
        parts = plain_url_parts(target)
        scheme, host, port, host_header, path, auth = parts or yarl_url_parts(target)
        if host not in self._hosts_checked:
            self._check_host(host)
        head = f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\n".encode("ascii")
        sent = [("Host", host_header), *self._header_items]
        tail = self._head_tail
        if auth is not None:  # RFC 9110 §11.6.2, as aiohttp sends it
            sent.append(("Authorization", auth))
            tail = tail[:-2] + f"Authorization: {auth}\r\n\r\n".encode("latin-1")
        if extra:  # values came from a server's headers: no line break may forge a line
            extra = tuple((_one_line(n), _one_line(v)) for n, v in extra)
            lines = "".join(f"{n}: {v}\r\n" for n, v in extra)
            tail = tail[:-2] + lines.encode("utf-8", "surrogateescape") + b"\r\n"
            sent += extra
        return (scheme, host, port), head + tail, sent

    def _check_host(self, host: str) -> None:
        """Refuse a forbidden or malformed IP literal; remember the hosts that pass
        (the check is a pure function of the host, and ipaddress is slow)."""
        if not self._config.allow_private:
            check_literal_host(host)  # IP literals never reach the resolver
        elif looks_like_ip_literal(host):
            ipaddress.ip_address(host)  # ValueError (bad_url) for e.g. "127.1", as aiohttp
        if len(self._hosts_checked) >= _HOSTS_CHECKED_MAX:
            self._hosts_checked.clear()
        self._hosts_checked.add(host)


UrlParts = tuple[str, str, int, str, str, str | None]  # scheme, host, port, Host, target, auth


def plain_url_parts(target: str) -> UrlParts | None:
    """The request's parts of a plain URL (``_PLAIN_URL``), or None for any other."""
    match = _PLAIN_URL.match(target)
    if match is None:
        return None
    scheme, host, port_text, path, query = match.groups()
    default = _DEFAULT_PORTS[scheme]
    port = int(port_text) if port_text else default
    if port > 65535:
        return None  # yarl's ValueError: bad_url
    host_header = host if port == default else f"{host}:{port}"
    return scheme, host, port, host_header, (path or "/") + query, None


def yarl_url_parts(target: str) -> UrlParts:
    """The request's parts of any URL, as yarl reads it: (scheme, host, port, Host
    header, request target, Authorization header or None)."""
    url = URL(target, encoded=_ENCODED_URL.match(target) is not None)
    scheme, host = url.scheme, url.raw_host
    if scheme not in ("http", "https"):
        raise FetchError("bad_url", f"{url}: not an http(s) URL")
    if not host:
        raise FetchError("bad_url", f"{url}: no host")
    port = url.port or (443 if scheme == "https" else 80)
    host_header = url.host_port_subcomponent or host
    auth = None
    if url.raw_user or url.raw_password:
        auth = BasicAuth(url.user or "", url.password or "").encode()
    return scheme, host, port, host_header, url.raw_path_qs or "/", auth


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _location(resp: Response) -> str | None:
    if resp.status not in REDIRECT_STATUSES:
        return None
    location = resp.header(b"location")
    return _decode(location) if location is not None else None


def _record_response(
    result: FetchResult, resp: Response, sent: list[tuple[str, str]], peer: str | None
) -> None:
    """Status line, headers and peer of this hop (the last hop's values stay)."""
    result.status = resp.status
    # Bytes that are not UTF-8 become lone surrogates, which the WARC writer
    # turns back into the bytes that were sent (as aiohttp decoded them).
    result.headers = [
        (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
        for k, v in resp.raw_headers
    ]  # (_decode inline: two calls a header add up)
    result.http_version = resp.http_version
    result.request_headers = sent
    result.ip_address = peer
    content_type = resp.header(b"content-type")
    if content_type is not None:  # stored with the page: it must be text
        content_type_text: str | None = safe_text(_decode(content_type))
    else:
        content_type_text = None
    result.content_type, result.charset = parse_content_type(content_type_text)
    if resp.status in (429, 503):
        retry_after = resp.header(b"retry-after")
        result.retry_after_s = parse_retry_after(
            _decode(retry_after) if retry_after is not None else None
        )


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


async def _read_body(conn: Connection, resp: Response, limits: _Limits) -> bytes:
    """The body as sent on the wire, refusing (or with ``truncate``, cutting)
    anything over ``max_bytes``."""
    max_bytes, length = limits.max_bytes, resp.content_length
    if length is not None and length > max_bytes and not limits.truncate:
        raise FetchError("too_large", f"Content-Length {length} exceeds {max_bytes} bytes")
    complete = await conn.read_body(max_bytes)
    body = b"".join(resp.chunks)
    if complete and len(body) <= max_bytes:
        return body
    # finish() closes the connection mid-body.
    if limits.truncate:
        return body[:max_bytes]
    raise FetchError("too_large", f"body exceeds {max_bytes} bytes")


def classify_error(exc: Exception) -> tuple[str, str]:
    """Map an exception from one fetch to (error code, human detail)."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, FetchError):
        return exc.code, exc.detail
    if isinstance(exc, PrivateAddressError):
        return "private_address", str(exc)
    if isinstance(exc, DnsError):
        return "dns", detail
    if isinstance(exc, TimeoutError):
        return "timeout", detail
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):  # before OSError: they are ones
        return "tls", detail
    if isinstance(exc, ConnectionClosed):  # after the request went out: cut short
        return "connection_closed", detail
    if isinstance(exc, OSError):  # refused, reset, unreachable, before the request went out
        return "connect", detail
    if isinstance(exc, ValueError):  # yarl: a port out of range, an invalid host
        return "bad_url", detail
    if isinstance(exc, ProtocolError):
        return "http_error", detail
    log.warning("unexpected error fetching", exc_info=exc)
    return "internal", detail
