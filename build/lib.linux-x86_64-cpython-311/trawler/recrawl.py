"""Revisit policy: a page's change rate from its visit history, and when to visit next.

Pure functions over small records, no I/O (STYLE.md rule 2). A page is modelled
as changing by a Poisson process of rate λ (changes per second). A visit only
tells whether the page changed *at least once* since the previous visit, so
counting the changes seen underestimates λ: several changes between two visits
look like one. Cho and Garcia-Molina ("Estimating frequency of change", ACM TOIT
3(3), 2003) give estimators that account for the changes missed:

- regular visits every I seconds, X changes seen in n intervals (their §4.2,
  the bias-reduced estimator):  λ̂ = −log((n − X + 0.5) / (n + 0.5)) / I
- irregular intervals t_i (their §5): the maximum-likelihood λ solves
  Σ_{changed} t_i / (exp(λ t_i) − 1) = Σ_{unchanged} t_i

How long after the last visit the next one comes is revisit_policy.py's: by default
the interval that maximises freshness over all pages for the fetches the
proportional schedule (1/λ̂) would make (Cho and Garcia-Molina 2003), either way
clamped to [revisit_min_s, revisit_max_s]: a page never seen to change is visited
at the max. Sitemap ``<changefreq>`` and ``<lastmod>`` give the first estimate,
before any history exists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from trawler.revisit_policy import (
    OPTIMAL,
    POLICIES,
    Bounds,
    bisect_root,
    proportional_interval_s,
)

DEFAULT_REVISIT_MIN_S = 3600.0
DEFAULT_REVISIT_MAX_S = 30 * 86400.0
# Intervals equal within this share count as regular (the closed-form estimator).
_REGULAR_TOLERANCE = 0.05

# sitemaps.org protocol: <changefreq> values, as seconds between changes.
CHANGEFREQ_S = {
    "always": 0.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
}


@dataclass(slots=True)
class Interval:
    """One gap between two visits of a page, and whether its content changed in it."""

    seconds: float
    changed: bool


@dataclass(slots=True)
class RevisitWindow:
    """The bounds of revisit intervals (--revisit-min, --revisit-max) and the policy
    that chooses intervals within them (revisit_policy.py)."""

    min_s: float = DEFAULT_REVISIT_MIN_S
    max_s: float = DEFAULT_REVISIT_MAX_S
    policy: str = OPTIMAL

    def __post_init__(self) -> None:
        if not (self.min_s > 0 and math.isfinite(self.max_s)):
            raise ValueError("--revisit-min must be > 0 and --revisit-max finite")
        if self.max_s < self.min_s:
            raise ValueError(
                f"--revisit-max ({self.max_s:g}) must not be below --revisit-min ({self.min_s:g})"
            )
        if self.policy not in POLICIES:
            raise ValueError(f"--revisit-policy must be one of {', '.join(POLICIES)}")

    @property
    def bounds(self) -> Bounds:
        return Bounds(self.min_s, self.max_s)

    def interval_s(self, rate_per_s: float) -> float:
        """Seconds to the next visit for a page changing ``rate_per_s`` times a second,
        visiting as often as it changes (1/rate, clamped): the proportional schedule,
        and the one used before the optimal schedule has been priced."""
        return proportional_interval_s(rate_per_s, self.bounds)


def regular_rate(changes: int, visits: int, interval_s: float) -> float:
    """Cho & Garcia-Molina's bias-reduced estimator for ``visits`` intervals of
    ``interval_s`` seconds with ``changes`` of them showing a change."""
    if visits <= 0 or interval_s <= 0:
        return 0.0
    return -math.log((visits - changes + 0.5) / (visits + 0.5)) / interval_s


def irregular_rate(intervals: Sequence[Interval]) -> float:
    """The maximum-likelihood rate for intervals of any lengths (C&GM §5).

    No change seen: 0. A change in every interval: the likelihood grows without
    bound, so the bias-reduced estimator on the mean interval stands in."""
    changed = [i.seconds for i in intervals if i.changed and i.seconds > 0]
    unchanged_s = sum(i.seconds for i in intervals if not i.changed and i.seconds > 0)
    if not changed:
        return 0.0
    if unchanged_s <= 0:
        return regular_rate(len(changed), len(changed), sum(changed) / len(changed))

    def excess(rate: float) -> float:  # decreasing in rate: bisect for its root
        return sum(t / math.expm1(min(rate * t, 700.0)) for t in changed) - unchanged_s

    low, high = 1e-12, 1.0 / min(changed)
    while excess(high) > 0:  # widen until the root is bracketed
        high *= 2
    return bisect_root(lambda rate: excess(rate) > 0, low, high, 1e-9)


def estimate_rate(intervals: Sequence[Interval]) -> float:
    """Changes per second from a page's visit history: the closed form when the
    visits were regular, else the irregular-interval MLE."""
    spans = [i.seconds for i in intervals if i.seconds > 0]
    if not spans:
        return 0.0
    mean = sum(spans) / len(spans)
    if max(spans) - min(spans) <= _REGULAR_TOLERANCE * mean:
        changes = sum(1 for i in intervals if i.changed and i.seconds > 0)
        return regular_rate(changes, len(spans), mean)
    return irregular_rate(intervals)


def prior_rate(changefreq: str | None, lastmod_age_s: float | None, window: RevisitWindow) -> float:
    """The first estimate, before any revisit: from the sitemap's <changefreq>, else
    from how long ago <lastmod> says the page last changed, else the rate whose
    interval is the geometric middle of the window (1 h and 30 days: ~1.1 days), so
    that a page nothing is known of is seen again well before the max."""
    if changefreq is not None:
        period = CHANGEFREQ_S.get(changefreq.strip().lower())
        if period is not None:
            return 1.0 / window.min_s if period == 0 else 1.0 / period
        if changefreq.strip().lower() == "never":
            return 0.0
    if lastmod_age_s is not None and lastmod_age_s > 0:
        # A page last changed t ago: 1/t is the rate whose mean gap is that age.
        return 1.0 / lastmod_age_s
    return 1.0 / math.sqrt(window.min_s * window.max_s)


def lastmod_epoch(lastmod: str | None) -> float | None:
    """A sitemap <lastmod> (W3C Datetime: a date, or date and time) as epoch seconds."""
    if not lastmod:
        return None
    text = lastmod.strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # a bare date: midnight UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def next_visit_at(last_visit_at: float, rate_per_s: float, window: RevisitWindow) -> float:
    return last_visit_at + window.interval_s(rate_per_s)
