"""A deterministic, generated multi-host web for tests, demos and benchmarks.

Pure: no I/O. ``Site(spec)`` answers "what does host *i* serve at this path"
and, for tests, "which URLs must a correct crawler fetch, and at what depth"
(:meth:`Site.reachable`) and "which must it never fetch" (:meth:`Site.forbidden`).

Host *i* lives at its own loopback address, 127.0.{1 + i // 250}.{1 + i % 250}
(never .0, .255 or 127.0.0.1), all on one port. Each host serves::

    /robots.txt             Disallow: /private/ (most hosts), Sitemap: line
    /sitemap.xml            "/" and every /p/ page (plus /private/0.html)
    /                       home page, links of every kind
    /p/{n}.html             n < pages; heap-shaped tree: depth(p/n) = floor(log2(n + 2))
    /list.html?page={k}&sort=asc   k in 1..LIST_PAGES, a chain with query strings
    /files/{n}.pdf|.jpg     binary leaves (even n: pdf, odd n: jpg)
    /private/{n}.html       disallowed by robots.txt on most hosts
    /nofollow/{n}.html      linked only with rel=nofollow: never reachable

Every link is stored with the normalised URL it must resolve to (no fragment,
no tracking parameters, sorted query, dot segments removed, lowercase scheme),
so reachability never depends on trawler's own normaliser. The unit tests check
that each href, resolved and normalised, gives exactly that target.
"""

from __future__ import annotations

import html
import random
from collections import deque
from dataclasses import dataclass
from typing import Literal, NamedTuple

from trawler.sitelinks import LIST_PAGES, Links, SiteLink, file_ext

HOSTS_PER_NET = 250  # last octet 1..250: avoids .0 and .255

_WORD_TEXT = (
    "anchor ballast barnacle beacon bilge bosun bow buoy cabin capstan cargo chart compass "
    "coral current deck dinghy dock drift ebb estuary fathom fleet foam galley gull hake "
    "harbour haul helm herring hull inlet jetty keel kelp knot lantern ledger lighthouse "
    "mackerel mast mooring net oar pier plank port prow quay reef rigging rope rudder sail "
    "salt sardine shoal shore skiff starboard stern swell tackle tide trawl trawler vessel "
    "wake wharf winch wind yard "
)
_WORDS = tuple(_WORD_TEXT.split())


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class SiteSpec:
    hosts: int = 3
    pages: int = 20  # /p/{n}.html per host
    port: int = 8800
    seed: int = 1
    first_net: int = 1  # third octet of host 0's address: 127.0.{first_net}.1
    disallow_fraction: float = 1.0  # share of hosts whose robots.txt disallows /private/
    crawl_delay_hosts: int = 0  # the first N hosts get a Crawl-delay line
    crawl_delay_s: float = 1.0
    files: int = 4  # /files/{n}.pdf|jpg per host
    private_pages: int = 3
    nofollow_pages: int = 3

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.pages < 1 or self.files < 2:
            raise ValueError("need hosts >= 1, pages >= 1, files >= 2")
        if self.first_net + (self.hosts - 1) // HOSTS_PER_NET > 255:
            raise ValueError("too many hosts for 127.0.x.y")


