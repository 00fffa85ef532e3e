"""robots.txt per origin: what to do with a fetch result, and how long to keep it.

RFC 9309 §2.3.1 decides what a fetch outcome means; this module turns it into
``RobotsEntry`` records and keeps them per origin (scheme://host:port).
Fetching happens in the engine, under the host's politeness slot, because
robots.txt is a request like any other as far as the server is concerned.
"""

from __future__ import annotations

from dataclasses import dataclass

from trawler import robots
from trawler.records import FetchResult, RobotsFetch
from trawler.tdmrep import AiGroups, ai_groups

# RFC 9309 §2.4: crawlers SHOULD NOT use a cached robots.txt for more than 24 hours.
CACHE_TTL_S = 24 * 3600.0
# After a 5xx / 429 / network failure the host is fully disallowed (§2.3.1.4)
# and robots.txt is tried again after these waits; then the URLs fail.
DEFAULT_RETRY_WAITS_S = (5.0, 30.0, 120.0)  # CrawlConfig.robots_retry_waits_s
# Redirect trouble (too many, a loop, a non-HTTP target): robots.txt unavailable.
_TOO_MANY_REDIRECTS = frozenset({"too_many_redirects", "redirect_loop", "bad_redirect"})
# Errors that retrying robots.txt will not cure: each URL of the origin fails with them.
HOST_FATAL_ERRORS = frozenset({"dns", "private_address", "bad_url"})


@dataclass(slots=True)
class RobotsEntry:
    rules: robots.Rules
    fetched_at: float  # monotonic
    status: int | None  # HTTP status of the robots.txt response, None on network error
    unavailable: bool = False  # 5xx / 429 / network error: everything disallowed for now
    failures: int = 0  # consecutive unavailable answers
    fatal_error: str | None = None  # the host cannot be fetched at all (dns, private_address)
    retry_waits_s: tuple[float, ...] = DEFAULT_RETRY_WAITS_S
    # The groups it has for AI crawlers (tdmrep.py); None: no robots.txt answer (2xx).
    ai_groups: AiGroups | None = None

    def expired(self, now: float) -> bool:
        if self.unavailable and not self.gave_up:
            return now >= self.retry_at
        return now - self.fetched_at >= CACHE_TTL_S

    @property
    def retry_at(self) -> float:
        waits = self.retry_waits_s or (0.0,)
        wait = waits[min(self.failures, len(waits)) - 1]
        return self.fetched_at + wait

    @property
    def gave_up(self) -> bool:
        """Unavailable for every retry: the host's URLs fail with robots_unavailable."""
        return self.unavailable and self.failures > len(self.retry_waits_s)


def entry_from_fetch(
    result: FetchResult,
    robots_token: str,
    now: float,
    previous: RobotsEntry | None,
    retry_waits_s: tuple[float, ...] = DEFAULT_RETRY_WAITS_S,
) -> RobotsEntry:
    """RFC 9309 §2.3.1: the meaning of each way a robots.txt fetch can end."""
    status = result.status
    if result.error is None and status is not None:
        if 200 <= status < 300:  # §2.3.1.1 successful access
            rules = robots.parse(result.body, robots_token)
            return RobotsEntry(rules, now, status, ai_groups=ai_groups(result.body))
        if 400 <= status < 500 and status != 429:  # §2.3.1.3 unavailable: no restrictions
            return RobotsEntry(robots.Rules.allow_all(), now, status)
    if result.error in _TOO_MANY_REDIRECTS:  # §2.3.1.2: MAY assume unavailable
        return RobotsEntry(robots.Rules.allow_all(), now, status)
    if result.error in HOST_FATAL_ERRORS:  # no page of this origin can be fetched either
        rules = robots.Rules.disallow_all()
        return RobotsEntry(rules, now, status, fatal_error=result.error)
    # §2.3.1.4 unreachable (5xx, 429 as Google does, network errors, redirect
    # trouble): assume complete disallow, and try again later.
    failures = previous.failures + 1 if previous and previous.unavailable else 1
    rules = robots.Rules.disallow_all()
    return RobotsEntry(
        rules, now, status, unavailable=True, failures=failures, retry_waits_s=retry_waits_s
    )


def entry_from_kept(
    kept: RobotsFetch,
    robots_token: str,
    now: float,
    now_wall: float,
    retry_waits_s: tuple[float, ...] = DEFAULT_RETRY_WAITS_S,
) -> RobotsEntry:
    """The entry for a robots.txt fetched earlier, by another worker or before a
    restart: its age carries over (a wall-clock time, made monotonic here), and so
    does its count of unavailable answers, so the retry waits go on where they were."""
    age_s = max(now_wall - kept.fetched_at, 0.0)  # another machine's clock may run ahead
    result = FetchResult("", "", status=kept.status, error=kept.error, body=kept.body)
    entry = entry_from_fetch(result, robots_token, now - age_s, None, retry_waits_s)
    if entry.unavailable:
        entry.failures = max(kept.failures, 1)
    return entry


class ProcessRobots:
    """robots.txt fetches shared by the jobs of one process (Services), by origin and
    fetch profile: a second job reads a host's robots.txt without asking the host
    again. Answers only, never a job's own errors (RobotsGate decides). Bounded:
    past ``max_entries`` the oldest is dropped (it is fetched again if needed)."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._fetches: dict[tuple[str, str], tuple[RobotsFetch, float]] = {}

    def get(self, site: str, profile: str, now: float) -> RobotsFetch | None:
        kept = self._fetches.get((site, profile))
        if kept is None or kept[1] <= now:
            return None
        return kept[0]

    def put(self, site: str, profile: str, fetch: RobotsFetch, expires_at: float) -> None:
        """Keep ``fetch`` until monotonic ``expires_at``."""
        key = (site, profile)
        self._fetches.pop(key, None)  # re-inserted last: the newest
        self._fetches[key] = (fetch, expires_at)
        while len(self._fetches) > self.max_entries:
            del self._fetches[next(iter(self._fetches))]
