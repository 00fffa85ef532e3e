"""The link filter: from a page's raw links to new crawl requests. Pure.

Order of the checks is by cost: normalisation first (it is needed for
everything else), then the cheap set and regex checks. Each rejected link is
counted by its reason, so `trawler stats` can say why URLs were left out.
Seen-set dedup is the frontier's job and comes after this filter; in a parser
process, the links the loop says it has taken already are left out first
(``known``: knownlinks.py).

Links repeat: every page of a site links its navigation, and the crawl
benchmark's pages link the same URLs in several spellings. What the filter
derives from a link's URL alone (normalised form, host, fingerprint, trap
verdict: pure functions of it) is kept per URL in a bounded memo, least
recently used out, so a link seen again costs a dict lookup; the verdicts that
may change during a crawl (scope widened by new seeds, robots.txt learnt) are
asked every time. 65,536 entries take about 24 MB (~370 bytes each with a
40-character URL); replaying the 2,000-host benchmark's web in crawl order (each
host's pages a second apart, all hosts at once) they answer ~68% of the links
(~79% with no bound, 32% at 32,768). A parser process shares one memo among the
jobs whose filters digest alike (``share_memo``): one bound in all.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest, Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser, host_key

LINK_MEMO_SIZE = 1 << 16  # link URLs whose digest is kept
# A link URL's digest: (normalised URL, host key, fingerprint, trap reason), or
# None for a URL that does not normalise.
Digest = tuple[str, str, int, str | None] | None


@dataclass(slots=True)
class LinkFilter:
    normalise: Normaliser
    scope: Scope
    traps: TrapRules
    max_depth: int | None
    # Cached robots verdict for a URL, or None when the host's robots.txt is not
    # known yet (then the fetch-time check decides).
    robots_allows: Callable[[str], bool | None]
    max_per_host: int | None = None  # --max-pages-per-host: URLs admitted per host
    rejected: Counter[str] = field(default_factory=Counter)
    admitted: Counter[str] = field(default_factory=Counter)  # per host, this job
    # For provenance (provenance.py), taken and emptied like ``rejected``: the links
    # left out, (URL, reason, anchor text), and the anchor text of each request made.
    skipped: list[tuple[str, str, str | None]] = field(default_factory=list)
    anchors: list[str | None] = field(default_factory=list)
    memo_size: int = LINK_MEMO_SIZE
    # Digests by link URL (see the module doc). Not copied by dataclasses.replace: a
    # copy on another thread (analyse_sitemap) starts its own.
    _digests: OrderedDict[str, Digest] = field(default_factory=OrderedDict, init=False,
                                               repr=False, compare=False)  # fmt: skip

    def within_host_budget(self, requests: list[CrawlRequest]) -> list[CrawlRequest]:
        """Admit new (deduplicated) URLs while their host is under its budget."""
        if self.max_per_host is None:
            return requests
        kept = []
        for request in requests:
            if self.admitted[request.host] >= self.max_per_host:
                self.rejected["host_budget"] += 1
                continue
            self.admitted[request.host] += 1
            kept.append(request)
        return kept

    def requests_for(
        self, links: Iterable[Link], parent_url: str, depth: int, known: Container[int] = ()
    ) -> list[CrawlRequest]:
        """New requests for a page's followable links at ``depth`` (parent depth + 1);
        ``known``: fingerprints the loop would drop unseen, uncounted (knownlinks.py)."""
        if self.max_depth is not None and depth > self.max_depth:
            self._skip_all(links, "max_depth")
            return []
        out: list[CrawlRequest] = []
        skipped, anchors = self.skipped, self.anchors
        batch_seen: set[str] = set()
        # Bound once: this loop runs for every link of every page (bench_parsepool.py).
        digest_of, allows, robots_allows = self.digest, self.scope.allows, self.robots_allows
        rejected = self.rejected
        for link in links:
            digest = digest_of(link.url)
            if link.nofollow:
                rejected["nofollow"] += 1
                if digest is not None:
                    skipped.append((digest[0], "nofollow", link.anchor))
                continue
            if digest is None:
                rejected["bad_url"] += 1
                continue
            url, host, fp, trap = digest
            if fp in known:
                continue
            if url in batch_seen:
                continue
            batch_seen.add(url)
            if not allows(url, host):
                reason: str | None = "out_of_scope"
            else:
                reason = trap or ("robots" if robots_allows(url) is False else None)
            if reason is not None:
                rejected[reason] += 1
                skipped.append((url, reason, link.anchor))
                continue
            out.append(CrawlRequest(url, depth, parent_url, host, fp))
            anchors.append(link.anchor)
        return out

    def _skip_all(self, links: Iterable[Link], reason: str) -> None:
        """Each followable link left out for ``reason`` (not counted: ``max_depth`` was
        never a link counter), once a page."""
        seen: set[str] = set()
        for link in links:
            digest = None if link.nofollow else self.digest(link.url)
            if digest is not None and digest[0] not in seen:
                seen.add(digest[0])
                self.skipped.append((digest[0], reason, link.anchor))

    def digest(self, link_url: str) -> Digest:
        """What ``link_url`` alone decides: the same as computing it, from the memo
        when the URL was seen lately."""
        digests = self._digests
        try:  # one lookup for a link seen lately (most are), not two
            digest: Digest = digests[link_url]
        except KeyError:
            pass
        else:
            digests.move_to_end(link_url)
            return digest
        url = self.normalise(link_url)
        digest = None
        if url is not None:
            url = link_url if url == link_url else url  # most are: one string kept, not two
            # host: once, the scope and the request both need it
            digest = (url, host_key(url), url_fingerprint(url), self.traps.reject_reason(url))
        digests[link_url] = digest
        if len(digests) > self.memo_size:
            digests.popitem(last=False)
        return digest

    def share_memo(self, other: LinkFilter) -> bool:
        """Use ``other``'s memo if a link URL's digest is the same under both filters
        (same normaliser, same trap rules; the scope is not in it): a parser process
        keeps one memo, one bound, for all the jobs it serves alike."""
        if self.normalise != other.normalise or self.traps != other.traps:
            return False
        self._digests = other._digests
        return True

    def normalised(self, url: str) -> str | None:
        """``normalise(url)``, from the memo when seen lately: a page's canonical URL
        and its own are mostly URLs other pages link to."""
        digest = self.digest(url)
        return None if digest is None else digest[0]

    def robots_checked(
        self, requests: list[CrawlRequest], allowed: list[int] | None = None
    ) -> list[CrawlRequest]:
        """Drop requests a cached robots.txt disallows (the rest is checked at fetch
        time); ``allowed`` gets the fingerprints of those it allows (knownlinks.py)."""
        kept = []
        allows = self.robots_allows
        dropped = 0
        for request in requests:
            verdict = allows(request.url)
            if verdict is False:
                dropped += 1
                continue
            kept.append(request)
            if verdict and allowed is not None:
                allowed.append(request.fp)
        if dropped:
            self.rejected["robots"] += dropped
        return kept

    def reject_reason(self, url: str, host: str | None = None) -> str | None:
        """Why a normalised URL is not to be crawled, or None; ``host``: its host_key."""
        if not self.scope.allows(url, host):
            return "out_of_scope"
        return self.traps.reject_reason(url) or self._robots_reason(url)

    def _robots_reason(self, url: str) -> str | None:
        return "robots" if self.robots_allows(url) is False else None

    @staticmethod
    def request(url: str, depth: int, parent_url: str | None) -> CrawlRequest:
        return CrawlRequest(url, depth, parent_url, host_key(url), url_fingerprint(url))
