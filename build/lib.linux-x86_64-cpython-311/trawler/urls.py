"""URL normalisation — pure functions, no I/O (crawl scope and trap rules: scope.py).

A URL is first parsed as browsers parse it (WHATWG URL Standard; resolve.py),
then normalised with the crawler's rules:

- scheme and host lowercase, IDN hosts in punycode, IPv4 hosts as dotted
  quads, IPv6 compressed, default port removed (all WHATWG); one trailing dot
  of the host removed; a host that is no DNS name (RFC 1035 lengths; letters,
  digits, ``-``, ``_``) or IP address is rejected;
- userinfo and fragment dropped; empty path is ``/``; dot segments resolved;
- path and query percent-encoding normalised (RFC 3986 §6.2.2.2: unreserved
  decoded, hex uppercase, characters RFC 3986 does not allow there encoded;
  ``'`` in a query as ``%27``, as WHATWG does);
- query: empty and tracking parameters removed, parameters sorted by key
  (stable, so repeated keys keep their order); ``a`` and ``a=`` stay distinct,
  so do ``+`` and ``%20`` (tests/unit/test_canon_pairs.py says why).

``normalise`` runs for every link on every page, so a URL the WHATWG parser
would only lowercase (printable ASCII, a plain host, no backslash, no
userinfo) skips the parser. Measured with CPython 3.11.7 on a busy 2-core
box: about 3-4 µs per URL, well inside the 10 µs budget; ``host_key`` about
1 µs. ``test_normalise_is_fast`` keeps it under 20 µs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from types import MappingProxyType
from urllib.parse import quote

from trawler.config import DEFAULT_TRACKING_PARAMS
from trawler.resolve import split_href, whatwg_href

_DEFAULT_PORTS = MappingProxyType({"http": 80, "https": 443})

# A URL with nothing for the WHATWG parser to change but case: printable
# ASCII, no backslash, no userinfo, a host of LDH labels, a port of digits.
# (No re.IGNORECASE: it would let "s" match "\u017f" and so fail the classes.)
_PLAIN_URL = re.compile(
    r"([Hh][Tt][Tt][Pp][Ss]?)://([A-Za-z0-9_-]{1,63}(?:\.[A-Za-z0-9_-]{1,63})*)(?::([0-9]{0,5}))?"
    r"(/[^?#\\\x00-\x20\x7f-\U0010ffff]*)?(?:\?([^#\\\x00-\x20\x7f-\U0010ffff]*))?(?:#[!-~]*)?"
)
_SCHEME_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")
# The default port as an authority ends with it: no int formatted per call (host_key and
# origin run several times for every URL of a crawl, ~25 % faster so: bench/RESULTS.md).
_DEFAULT_PORT_SUFFIXES = MappingProxyType({"http": ":80", "https": ":443"})

# RFC 3986 §2.3 unreserved characters: their percent-encoded forms are decoded.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 §3.3 (path: pchar and "/") and §3.4 (query: pchar, "/" and "?").
# Anything else (space, controls, non-ASCII, "<>\"{}|\\^`[]") gets encoded,
# and "'" in a query too, as the WHATWG special-query percent-encode set does.
_PATH_CHARS = r"A-Za-z0-9\-._~!$&'()*+,;=:@/"
_QUERY_CHARS = r"A-Za-z0-9\-._~!$&()*+,;=:@/?"
_PATH_NEEDS_WORK = re.compile(f"[^{_PATH_CHARS}]")
_QUERY_NEEDS_WORK = re.compile(f"[^{_QUERY_CHARS}]")
_PATH_PCT = re.compile(f"%([0-9A-Fa-f]{{2}})|%|[^{_PATH_CHARS}%]+")
_QUERY_PCT = re.compile(f"%([0-9A-Fa-f]{{2}})|%|[^{_QUERY_CHARS}%]+")

# An IPv4 address as the WHATWG serialiser writes it (decimal, no leading zeros,
# four parts): the parser keeps it as it is. Other numeric forms ("127.1",
# "0x7f.0.0.1", "010.0.0.1") are rewritten or refused: the parser decides.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}")

# Lenient DNS name: LDH labels plus "_" (seen in the wild), ≤ 63 chars each.
_HOST_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")


class _InvalidURL(ValueError):
    """Internal: the input cannot be normalised (normalise returns None)."""


def _fix_pct(match: re.Match[str]) -> str:
    """RFC 3986 §6.2.2.2: decode unreserved, uppercase hex, encode the rest."""
    hex_pair = match.group(1)
    if hex_pair is not None:
        char = chr(int(hex_pair, 16))
        return char if char in _UNRESERVED else "%" + hex_pair.upper()
    text = match.group(0)
    if text == "%":  # a stray "%" not followed by two hex digits
        return "%25"
    return quote(text, safe="")  # UTF-8, uppercase hex (RFC 3986 §2.5)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path; ``..`` past the root stays at root."""
    segments = path.split("/")
    if "." not in segments and ".." not in segments:
        return path
    kept: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):  # "/a/b/.." → "/a/", keep the trailing slash
        kept.append("")
    return "/" + "/".join(kept)


def _check_host(host: str) -> str:
    """A WHATWG host (lowercase, punycode, IPv4 dotted, IPv6 compressed) as a
    crawler keeps it: one trailing dot removed ("example.com." names the same
    host), and only DNS names (RFC 1035 lengths, letters, digits, "-", "_")
    or IP addresses kept: a host no resolver can look up is no link."""
    if host.startswith("["):
        return host
    host = host.removesuffix(".")
    if len(host) > 253 or _HOST_NAME.fullmatch(host) is None:
        raise _InvalidURL("bad host")
    return host


