"""The change-rate estimator (recrawl.py) on simulated Poisson changes."""

from __future__ import annotations

import math
import random

import pytest

from trawler.recrawl import (
    Interval,
    RevisitWindow,
    estimate_rate,
    irregular_rate,
    lastmod_epoch,
    prior_rate,
    regular_rate,
)


def _visits(rate: float, gaps: list[float], rng: random.Random) -> list[Interval]:
    """Each gap changed when at least one Poisson change fell inside it."""
    return [Interval(gap, rng.random() < 1 - math.exp(-rate * gap)) for gap in gaps]


def test_missed_changes_are_accounted_for() -> None:
    # A page changing twice per visit interval: nearly every visit shows a change, so
    # counting changes seen gives ~0.86 per interval; the estimator must come near 2.
    rng, rate, gap = random.Random(7), 2.0, 1.0
    intervals = _visits(rate, [gap] * 400, rng)
    seen = sum(i.changed for i in intervals) / (len(intervals) * gap)
    estimate = estimate_rate(intervals)
    assert seen < 0.95
    assert estimate == pytest.approx(rate, rel=0.2)


def test_irregular_mle_recovers_the_rate() -> None:
    rng, rate = random.Random(11), 0.5
    gaps = [rng.uniform(0.2, 6.0) for _ in range(500)]
    assert irregular_rate(_visits(rate, gaps, rng)) == pytest.approx(rate, rel=0.2)


def test_rates_order_pages_by_true_rate() -> None:
    rng = random.Random(3)
    true_rates = [0.0, 0.01, 0.1, 0.5, 2.0]
    estimates = []
    for rate in true_rates:
        gaps = [rng.uniform(0.5, 3.0) for _ in range(120)]
        estimates.append(estimate_rate(_visits(rate, gaps, rng)))
    assert estimates == sorted(estimates)
    assert estimates[0] == 0.0


def test_regular_closed_form() -> None:
    assert regular_rate(0, 10, 60.0) == 0.0
    assert regular_rate(5, 10, 1.0) == pytest.approx(-math.log(5.5 / 10.5))
    # Every interval changed: finite, and larger than one change per interval.
    assert regular_rate(10, 10, 1.0) == pytest.approx(math.log(21))


def test_change_in_every_irregular_interval_is_finite() -> None:
    rate = irregular_rate([Interval(1.0, True), Interval(3.0, True)])
    assert 0 < rate < math.inf


def test_window_clamps_the_interval() -> None:
    window = RevisitWindow(10.0, 100.0)
    assert window.interval_s(0.0) == 100.0
    assert window.interval_s(1.0) == 10.0
    assert window.interval_s(1 / 40) == pytest.approx(40.0)


@pytest.mark.parametrize(("low", "high"), [(0.0, 10.0), (-1.0, 10.0), (10.0, 5.0)])
def test_window_rejects_bad_bounds(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="revisit"):
        RevisitWindow(low, high)


def test_sitemap_prior() -> None:
    window = RevisitWindow(60.0, 86400.0 * 30)
    assert prior_rate("hourly", None, window) == pytest.approx(1 / 3600)
    assert prior_rate("always", None, window) == pytest.approx(1 / 60)
    assert prior_rate("never", 10.0, window) == 0.0
    assert prior_rate(None, 7200.0, window) == pytest.approx(1 / 7200)
    middle = 1 / math.sqrt(60.0 * 86400 * 30)  # nothing known: the window's middle
    assert prior_rate("sometimes", None, window) == pytest.approx(middle)
    assert prior_rate(None, None, window) == pytest.approx(middle)
    assert lastmod_epoch("1970-01-02") == 86400.0
    assert lastmod_epoch("1970-01-01T01:00:00Z") == 3600.0
    assert lastmod_epoch("yesterday") is None