class Site:
    """The web described by a SiteSpec. Same spec, same bytes."""

    def __init__(self, spec: SiteSpec) -> None:
        self.spec = spec
        self._index = {self.netloc(i): i for i in range(spec.hosts)}

    # -- addresses ---------------------------------------------------------

    def address(self, i: int) -> str:
        net, last = divmod(i, HOSTS_PER_NET)
        return f"127.0.{self.spec.first_net + net}.{1 + last}"

    def netloc(self, i: int) -> str:
        return f"{self.address(i)}:{self.spec.port}"

    def base(self, i: int) -> str:
        return f"http://{self.netloc(i)}"

    def host_index(self, netloc: str) -> int | None:
        return self._index.get(netloc)

    def seeds(self, count: int | None = None) -> list[str]:
        """Home pages of the first ``count`` hosts (all hosts by default)."""
        n = self.spec.hosts if count is None else min(count, self.spec.hosts)
        return [self.base(i) + "/" for i in range(n)]

    # -- robots ------------------------------------------------------------

    def disallows_private(self, i: int) -> bool:
        """Evenly spread open hosts; host 0 disallows whenever any host does."""
        open_ppm = round((1.0 - self.spec.disallow_fraction) * 1_000_000)  # exact integers
        return (i + 1) * open_ppm // 1_000_000 == i * open_ppm // 1_000_000

    def crawl_delay(self, i: int) -> float | None:
        return self.spec.crawl_delay_s if i < self.spec.crawl_delay_hosts else None

    def robots(self, i: int) -> str:
        lines = [
            f"# Trawler test site, host {i}",
            "User-agent: ExcludedBot",
            "Disallow: /",
            "",
            "User-agent: *",
            "Disallow: /private/" if self.disallows_private(i) else "Disallow:",
        ]
        delay = self.crawl_delay(i)
        if delay is not None:
            lines.append(f"Crawl-delay: {delay:g}")
        lines += ["", f"Sitemap: {self.base(i)}/sitemap.xml", ""]
        return "\n".join(lines)

    def is_allowed(self, url: str) -> bool:
        """Robots verdict for a URL of this site (``*`` group)."""
        i, path = self._split(url)
        return not (i is not None and self.disallows_private(i) and path.startswith("/private/"))

    # -- documents -----------------------------------------------------------

    def paths(self, i: int) -> list[str]:
        """Every path (with normalised query) that host ``i`` answers 200 for."""
        s = self.spec
        return [
            "/robots.txt",
            "/sitemap.xml",
            "/",
            *(f"/p/{n}.html" for n in range(s.pages)),
            *(f"/list.html?page={k}&sort=asc" for k in range(1, LIST_PAGES + 1)),
            *(f"/files/{n}.{file_ext(n)}" for n in range(s.files)),
            *(f"/private/{n}.html" for n in range(s.private_pages)),
            *(f"/nofollow/{n}.html" for n in range(s.nofollow_pages)),
        ]

    def sitemap(self, i: int) -> str:
        # Lists a /private/ URL too: sitemap-discovered URLs must still obey robots.txt.
        public = ["/", *(f"/p/{n}.html" for n in range(self.spec.pages)), "/private/0.html"]
        entries = "".join(f"  <url><loc>{self.base(i)}{p}</loc></url>\n" for p in public)
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{entries}</urlset>\n"
        )

    def page(self, i: int, target: str) -> Response | None:
        """What host ``i`` answers for ``target`` (path plus optional query).

        Unknown query parameters are ignored, so un-normalised URLs still get
        200: a crawler's mistakes show up in the access log, not as 404s.
        """
        path = target.partition("?")[0]
        if path == "/robots.txt":
            return Response(200, "text/plain; charset=utf-8", self.robots(i).encode())
        if path == "/sitemap.xml":
            return Response(200, "application/xml", self.sitemap(i).encode())
        kind, n = self._locate(target)
        if kind == "files":
            return _binary(i, n)
        if kind is None:
            return None
        return Response(200, "text/html; charset=utf-8", self._render(i, kind, n).encode())

    def links(self, i: int, path: str) -> list[SiteLink]:
        """The links on the HTML document at normalised ``path`` of host ``i``."""
        kind, n = self._locate(path)
        return [] if kind in (None, "files") else Links(self, i, str(kind), n).build()

    def _locate(self, target: str) -> tuple[str | None, int]:
        """("p", 17) for "/p/17.html", ("list", 2) for "/list.html?page=2", or (None, -1)."""
        path, _, query = target.partition("?")
        if path == "/list.html":
            path = _list_path(query)
        elif path.startswith("/list/"):  # internal name of the list pages
            return None, -1
        kind, n = _classify(path)
        limit = {
            "home": 1,
            "p": self.spec.pages,
            "list": LIST_PAGES + 1,
            "files": self.spec.files,
            "private": self.spec.private_pages,
            "nofollow": self.spec.nofollow_pages,
        }.get(kind or "", 0)
        return (kind, n) if n < limit and (kind, n) != ("list", 0) else (None, -1)

    def _render(self, i: int, kind: str, n: int) -> str:
        rng = random.Random(f"{self.spec.seed}:{i}:{kind}:{n}")
        url = self.base(i) + _path_of(kind, n)
        title = f"Host {i} {kind} {n}: {' '.join(rng.sample(_WORDS, 3)).title()}"
        items = "\n".join(
            f'<li><a href="{html.escape(link.href)}"'
            + (f' rel="{link.rel}"' if link.rel else "")
            + f">{html.escape(link.href)}</a></li>"
            for link in Links(self, i, kind, n).build()
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n"
            f'<meta name="description" content="{_sentence(rng)}">\n'
            f'<meta name="keywords" content="{", ".join(rng.sample(_WORDS, 4))}">\n'
            f'<link rel="canonical" href="{html.escape(url)}">\n'
            f'</head><body>\n<h1 id="top">{html.escape(title)}</h1>\n'
            f"<p>{' '.join(_sentence(rng) for _ in range(rng.randint(3, 6)))}</p>\n"
            f'<h2 id="sec">Links</h2>\n<ul>\n{items}\n</ul>\n'
            f"<p>{_sentence(rng)}</p>\n<a>no href here</a>\n</body></html>\n"
        )

    # -- what a correct crawler does -------------------------------------------

    def reachable(
        self,
        seeds: list[str],
        max_depth: int | None = None,
        scope: Literal["host", "domain", "any"] = "host",
    ) -> dict[str, int]:
        """Normalised URL → minimal depth, for every URL a correct crawler fetches.

        BFS from ``seeds`` (normalised URLs, depth 0) over followable links:
        nofollow links are not edges, robots-disallowed URLs are dropped,
        binary files are leaves. robots.txt fetches are not included, nor are
        sitemap URLs beyond the links (the sitemap lists only link-reachable
        pages, plus one disallowed URL). ``scope="host"`` keeps the hosts of
        the seeds; ``"domain"`` is the same for IP hosts.
        """
        hosts = {self._split(s)[0] for s in seeds}
        depths: dict[str, int] = {}
        queue: deque[str] = deque()
        for seed in seeds:
            if seed not in depths and self.is_allowed(seed):
                depths[seed] = 0
                queue.append(seed)
        while queue:
            url = queue.popleft()
            if max_depth is not None and depths[url] >= max_depth:
                continue
            i, path = self._split(url)
            for link in self.links(i, path) if i is not None else []:
                target = link.target
                if target is None or link.nofollow or target in depths:
                    continue
                if not self.is_allowed(target):
                    continue
                if scope != "any" and self._split(target)[0] not in hosts:
                    continue
                depths[target] = depths[url] + 1
                queue.append(target)
        return depths

    def forbidden(self) -> set[str]:
        """Normalised URLs a correct crawler must never fetch, on every host."""
        out: set[str] = set()
        for i in range(self.spec.hosts):
            out.update(f"{self.base(i)}/nofollow/{n}.html" for n in range(self.spec.nofollow_pages))
            if self.disallows_private(i):
                out.update(
                    f"{self.base(i)}/private/{n}.html" for n in range(self.spec.private_pages)
                )
        return out

    def is_forbidden(self, url: str) -> bool:
        """Like ``url in forbidden()`` but also for un-normalised variants."""
        i, path = self._split(url)
        return i is not None and (path.startswith("/nofollow/") or not self.is_allowed(url))

    def _split(self, url: str) -> tuple[int | None, str]:
        rest = url.split("://", 1)[-1]
        netloc, slash, path = rest.partition("/")
        return self.host_index(netloc.lower()), slash + path.split("#", 1)[0]


