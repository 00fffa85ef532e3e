"""Crawl scope and trap rules: which normalised URLs a crawl may follow. Pure, no I/O.

- ``Scope``: by seed host, by seed registrable domain (eTLD+1, from
  tldextract's bundled Public Suffix List, never fetched) or any host, then
  include/exclude regexes;
- ``TrapRules``: URLs that look like crawler traps (too long, too deep, a
  path segment repeated, calendars far from today, too many query parameters).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Literal

import tldextract

from trawler.urls import host_key, normalise


def authority_host(authority: str) -> str:
    """``host`` of ``host[:port]``; IPv6 literals keep their brackets."""
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.partition(":")[0]


class DomainResolver:
    """Registrable domains (eTLD+1) from tldextract's bundled Public Suffix List.

    Never fetches: no suffix-list URLs, no disk cache, so tldextract falls back
    to the snapshot shipped inside the package.
    """

    def __init__(self, include_private_suffixes: bool = False, cache_size: int = 65536) -> None:
        self._extract = tldextract.TLDExtract(
            cache_dir=None,
            suffix_list_urls=(),
            fallback_to_snapshot=True,
            include_psl_private_domains=include_private_suffixes,
        )
        self.registrable_domain = functools.lru_cache(maxsize=cache_size)(self._resolve)

    def _resolve(self, host: str) -> str:
        """``sub.example.co.uk`` → ``example.co.uk``; IPs and bare names → themselves."""
        host = host.lower().rstrip(".")
        if host.startswith("["):  # IPv6 literal; tldextract passes IPv4 through itself
            return host
        parts = self._extract.extract_str(host)
        if parts.domain and parts.suffix:
            return f"{parts.domain}.{parts.suffix}"
        return host  # localhost, a public suffix itself, ...


@functools.cache
def _default_resolver() -> DomainResolver:
    return DomainResolver()


def registrable_domain(host: str) -> str:
    """The registrable domain (eTLD+1) of ``host``; the host itself if it has none."""
    return _default_resolver().registrable_domain(host)


ScopeMode = Literal["host", "domain", "any"]


class Scope:
    """Which normalised URLs a crawl may follow: by seed host, seed domain or any.

    Then include regexes (if any) must match and exclude regexes must not,
    both with ``re.search`` on the whole URL.
    """

    def __init__(
        self,
        mode: ScopeMode,
        seeds: Iterable[str],
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        resolver: DomainResolver | None = None,
    ) -> None:
        if mode not in ("host", "domain", "any"):
            raise ValueError(f"unknown scope mode {mode!r}")
        self.mode = mode
        self._resolver = resolver
        self._allowed: set[str] = set()  # host keys or registrable domains
        self._include = [re.compile(p) for p in include]
        self._exclude = [re.compile(p) for p in exclude]
        for seed in seeds:
            self.add_seed(seed)

    def add_seed(self, url: str) -> None:
        """Widen the scope to cover ``url``'s host (or domain)."""
        normalised = normalise(url, ())
        if normalised is None:
            raise ValueError(f"seed is not an http(s) URL: {url!r}")
        if self.mode != "any":
            self._allowed.add(self._key(normalised))

    @classmethod
    def from_hosts(
        cls, mode: ScopeMode, hosts: Iterable[str], include: Iterable[str] = (),
        exclude: Iterable[str] = (),
    ) -> Scope:  # fmt: skip
        """The scope of seeds on these hosts (host keys, ``host[:port]``): what a job
        keeps of its seeds, so a resume or a joining worker normalises none."""
        scope = cls(mode, (), include, exclude)
        for host in hosts:
            scope.add_host(host)
        return scope

    def add_host(self, host: str) -> None:
        """Widen the scope to cover a seed host (a host key, ``host[:port]``)."""
        if self.mode == "host":
            self._allowed.add(host)
        elif self.mode == "domain":
            resolver = self._resolver or _default_resolver()
            self._allowed.add(resolver.registrable_domain(authority_host(host)))

    def _key(self, url: str, host: str | None = None) -> str:
        authority = host_key(url) if host is None else host
        if self.mode == "host":
            return authority
        resolver = self._resolver or _default_resolver()
        return resolver.registrable_domain(authority_host(authority))

    def allows(self, url: str, host: str | None = None) -> bool:
        """True if the normalised ``url`` is in scope; ``host``: its host_key, if known."""
        if self.mode != "any" and self._key(url, host) not in self._allowed:
            return False
        if self._include and not any(p.search(url) for p in self._include):
            return False
        return not (self._exclude and any(p.search(url) for p in self._exclude))

    def explain(self, url: str) -> str | None:
        """Which part of the scope leaves the normalised ``url`` out, or None if none
        does: for ``trawler why`` (provenance.py), not on the link path."""
        if self.mode != "any" and self._key(url) not in self._allowed:
            what = "host" if self.mode == "host" else "domain"
            return f"{what} {self._key(url)} is not a seed {what} (--scope {self.mode})"
        if self._include and not any(p.search(url) for p in self._include):
            patterns = " ".join(p.pattern for p in self._include)
            return f"matches no --include pattern ({patterns})"
        for pattern in self._exclude:
            if pattern.search(url):
                return f"matches --exclude {pattern.pattern}"
        return None


