"""The revisit policy (revisit_policy.py): Cho and Garcia-Molina's freshness-optimal
frequencies at a fetch budget, against the uniform and proportional schedules."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from trawler.recrawl import RevisitWindow
from trawler.revisit_policy import (
    OPTIMAL,
    PROPORTIONAL,
    Bounds,
    RevisitSchedule,
    expected_freshness,
    marginal_freshness,
    optimal_frequency,
    plan_schedule,
    proportional_budget_per_s,
    proportional_interval_s,
    rate_class,
)

BOUNDS = Bounds(1.0, 1000.0)
# The peak of the optimal frequency curve: e^r = 1 + r + r² at r* ≈ 1.793, where
# μλ = r*² e^{−r*} ≈ 0.5355 (d(λ/r)/dλ = 0 under the Lagrange condition).
PEAK_PRICE_RATE = 0.5355

rates_st = st.lists(st.one_of(st.just(0.0), st.floats(1e-5, 2.0)), min_size=1, max_size=40)


def total_freshness(rates: list[float], intervals: list[float]) -> float:
    pairs = zip(rates, intervals, strict=True)
    return sum(expected_freshness(rate, 1 / gap) for rate, gap in pairs)


def test_freshness_formula() -> None:
    # F(λ, f) = (f/λ)(1 − e^{−λ/f}): one change per visit interval → 1 − 1/e.
    assert expected_freshness(1.0, 1.0) == pytest.approx(1 - math.exp(-1))
    assert expected_freshness(0.0, 0.0) == 1.0  # never changes: always fresh
    assert expected_freshness(1.0, 0.0) == 0.0  # changes, never visited


def test_optimal_frequency_meets_the_lagrange_condition() -> None:
    price = 0.3
    for rate in (0.01, 0.1, 1.0, 3.0):
        frequency = optimal_frequency(rate, price)
        assert marginal_freshness(rate, frequency) == pytest.approx(price, rel=1e-6)


def test_pages_changing_too_often_for_the_price_are_not_worth_a_fetch() -> None:
    # ∂F/∂f < 1/λ: at μλ ≥ 1 no frequency meets the condition (C&GM 2003, Fig. 6).
    assert optimal_frequency(2.0, 0.5) == 0.0
    assert optimal_frequency(0.0, 0.5) == 0.0
    schedule = RevisitSchedule(BOUNDS, OPTIMAL, price=0.5)
    # 2.1, not 2.0: the schedule sees a rate's class (2.0 is in e^(22/32) ≈ 1.989's).
    assert schedule.interval_s(2.1) == BOUNDS.max_s  # clamped: still seen once per max
    assert schedule.interval_s(0.0) == BOUNDS.max_s


@given(st.floats(1e-4, 10.0), st.floats(1e-4, 10.0), st.floats(1e-3, 10.0))
def test_intervals_fall_as_rates_rise_below_the_peak(
    rate_a: float, rate_b: float, price: float
) -> None:
    slow, fast = sorted((rate_a, rate_b))
    assume(rate_class(fast) * price < PEAK_PRICE_RATE)  # the schedule sees the class
    schedule = RevisitSchedule(Bounds(1e-6, 1e9), OPTIMAL, price)
    assert schedule.interval_s(fast) <= schedule.interval_s(slow) * (1 + 1e-9)


def test_intervals_rise_again_past_the_peak() -> None:
    schedule = RevisitSchedule(Bounds(1e-6, 1e9), OPTIMAL, price=1.0)
    intervals = [schedule.interval_s(rate) for rate in (0.6, 0.8, 0.95)]
    assert intervals == sorted(intervals)


@given(rates_st, st.floats(1.0, 600.0), st.floats(0.0, 1.0))
@settings(max_examples=150, deadline=None)
def test_intervals_stay_in_the_window(rates: list[float], max_s: float, share: float) -> None:
    bounds = Bounds(1.0, max_s)
    budget = len(rates) * (1 / max_s + share * (1 - 1 / max_s))
    schedule = plan_schedule(rates, bounds, OPTIMAL, budget)
    for rate in rates:
        assert bounds.min_s <= schedule.interval_s(rate) <= bounds.max_s


@given(rates_st, st.floats(0.0, 1.0))
@settings(max_examples=150, deadline=None)
# Two rates grouped for the price at their mean (1.984, priced past 1/μ: the max
# interval), one of them then below 1/μ on its own: it got 3.5 s, 70 times the budget.
@example(rates=[2.0, 1.96875], share=0.5)
# The page of rate 0.5 is worth its fetches just below μ = 2 and not at 2: the budget
# left between was not spent, and the schedule was less fresh than the uniform one.
@example(rates=[0.5, 0.015625, 0.0234375], share=0.02)
def test_optimal_spends_the_budget_and_is_at_least_as_fresh(
    rates: list[float], share: float
) -> None:
    # Any budget the uniform schedule can spend inside the window: one interval for all.
    uniform_s = BOUNDS.min_s + share * (BOUNDS.max_s - BOUNDS.min_s)
    budget = len(rates) / uniform_s
    schedule = plan_schedule(rates, BOUNDS, OPTIMAL, budget)
    optimal = [schedule.interval_s(rate) for rate in rates]
    spent = sum(1 / gap for gap in optimal)
    # Spent in full unless every changing page is at the min already; the budget in
    # the jump where a class stops being worth its fetches included (the edge).
    assert spent <= budget * (1 + 1e-6)
    above_min = (gap > BOUNDS.min_s * (1 + 1e-6) for gap in optimal)
    if any(rate > 0 and high for rate, high in zip(rates, above_min, strict=True)):
        assert spent >= budget * (1 - 1e-6)
    uniform = total_freshness(rates, [uniform_s] * len(rates))
    proportional = [proportional_interval_s(rate, BOUNDS) for rate in rates]
    best = total_freshness(rates, optimal)
    assert best >= uniform - 1e-3 * len(rates)
    assume(sum(1 / gap for gap in proportional) <= budget)  # proportional within budget
    assert best >= total_freshness(rates, proportional) - 1e-3 * len(rates)


def test_optimal_beats_uniform_and_proportional_on_a_mixed_web() -> None:
    # Rates log-uniform from one change a minute to one every 2 s, a quarter never
    # (bench/bench_recrawl.py's site), window [0.5 s, 20 s], the proportional budget.
    rates = [0.0 if i % 4 == 3 else math.exp(math.log(1 / 60) + i / 29 * math.log(30))
             for i in range(30)]  # fmt: skip
    bounds = Bounds(0.5, 20.0)
    budget = proportional_budget_per_s(rates, bounds)
    schedule = plan_schedule(rates, bounds, OPTIMAL, budget)
    optimal = [schedule.interval_s(rate) for rate in rates]
    proportional = [proportional_interval_s(rate, bounds) for rate in rates]
    uniform = [len(rates) / budget] * len(rates)
    assert sum(1 / gap for gap in optimal) == pytest.approx(budget, rel=1e-3)
    fresh = {name: total_freshness(rates, gaps) / len(rates)
             for name, gaps in (("optimal", optimal), ("proportional", proportional),
                                ("uniform", uniform))}  # fmt: skip
    assert fresh["optimal"] > fresh["proportional"] + 0.01, fresh
    assert fresh["optimal"] > fresh["uniform"] + 0.01, fresh


def test_proportional_policy_and_unpriced_schedule_visit_as_often_as_pages_change() -> None:
    window = RevisitWindow(10.0, 100.0, PROPORTIONAL)
    schedule = plan_schedule([0.05, 0.5], window.bounds, window.policy)
    assert schedule.interval_s(1 / 40) == pytest.approx(40.0) == window.interval_s(1 / 40)
    assert RevisitSchedule(window.bounds).interval_s(1 / 40) == pytest.approx(40.0)


def test_budget_beyond_the_window_prices_at_the_ends() -> None:
    rates = [0.1, 0.2, 0.0]
    lavish = plan_schedule(rates, BOUNDS, OPTIMAL, budget_per_s=100.0)
    assert [lavish.interval_s(rate) for rate in rates] == [1.0, 1.0, 1000.0]
    meagre = plan_schedule(rates, BOUNDS, OPTIMAL, budget_per_s=1e-6)
    assert [meagre.interval_s(rate) for rate in rates] == [1000.0] * 3


def test_the_policy_reaches_a_continuous_job() -> None:
    # `crawl --revisit-policy proportional` → CrawlConfig → the job's revisit window.
    from trawler.cli import RevisitPolicy, cli_settings
    from trawler.config import CrawlConfig
    from trawler.recrawl_flow import continuous_options

    settings = cli_settings({"revisit_policy": RevisitPolicy.proportional})
    assert settings["revisit_policy"] == PROPORTIONAL
    config = CrawlConfig(recrawl=True, revisit_policy=settings["revisit_policy"])
    options = continuous_options(config, SimpleNamespace(open_revisits=None))
    assert options is not None and options.window.policy == PROPORTIONAL
    assert CrawlConfig().revisit_policy == OPTIMAL


def test_window_rejects_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="revisit-policy"):
        RevisitWindow(1.0, 10.0, "eager")
