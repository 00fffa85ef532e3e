"""References (hrefs, ``Location``, ``Link`` headers) resolved as browsers do.

Browsers follow the WHATWG URL Standard, not RFC 3986: ``\\`` is ``/`` in
http(s) URLs, ``https:host/`` and ``///host/`` name a host, ``http://0x7f.1/``
is ``127.0.0.1``, ``http://?`` is no URL at all. The parser is ada
(``ada-url``), which passes the web-platform-tests URL suite; through
``ada_url``'s cffi binding one parse costs about 1.8 µs (urljoin: 4.8 µs).

Most hrefs on a page need no parser: ``/path``, ``page.html``, ``?q=1`` and
plain absolute URLs are resolved by concatenation, which ``Normaliser`` then
finishes (bench/bench_links.py measures both ways). An href with a scheme other
than http(s) (``mailto:``, ``javascript:``) is no link whatever follows (WHATWG
URL §4.4: the scheme state keeps its scheme). Anything else that could resolve
differently under WHATWG rules (backslashes, dot segments, brackets, ``http:``
without ``//``, an authority that does not start with a host) goes to ada.

Pure functions, no I/O.
"""

from __future__ import annotations

import re

from ada_url import join_url, normalize_url

# WHATWG URL §4.4: strip leading/trailing C0 controls and spaces, drop tab/newline.
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_NOT_A_HOST = ("", "/", "?", "#", "\\", "@", ":")  # what may not follow "//" in a fast join
_HAS_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # WHATWG §4.4 scheme state
_HTTP_PREFIXES = ("http://", "https://")
_HTTP_SCHEMES = ("http:", "https:")


def whatwg_href(url: str, base: str | None = None) -> str | None:
    """The WHATWG serialisation of ``url`` (against ``base``), if it is http(s).

    None for a parse failure, a scheme other than http(s), or text that is no
    Unicode (lone surrogates: ada takes UTF-8)."""
    try:
        href = normalize_url(url) if base is None else join_url(base, url)
    except ValueError:  # "Invalid URL"; UnicodeEncodeError is a ValueError too
        return None
    return href if href.startswith(_HTTP_PREFIXES) else None


def split_href(href: str) -> tuple[str, str, str, str, str]:
    """(scheme, host, port, path, query) of a WHATWG-serialised http(s) URL.

    The serialisation is unambiguous: "//" after the scheme, userinfo ends at
    the last "@" of the authority, the path starts at the next "/", "?" and
    "#" inside components are percent-encoded (WHATWG URL §4.5)."""
    scheme, _, rest = href.partition("://")
    slash = rest.find("/")
    authority, rest = rest[:slash], rest[slash:]
    path, _, query = rest.partition("#")[0].partition("?")
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.index("]") + 1
        return scheme, hostport[:end], hostport[end + 1 :], path, query
    host, _, port = hostport.partition(":")
    return scheme, host, port, path, query


class Resolver:
    """Resolves hrefs against one base URL as a browser does, fast.

    The result is an absolute http(s) URL that is not yet normalised: pass it
    through ``urls.Normaliser``. Concatenation and WHATWG parsing give the same
    URL once normalised (tests/unit/test_parse.py checks that).
    """

    __slots__ = ("base_url", "scheme", "origin", "document", "directory")

    def __init__(self, base_url: str) -> None:
        # The base in WHATWG form, so that concatenation starts from a clean
        # prefix (a <base href> may be any text); "" when it is no http(s) URL.
        self.base_url = whatwg_href(base_url) or ""
        # A WHATWG-serialised http(s) URL: "//", an authority without "/", "?" or "#"
        # (userinfo percent-encodes them), then a path that starts with "/".
        scheme, _, rest = self.base_url.partition("://")
        slash = rest.find("/")
        path = rest[slash:].partition("#")[0].partition("?")[0]
        self.scheme = scheme  # "" disables the fast paths
        self.origin = f"{scheme}://{rest[:slash]}"
        self.document = self.origin + path
        self.directory = self.origin + path[: path.rfind("/") + 1]

    def resolve(self, href: str | None) -> str | None:
        """The absolute http(s) URL ``href`` points to, or None.

        An empty or fragment-only href is a reference to this same document,
        not a link to follow: None."""
        if not href:
            return None
        href = href.strip(_C0_AND_SPACE)
        if "\t" in href or "\n" in href or "\r" in href:
            href = href.translate(_TAB_NEWLINE)
        if not href or href[0] == "#":
            return None
        joined = self._concatenate(href)
        if joined is not None:
            return joined
        scheme = _HAS_SCHEME.match(href)
        if scheme is not None and scheme.group().lower() not in _HTTP_SCHEMES:
            return None  # "mailto:", "javascript:": a URL of that scheme, or none
        return whatwg_href(href, self.base_url or None)

    def _concatenate(self, href: str) -> str | None:
        """``href`` resolved by concatenation, or None where WHATWG could differ."""
        if "\\" in href or "[" in href or "]" in href or "/." in href or href[0] == ".":
            return None  # backslashes, IPv6 literals (or stray brackets), dot segments
        prefix = href[:8].lower()
        if prefix.startswith("http://") or prefix == "https://":
            host_at = 7 if prefix[4] == ":" else 8
            if href[host_at : host_at + 1] in _NOT_A_HOST:
                return None  # "http:///h", "http://?": the parser decides
            # absolute: the Normaliser parses it in full (RFC 3986 §6.2.2.1: lowercase scheme)
            return href if href.startswith("http") else href[:5].lower() + href[5:]
        if not self.scheme:
            return None
        if href.startswith("//"):
            return f"{self.scheme}:{href}" if href[2:3] not in _NOT_A_HOST else None
        if href[0] == "/":
            return self.origin + href
        if href[0] == "?":
            return self.document + href
        if ":" in href and _HAS_SCHEME.match(href):  # no ":", no scheme: skip the regex
            return None  # "https:host/", "http:page" (relative!), "mailto:"
        return self.directory + href


def resolve_reference(base_url: str, reference: str) -> str | None:
    """One reference (a ``Location`` or ``Link`` header value) resolved against
    ``base_url`` by the WHATWG parser; None if that gives no http(s) URL."""
    return whatwg_href(reference, base_url)