def _binary(i: int, n: int) -> Response:
    note = f"trawler test file host {i} n {n}".encode()
    if file_ext(n) == "pdf":
        return Response(200, "application/pdf", b"%PDF-1.4\n% " + note + b"\n%%EOF\n")
    # SOI, a JFIF APP0 header, a comment segment carrying the note, EOI.
    comment = b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note
    jfif = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    return Response(200, "image/jpeg", b"\xff\xd8" + jfif + comment + b"\xff\xd9")


def _classify(path: str) -> tuple[str | None, int]:
    """Map "/p/17.html" to ("p", 17), "/" to ("home", 0), anything else to (None, -1)."""
    if path == "/":
        return "home", 0
    parts = path.split("/")
    if len(parts) != 3 or parts[0] != "":
        return None, -1
    stem, dot, ext = parts[2].partition(".")
    want = {"p": "html", "list": "html", "private": "html", "nofollow": "html", "files": None}
    if parts[1] not in want or not stem.isdigit() or not dot or stem != str(int(stem)):
        return None, -1
    if want[parts[1]] is None:
        return ("files", int(stem)) if ext == file_ext(int(stem)) else (None, -1)
    return (parts[1], int(stem)) if ext == "html" else (None, -1)


def _list_path(query: str) -> str:
    """/list.html?page=K → the internal path /list/K.html (other params ignored)."""
    pages = [p.removeprefix("page=") for p in query.split("&") if p.startswith("page=")]
    return f"/list/{pages[0] if pages else ''}.html"


def _path_of(kind: str, n: int) -> str:
    if kind == "home":
        return "/"
    if kind == "list":
        return f"/list.html?page={n}&sort=asc"
    return f"/{kind}/{n}.html"


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 12))]
    return " ".join(words).capitalize() + "."