@dataclass(frozen=True, slots=True)
class TrapLimits:
    """Thresholds past which a URL looks like a crawler trap."""

    max_url_length: int = 2048
    max_path_depth: int = 32  # non-empty path segments
    max_repeated_segments: int = 3  # consecutive occurrences of one segment or pair
    max_query_params: int = 20
    session_params: frozenset[str] = frozenset(
        {"jsessionid", "phpsessid", "sid", "sessionid", "aspsessionid", "session_id"}
    )
    max_calendar_years_ahead: int = 2
    # Real archives (/2015/05/post) are common; only the far past is a trap.
    max_calendar_years_back: int = 20


# /2019/05/12/, /2019-05-12, /2019/05 — same separator throughout.
_CALENDAR_DATE = re.compile(
    r"(?<![0-9])((?:19|20|21)[0-9]{2})([/-])(0?[1-9]|1[0-2])"
    r"(?:\2(0?[1-9]|[12][0-9]|3[01]))?(?![0-9])"
)


class TrapRules:
    """Reject URLs that look like crawler traps; ``reject_reason`` says why."""

    def __init__(self, limits: TrapLimits | None = None, today: date | None = None) -> None:
        self.limits = limits = limits or TrapLimits()
        self._year = (today or date.today()).year
        # A path of at most this many "/" has no more segments than either limit
        # allows, so neither a too deep nor a repeating one (reject_reason's short way).
        self._few_slashes = min(limits.max_path_depth, limits.max_repeated_segments)

    def __eq__(self, other: object) -> bool:
        """Rules that give every URL the same verdict."""
        if not isinstance(other, TrapRules):
            return NotImplemented
        return (self.limits, self._year) == (other.limits, other._year)

    def __hash__(self) -> int:
        return hash((self.limits, self._year))

    def reject_reason(self, url: str) -> str | None:
        """A short reason code, or None if ``url`` (normalised) looks fine."""
        limits = self.limits
        if len(url) > limits.max_url_length:
            return "url_too_long"
        after_scheme = url.partition("://")[2]
        slash = after_scheme.find("/")
        path_and_query = after_scheme[slash:] if slash >= 0 else ""
        path, _, query = path_and_query.partition("?")
        if not query and ";" not in path and path.count("/") <= self._few_slashes:
            # Most links: no parameters, few segments; only the calendar is left to ask.
            return "calendar" if self._is_far_calendar(path) else None
        segments = [s for s in path.split("/") if s]
        if len(segments) > limits.max_path_depth:
            return "path_too_deep"
        if _longest_repeat(segments) > limits.max_repeated_segments:
            return "repeated_segments"
        params = [p for p in query.split("&") if p]
        if len(params) > limits.max_query_params:
            return "too_many_params"
        if self._has_session_id(path, params):
            return "session_id"
        if self._is_far_calendar(path_and_query):
            return "calendar"
        return None

    def _has_session_id(self, path: str, params: list[str]) -> bool:
        names = self.limits.session_params
        if any(p.partition("=")[0].lower() in names for p in params):
            return True
        if ";" not in path:
            return False
        # RFC 3986 §3.3: path parameters, e.g. /cart;jsessionid=ABC
        for segment in path.split("/"):
            for param in segment.split(";")[1:]:
                if param.partition("=")[0].lower() in names:
                    return True
        return False

    def _is_far_calendar(self, text: str) -> bool:
        limits = self.limits
        for match in _CALENDAR_DATE.finditer(text):
            years_ahead = int(match.group(1)) - self._year
            if years_ahead > limits.max_calendar_years_ahead:
                return True
            if -years_ahead > limits.max_calendar_years_back:
                return True
        return False


def _longest_repeat(segments: list[str]) -> int:
    """Most consecutive occurrences of one segment or one pair (/a/b/a/b/...)."""
    longest = 1 if segments else 0
    for period in (1, 2):
        matched = 0  # consecutive positions equal to the one `period` before
        for i in range(period, len(segments)):
            if segments[i] == segments[i - period]:
                matched += 1
                longest = max(longest, matched // period + 1)
            else:
                matched = 0
    return longest
