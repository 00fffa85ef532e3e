"""How often to revisit each page for the freshest copy at a given fetch budget.

Pure functions, no I/O (STYLE.md rule 2). recrawl.py estimates each page's change
rate λ (a Poisson process, changes per second); this module turns the rates into
revisit intervals.

Freshness of a page is 1 while the stored copy is the one the site serves, else 0.
A page of rate λ visited f times a second at regular intervals is fresh, on
average over time, a share

    F(λ, f) = (f / λ) (1 − e^{−λ/f})

of the time (Cho and Garcia-Molina, "Effective page refresh policies for web
crawlers", ACM TODS 28(4), 2003, §4). With a budget of B fetches a second over all
pages, the frequencies that maximise Σ F(λ_i, f_i) subject to Σ f_i = B satisfy the
Lagrange condition (their §5):

    ∂F(λ_i, f_i)/∂f_i = μ  for every page,  where
    ∂F/∂f = (1 − (1 + r) e^{−r}) / λ,  r = λ / f  (changes expected per interval).

The left side is below 1/λ, so a page with μλ ≥ 1 gets f = 0: a page changing so
often that a fetch would rarely find it fresh for long is not worth the fetch
(their Figure 6: the optimal frequency rises with λ, peaks, then falls). Here every
page keeps at least one visit per ``max_s`` (the window's bounds are the box of the
optimisation: F is concave in f, so clamping the solution at the right μ is still
optimal) and μ is chosen so that the clamped frequencies add up to the budget.
Visiting proportionally to λ ("visit a page as often as it changes") spends the same
fetches worse: C&GM show it is even worse than visiting every page equally often.

The optimal policy sees each page's rate as its class (``rate_class``, within 1.6 %
of it). The budget defaults to what the proportional schedule would spend on the
classes (within 1.6 % of ``proportional_budget_per_s``): the optimal policy then
makes as many fetches and spends them where they buy the most freshness.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

OPTIMAL = "optimal"
PROPORTIONAL = "proportional"
POLICIES = (OPTIMAL, PROPORTIONAL)

# The optimal policy sees rates in classes, log(λ) rounded to steps of 1/32 (±1.6 %,
# well inside what a few observed changes tell of λ): μ is solved over a few thousand
# classes however many pages, and each page's interval is its class's, so that the
# schedule spends what μ was solved for. Intervals from exact rates at a price solved
# for the classes' means did not: near μλ = 1, where a page's frequency falls from
# ~λ/7 to none, a class priced to the max interval held a page just below it that got
# 3.5 s (70 times the budget; tests/unit/test_revisit_policy.py, the @example).
# store/pg_versions.py forms the classes alike, in SQL.
RATE_LOG_STEP = 1 / 32
_PRICE_STEPS = 200


def expected_freshness(rate_per_s: float, visits_per_s: float) -> float:
    """F(λ, f): the share of time a page of ``rate_per_s`` visited ``visits_per_s``
    times a second at regular intervals is fresh (C&GM 2003, §4)."""
    if rate_per_s <= 0:
        return 1.0
    if visits_per_s <= 0:
        return 0.0
    r = rate_per_s / visits_per_s
    return -math.expm1(-r) / r


def marginal_freshness(rate_per_s: float, visits_per_s: float) -> float:
    """∂F/∂f: the freshness one more visit a second buys (0 for a page that never
    changes: it is always fresh)."""
    if rate_per_s <= 0:
        return 0.0
    if visits_per_s <= 0:
        return 1.0 / rate_per_s
    r = rate_per_s / visits_per_s
    return _gain(r) / rate_per_s


def _gain(r: float) -> float:
    """1 − (1 + r) e^{−r}: increasing from 0 (r = 0) to 1 (r → ∞), at most r²/2
    (its derivative is r e^{−r} ≤ r). Small r by its series: the closed form
    cancels to nothing below r ~ 1e-8."""
    if r < 1e-2:
        return r * r * (1 / 2 - r * (1 / 3 - r * (1 / 8 - r / 30)))
    return -math.expm1(-r) - r * math.exp(-r)


def _changes_per_visit(target: float) -> float:
    """The r > 0 with _gain(r) = target (0 < target < 1). _gain(r) ≤ r²/2 puts the
    root at or above sqrt(2 target): bracket it by doubling, then bisect."""
    high = math.sqrt(2 * target)
    while _gain(high) < target:
        high *= 2
    low = high / 2  # _gain(high / 2) < target: a failed doubling, or ≤ target / 4
    return bisect_root(lambda r: _gain(r) < target, low, high, 1e-12)


def bisect_root(
    root_above: Callable[[float], bool], low: float, high: float, rel_tol: float, steps: int = 200
) -> float:
    """The root in [low, high] of a monotonic function, where ``root_above(x)`` says
    the root lies above x; to ``rel_tol`` of its size, in at most ``steps`` halvings."""
    for _ in range(steps):
        mid = (low + high) / 2
        if root_above(mid):
            low = mid
        else:
            high = mid
        if high - low <= rel_tol * high:
            break
    return (low + high) / 2


def optimal_frequency(rate_per_s: float, price: float) -> float:
    """Visits a second solving ∂F/∂f = ``price`` (μ) for a page of ``rate_per_s``,
    unclamped: 0 for a page that never changes or changes too often (μλ ≥ 1),
    unbounded at price 0."""
    if rate_per_s <= 0 or price * rate_per_s >= 1:
        return 0.0
    if price <= 0:
        return math.inf
    return rate_per_s / _changes_per_visit(price * rate_per_s)


@dataclass(frozen=True, slots=True)
class Bounds:
    """Revisit intervals allowed (--revisit-min, --revisit-max), seconds."""

    min_s: float
    max_s: float

    def clamp(self, interval_s: float) -> float:
        return min(self.max_s, max(self.min_s, interval_s))


def proportional_interval_s(rate_per_s: float, bounds: Bounds) -> float:
    """Visit as often as the page changes (1/λ), within the bounds."""
    return bounds.max_s if rate_per_s <= 0 else bounds.clamp(1.0 / rate_per_s)


def optimal_interval_s(rate_per_s: float, price: float, bounds: Bounds) -> float:
    """1/f of the optimal frequency at ``price``, within the bounds (f = 0: the max)."""
    frequency = optimal_frequency(rate_per_s, price)
    return bounds.max_s if frequency <= 0 else bounds.clamp(1.0 / frequency)


def proportional_budget_per_s(rates: Iterable[float], bounds: Bounds) -> float:
    """Fetches a second the proportional schedule makes over ``rates``."""
    return sum(1.0 / proportional_interval_s(rate, bounds) for rate in rates)


def rate_class(rate_per_s: float) -> float:
    """The rate the optimal policy prices and schedules a page of ``rate_per_s`` at:
    e^(k/32) for the nearest k (``RATE_LOG_STEP``); 0 for a page that never changes."""
    if rate_per_s <= 0:
        return 0.0
    return math.exp(round(math.log(rate_per_s) / RATE_LOG_STEP) * RATE_LOG_STEP)


def rate_groups(rates: Iterable[float]) -> list[tuple[float, int]]:
    """(rate class, pages) over ``rates`` (``rate_class``)."""
    return list(Counter(rate_class(rate) for rate in rates).items())


def _spent_per_s(groups: list[tuple[float, int]], price: float, bounds: Bounds) -> float:
    return sum(n / optimal_interval_s(rate, price, bounds) for rate, n in groups)


def fetch_price(
    groups: list[tuple[float, int]], budget_per_s: float, bounds: Bounds
) -> tuple[float, tuple[float, float] | None]:
    """μ at which the clamped optimal frequencies spend ``budget_per_s``: 0 when the
    budget affords every changing page the min interval, inf when it affords no page
    more than the max. Bisection on log μ (the spending falls as μ rises).

    And the edge: (rate class, interval) for the class whose spending changes the
    most inside the last bracket, when the bracket leaves budget unspent; else None.
    As μλ → 1 a page's frequency λ/r falls to 0 only as r ~ −ln(1 − μλ) grows:
    from ~λ/30 at the last μ a float tells from 1/λ, to nothing, and steeply before.
    The budget in that jump was left unspent (a schedule less fresh than visiting
    every page alike). There F is all but linear in f (∂F/∂f ≈ 1/λ ≈ μ for small f),
    so the optimum gives that class what the budget has left."""
    if _spent_per_s(groups, 0.0, bounds) <= budget_per_s:
        return 0.0, None
    if _spent_per_s(groups, math.inf, bounds) >= budget_per_s:
        return math.inf, None
    low, high = -60.0, 60.0  # log μ: μ is in 1/(fetches a second), e^±60 is beyond any
    for _ in range(_PRICE_STEPS):
        mid = (low + high) / 2
        if _spent_per_s(groups, math.exp(mid), bounds) > budget_per_s:
            low = mid
        else:
            high = mid
        if high - low <= 1e-9:
            break
    price = math.exp(high)
    left = budget_per_s - _spent_per_s(groups, price, bounds)
    if left <= 1e-9 * budget_per_s:
        return price, None
    below = math.exp(low)

    def jump(group: tuple[float, int]) -> float:
        rate, n = group
        return n / optimal_interval_s(rate, below, bounds) - n / optimal_interval_s(
            rate, price, bounds
        )

    rate, n = max(groups, key=jump)
    frequency = 1 / optimal_interval_s(rate, price, bounds) + left / n
    return price, (rate, bounds.clamp(1 / frequency))


@dataclass(frozen=True, slots=True)
class RevisitSchedule:
    """Intervals from rates: ``policy`` at ``price`` (μ, for the optimal policy)."""

    bounds: Bounds
    policy: str = OPTIMAL
    price: float | None = None  # None: not priced yet, intervals are proportional
    edge: tuple[float, float] | None = None  # (rate class, interval): fetch_price

    @property
    def max_s(self) -> float:
        return self.bounds.max_s

    @property
    def min_s(self) -> float:
        return self.bounds.min_s

    def interval_s(self, rate_per_s: float) -> float:
        if self.policy == PROPORTIONAL or self.price is None:
            return proportional_interval_s(rate_per_s, self.bounds)
        rate = rate_class(rate_per_s)
        if self.edge is not None and math.isclose(rate, self.edge[0], rel_tol=1e-9):
            return self.edge[1]
        return optimal_interval_s(rate, self.price, self.bounds)


def plan_schedule(
    rates: Iterable[float], bounds: Bounds, policy: str = OPTIMAL,
    budget_per_s: float | None = None,
) -> RevisitSchedule:  # fmt: skip
    """The schedule for pages of ``rates``: the optimal one priced so that it spends
    ``budget_per_s`` (default: what the proportional schedule would spend)."""
    if policy == PROPORTIONAL:
        return RevisitSchedule(bounds, PROPORTIONAL)
    return priced_schedule(rate_groups(rates), bounds, policy, budget_per_s)


def priced_schedule(
    groups: list[tuple[float, int]], bounds: Bounds, policy: str = OPTIMAL,
    budget_per_s: float | None = None,
) -> RevisitSchedule:  # fmt: skip
    """``plan_schedule`` over rates grouped already (``rate_groups``, or its SQL twin
    in store/pg_versions.py)."""
    if policy == PROPORTIONAL:
        return RevisitSchedule(bounds, PROPORTIONAL)
    if not groups:
        return RevisitSchedule(bounds, policy)
    if budget_per_s is None:
        budget_per_s = sum(n / proportional_interval_s(rate, bounds) for rate, n in groups)
    price, edge = fetch_price(groups, budget_per_s, bounds)
    return RevisitSchedule(bounds, policy, price, edge)
