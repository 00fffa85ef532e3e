"""The links of one generated document (sitegen.py): every way of writing a link a
crawler must resolve, each stored with the normalised URL it means."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trawler.sitegen import Site

LIST_PAGES = 3
TRACKING = "utm_source=feed&fbclid=abc123"


@dataclass(frozen=True, slots=True)
class SiteLink:
    """One ``<a>`` on a generated page: the href as written, the URL it means."""

    href: str
    target: str | None  # normalised absolute URL; None for mailto:, javascript:, tel:
    nofollow: bool = False
    rel: str = ""


class Links:
    """Builds the link list of one document; every form appears on the home page."""

    def __init__(self, site: Site, i: int, kind: str, n: int) -> None:
        self.site, self.i, self.kind, self.n = site, i, kind, n
        self.spec = site.spec
        self.base = site.base(i)
        self.rng = random.Random(f"{self.spec.seed}:{i}:{kind}:{n}:links")
        self.out: list[SiteLink] = []

    def add(self, href: str, path: str | None, rel: str = "", base: str | None = None) -> None:
        target = None if path is None else (base or self.base) + path
        self.out.append(SiteLink(href, target, "nofollow" in rel.lower().split(), rel))

    def build(self) -> list[SiteLink]:
        {
            "home": self._home,
            "p": self._page,
            "list": self._list,
            "private": self._private,
            "nofollow": self._nofollow,
        }[self.kind]()
        return self.out

    def _home(self) -> None:
        s, b = self.spec, self.base
        self.add("p/0.html", "/p/0.html")
        if s.pages > 1:
            self.add("./p/1.html#sec", "/p/1.html")
        self.add("/p/0.html?" + TRACKING, "/p/0.html")
        self.add(f"{b}/p/0.html", "/p/0.html")
        self.add(f"HTTP://{self.site.netloc(self.i)}/p/0.html", "/p/0.html")
        self.add("../p/0.html", "/p/0.html")  # RFC 3986 §5.2.4: ".." above root is dropped
        self.add("", "/")  # empty href: this document
        self.add("#top", "/")
        self.add(b, "/")  # no path: normalises to "/"
        self.add("list.html?sort=asc&page=1", "/list.html?page=1&sort=asc")
        self.add("/list.html?page=1&utm_medium=email&sort=asc#top", "/list.html?page=1&sort=asc")
        self._common(0)
        if s.hosts > 1:
            j = (self.i + 1) % s.hosts
            self.add(self.site.base(j) + "/", "/", base=self.site.base(j))

    def _page(self) -> None:
        n, s = self.n, self.spec
        for child in (2 * n + 2, 2 * n + 3):  # heap: home is node 0, p/n is node n + 1
            if child < s.pages:
                self.add(*self._form(f"/p/{child}.html"))
        if n > 1:  # back links keep depths: lower index never means deeper
            self.add(*self._form(f"/p/{(n - 2) // 2}.html"))
            self.add(*self._form(f"/p/{self.rng.randrange(n)}.html"))
        self.add(self.rng.choice(["../", "/", self.base, self.base + "/"]), "/")
        self.add("#sec", f"/p/{n}.html")
        self._common(n)
        for _ in range(min(2, s.hosts - 1)):
            j = (self.i + 1 + self.rng.randrange(s.hosts - 1)) % s.hosts
            m = self.rng.randrange(n + 1)
            self.add(f"{self.site.base(j)}/p/{m}.html", f"/p/{m}.html", base=self.site.base(j))

    def _form(self, path: str) -> tuple[str, str]:
        """A random way of writing a link to ``path`` from a /p/ page."""
        name = path.rsplit("/", 1)[1]
        forms = [
            name,
            f"./{name}",
            f"../p/{name}",
            path,
            self.base + path,
            f"{name}#sec",
            f"{path}?{TRACKING}",
            f"{name}?utm_campaign=spring#top",
        ]
        return self.rng.choice(forms), path

    def _common(self, n: int) -> None:
        s, b = self.spec, self.base
        self.add(f"/private/{n % s.private_pages}.html", f"/private/{n % s.private_pages}.html")
        rel = self.rng.choice(["nofollow", "external nofollow", "NoFollow noopener"])
        self.add(
            f"{b}/nofollow/{n % s.nofollow_pages}.html",
            f"/nofollow/{n % s.nofollow_pages}.html",
            rel,
        )
        for f in (n % s.files, (n + 1) % s.files):
            self.add(f"/files/{f}.{file_ext(f)}", f"/files/{f}.{file_ext(f)}")
        self.add("mailto:harbour@example.invalid", None)
        self.add("javascript:void(0)", None)
        self.add("tel:+15550100", None)

    def _list(self) -> None:
        k = self.n
        self.add(
            f"/p/{min(k - 1, self.spec.pages - 1)}.html",
            f"/p/{min(k - 1, self.spec.pages - 1)}.html",
        )
        if k < LIST_PAGES:
            self.add(f"?sort=asc&page={k + 1}", f"/list.html?page={k + 1}&sort=asc")
        self.add("/", "/")

    def _private(self) -> None:
        if self.n + 1 < self.spec.private_pages:
            self.add(f"{self.n + 1}.html", f"/private/{self.n + 1}.html")
        self.add("/", "/")

    def _nofollow(self) -> None:
        if self.n + 1 < self.spec.nofollow_pages:
            self.add(f"{self.n + 1}.html", f"/nofollow/{self.n + 1}.html")
        self.add("/p/0.html", "/p/0.html")


def file_ext(n: int) -> str:
    return "pdf" if n % 2 == 0 else "jpg"