def _plain_parts(url: str) -> tuple[str, str, str, str, str] | None:
    """(scheme, host, port, path, query) of a URL the WHATWG parser would take
    as it is (lowercasing aside), host checked; None: the parser must see it."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path, query = match.groups()
    host = host.lower()
    # A last label starting with a digit may make the host IPv4 (WHATWG §3.5:
    # "0x7f.1" is 127.0.0.1); punycode labels need validating: the parser decides.
    if host[host.rfind(".") + 1].isdigit() and _DOTTED_QUAD.fullmatch(host) is None:
        return None
    if "xn--" in host or len(host) > 253:
        return None
    if port and int(port) > 65535:
        return None
    return scheme.lower(), host, port or "", path or "", query or ""


def _whatwg_parts(url: str) -> tuple[str, str, str, str, str] | None:
    """(scheme, host, port, path, query) as the WHATWG parser reads ``url``,
    host checked (``_check_host``); None if it is no http(s) URL."""
    href = whatwg_href(url)
    if href is None:
        return None
    scheme, host, port, path, query = split_href(href)
    return scheme, _check_host(host), port, path, query


class Normaliser:
    """Normalise URLs, stripping the query parameters matched by ``strip_params``.

    An entry ending in ``*`` is a prefix (``utm_*``); any other entry is an
    exact key. Keys match case-insensitively.
    """

    def __init__(self, strip_params: Iterable[str] = DEFAULT_TRACKING_PARAMS) -> None:
        params = [p.lower() for p in strip_params]
        self._strip_exact = frozenset(p for p in params if not p.endswith("*"))
        self._strip_prefixes = tuple(p[:-1] for p in params if p.endswith("*"))

    def __eq__(self, other: object) -> bool:
        """Normalisers that normalise every URL alike."""
        if not isinstance(other, Normaliser):
            return NotImplemented
        return (self._strip_exact, self._strip_prefixes) == (
            other._strip_exact, other._strip_prefixes)  # fmt: skip

    def __hash__(self) -> int:
        return hash((self._strip_exact, self._strip_prefixes))

    def __call__(self, url: str) -> str | None:
        """The normalised URL, or None if ``url`` is not a valid http(s) URL."""
        try:
            return self._normalise(url)
        except ValueError:  # includes UnicodeError and _InvalidURL
            return None

    def _normalise(self, url: str) -> str | None:
        parts = _plain_parts(url) or _whatwg_parts(url)  # anything unusual: WHATWG decides
        return None if parts is None else self._finish(parts)

    def _finish(self, parts: tuple[str, str, str, str, str]) -> str:
        """Trawler's normalisations on the parts of a URL the WHATWG parser accepts."""
        scheme, authority, port, path, query = parts
        if port and int(port) != _DEFAULT_PORTS[scheme]:  # WHATWG: port 0 is a port
            authority = f"{authority}:{int(port)}"
        if _PATH_NEEDS_WORK.search(path):
            path = _PATH_PCT.sub(_fix_pct, path)
        path = _remove_dot_segments(path) if path else "/"  # RFC 3986 §6.2.3
        if query:
            query = self._normalise_query(query)
        if query:
            return f"{scheme}://{authority}{path}?{query}"
        return f"{scheme}://{authority}{path}"

    def _normalise_query(self, query: str) -> str:
        """Percent-encoding normalised, tracking parameters removed, keys sorted."""
        if _QUERY_NEEDS_WORK.search(query):
            query = _QUERY_PCT.sub(_fix_pct, query)
        kept = [part for part in query.split("&") if part and not self._is_stripped(part)]
        if len(kept) > 1:
            # stable sort: repeated keys keep their original order; "a=" and "a" stay distinct
            kept.sort(key=lambda part: part.partition("=")[0])
        return "&".join(kept)

    def _is_stripped(self, param: str) -> bool:
        key = param.partition("=")[0].lower()
        return key in self._strip_exact or key.startswith(self._strip_prefixes)


@functools.lru_cache(maxsize=32)
def _normaliser_for(strip_params: tuple[str, ...]) -> Normaliser:
    return Normaliser(strip_params)


def normalise(url: str, strip_params: Iterable[str] = DEFAULT_TRACKING_PARAMS) -> str | None:
    """The normalised form of ``url``, or None if it is not a valid http(s) URL.

    Never raises on a str; idempotent. For a loop, build one ``Normaliser``.
    """
    params = strip_params if isinstance(strip_params, tuple) else tuple(strip_params)
    return _normaliser_for(params)(url)


def _scheme_authority(url: str) -> tuple[str, str]:
    match = _SCHEME_AUTHORITY.match(url)
    if match is None:
        raise ValueError(f"not an absolute URL: {url!r}")
    scheme, authority = match.groups()
    scheme, authority = scheme.lower(), authority.lower()
    suffix = _DEFAULT_PORT_SUFFIXES.get(scheme)
    if suffix is not None and authority.endswith(suffix):
        authority = authority[: -len(suffix)]
    return scheme, authority


def host_key(url: str) -> str:
    """The politeness key of a normalised URL: ``host[:port]``, port only if non-default."""
    return _scheme_authority(url)[1]


def seed_hosts(seeds: Iterable[str]) -> set[str]:
    """The host keys of seed URLs (not normalised yet); invalid ones are left out."""
    return {host_key(url) for seed in seeds if (url := normalise(seed, ())) is not None}


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a normalised URL (the robots.txt cache key)."""
    scheme, authority = _scheme_authority(url)
    return f"{scheme}://{authority}"
