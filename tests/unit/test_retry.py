"""trawler.retry: per-URL retry decisions and per-host back-off, table-driven."""

from __future__ import annotations

import random

import pytest

from trawler.retry import Decision, HostHealth, RetryPolicy, extra_interval_s, not_before

POLICY = RetryPolicy()  # max_attempts=3, base 2 s, cap 300 s, jitter 0.5
NO_JITTER = RetryPolicy(jitter=0.0)


def rng() -> random.Random:
    return random.Random(42)


# --- per URL: every class of outcome ---------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status", "first", "last"),
    [
        # successes
        (None, 200, "done", "done"),
        (None, 204, "done", "done"),
        (None, 301, "done", "done"),
        (None, 304, "done", "done"),
        # network trouble: retried, then failed
        ("connect", None, "retry", "fail"),
        ("timeout", None, "retry", "fail"),
        ("connection_closed", None, "retry", "fail"),
        ("connection_closed", 200, "retry", "fail"),  # the body was cut off
        # DNS: no retry
        ("dns", None, "fail", "fail"),
        # server errors: retried, then dead-lettered
        (None, 500, "retry", "dead"),
        (None, 502, "retry", "dead"),
        (None, 504, "retry", "dead"),
        # slow down: retried, then dead-lettered
        (None, 429, "retry", "dead"),
        (None, 503, "retry", "dead"),
        # client errors: no retry
        (None, 400, "fail", "fail"),
        (None, 403, "fail", "fail"),
        (None, 404, "fail", "fail"),
        (None, 410, "fail", "fail"),
        # our own refusals and content errors: no retry, whatever the status
        ("too_large", 200, "fail", "fail"),
        ("not_html", 200, "fail", "fail"),
        ("bad_encoding", 200, "fail", "fail"),
        ("private_address", None, "fail", "fail"),
        ("bad_redirect", 302, "fail", "fail"),
        ("redirect_loop", 301, "fail", "fail"),
        ("too_many_redirects", 301, "fail", "fail"),
        ("robots", None, "fail", "fail"),
        ("robots_unavailable", None, "fail", "fail"),
        ("tls", None, "fail", "fail"),
        ("bad_url", None, "fail", "fail"),
        ("internal", None, "fail", "fail"),
        # no response and no error, or a status outside 2xx-5xx
        (None, None, "fail", "fail"),
        (None, 101, "fail", "fail"),
        (None, 999, "fail", "fail"),
    ],
)
def test_decision_for_each_outcome(
    error: str | None, status: int | None, first: str, last: str
) -> None:
    after_first = POLICY.decide(error, status, 1, rng())
    after_last = POLICY.decide(error, status, POLICY.max_attempts, rng())
    assert after_first.action == first
    assert after_last.action == last
    assert (after_first.delay_s > 0) == (first == "retry")
    assert after_last.delay_s == 0.0


def test_reason_names_the_error_or_status() -> None:
    assert POLICY.decide("timeout", None, 1, rng()).reason == "timeout"
    assert POLICY.decide("too_large", 200, 1, rng()).reason == "too_large"
    assert POLICY.decide(None, 503, 3, rng()).reason == "http_503"


def test_retries_until_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=5)
    actions = [policy.decide("connect", None, n, rng()).action for n in range(1, 6)]
    assert actions == ["retry", "retry", "retry", "retry", "fail"]


def test_single_attempt_policy_never_retries() -> None:
    policy = RetryPolicy(max_attempts=1)
    assert policy.decide("timeout", None, 1, rng()) == Decision("fail", 0.0, "timeout")
    assert policy.decide(None, 500, 1, rng()) == Decision("dead", 0.0, "http_500")


# --- exponential back-off and jitter ------------------------------------------------------


def test_exponential_growth_and_cap() -> None:
    policy = RetryPolicy(max_attempts=20, base_delay_s=2.0, max_delay_s=300.0, jitter=0.0)
    delays = [policy.decide("timeout", None, n, rng()).delay_s for n in range(1, 11)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0]


def test_huge_attempt_count_does_not_overflow() -> None:
    assert NO_JITTER.backoff_delay_s(10_000, rng()) == NO_JITTER.max_delay_s


def test_jitter_bounds() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay_s=2.0, jitter=0.5)
    generator = random.Random(1234)
    for attempts in (1, 2, 3, 4):
        nominal = 2.0 * 2 ** (attempts - 1)
        delays = [policy.backoff_delay_s(attempts, generator) for _ in range(2000)]
        assert all(nominal * 0.5 <= d <= nominal * 1.5 for d in delays)
        # the jitter is real: the spread covers most of the allowed band
        assert min(delays) < nominal * 0.55 and max(delays) > nominal * 1.45


def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    first = [POLICY.backoff_delay_s(2, r) for r in [random.Random(7)] * 5]
    second = [POLICY.backoff_delay_s(2, r) for r in [random.Random(7)] * 5]
    assert first == second


# --- Retry-After on 429 / 503 (RFC 9110 §10.2.3) ------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_a_floor_under_the_backoff(status: int) -> None:
    long_wait = POLICY.decide(None, status, 1, rng(), retry_after_s=120.0)
    assert long_wait == Decision("retry", 120.0, f"http_{status}")
    short_wait = NO_JITTER.decide(None, status, 2, rng(), retry_after_s=1.0)
    assert short_wait.delay_s == 4.0  # our own back-off is longer


def test_retry_after_beyond_the_limit_dead_letters() -> None:
    decision = POLICY.decide(None, 429, 1, rng(), retry_after_s=POLICY.max_retry_after_s + 1)
    assert decision.action == "dead"
    assert decision.reason == "http_429_retry_after_too_long"


def test_retry_after_ignored_for_other_statuses() -> None:
    assert NO_JITTER.decide(None, 500, 1, rng(), retry_after_s=100.0).delay_s == 2.0


# --- per host: slow-down and recovery -------------------------------------------------------


def test_429_with_retry_after_grows_interval_and_pauses_host() -> None:
    health = HostHealth()
    POLICY.on_response(health, 429, None, 30.0, now=1000.0)
    assert extra_interval_s(health) == 30.0
    assert not_before(health) == 1030.0


def test_slow_down_without_retry_after_doubles_from_one_second() -> None:
    health = HostHealth()
    grown = []
    for _ in range(12):
        POLICY.on_response(health, 429, None, None, now=0.0)
        grown.append(extra_interval_s(health))
    assert grown[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert grown[-1] == 600.0  # capped
    assert not_before(health) == 0.0  # no Retry-After: slower, not paused


def test_run_of_503_without_retry_after_both_slows_and_pauses() -> None:
    health = HostHealth()
    for _ in range(POLICY.host_pause_after):
        POLICY.on_response(health, 503, None, None, now=0.0)
    assert extra_interval_s(health) == 512.0
    assert not_before(health) == POLICY.host_pause_s  # 503 is also a 5xx failure


def test_retry_after_shorter_than_current_backoff_keeps_growing() -> None:
    health = HostHealth(backoff_s=10.0)
    POLICY.on_response(health, 429, None, 3.0, now=0.0)
    assert health.backoff_s == 20.0


def test_recovery_halves_gradually_then_drops_to_zero() -> None:
    health = HostHealth()
    POLICY.on_response(health, 429, None, 8.0, now=0.0)
    seen = []
    for status in (200, 200, 404, 301, 200, 200, 200):
        POLICY.on_response(health, status, None, None, now=100.0)
        seen.append(extra_interval_s(health))
    assert seen == [4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0]


def test_content_error_with_a_status_counts_as_a_good_answer() -> None:
    health = HostHealth(backoff_s=4.0, consecutive_failures=3)
    POLICY.on_response(health, 200, "too_large", None, now=0.0)
    assert health == HostHealth(backoff_s=2.0, consecutive_failures=0, responsive=True)


def test_retry_after_pause_is_capped() -> None:
    health = HostHealth()
    POLICY.on_response(health, 503, None, 10 * 86400.0, now=0.0)
    assert not_before(health) == POLICY.max_retry_after_s


def test_pause_never_moves_earlier() -> None:
    health = HostHealth()
    POLICY.on_response(health, 429, None, 100.0, now=0.0)
    POLICY.on_response(health, 429, None, 5.0, now=10.0)
    assert not_before(health) == 100.0


# --- per host: pause after a run of failures ---------------------------------------------


@pytest.mark.parametrize(("status", "error"), [(None, "connect"), (500, None), (503, None)])
def test_host_paused_after_consecutive_failures(status: int | None, error: str | None) -> None:
    policy = RetryPolicy(host_pause_after=3, host_pause_s=60.0)
    health = HostHealth()
    for now in (1.0, 2.0):
        policy.on_response(health, status, error, None, now)
        assert not_before(health) == 0.0
    policy.on_response(health, status, error, None, now=3.0)
    assert health.consecutive_failures == 3
    assert not_before(health) == 63.0


def test_host_that_does_not_answer_in_time_is_paused_at_once() -> None:
    # It held a crawl slot for the whole first-byte timeout: as long again, no request.
    policy = RetryPolicy(host_pause_after=10, timeout_pause_s=10.0)
    health = HostHealth(responsive=True)
    policy.on_response(health, None, "timeout", None, now=100.0)
    assert not_before(health) == 110.0 and not health.responsive
    policy.on_response(health, 200, None, None, now=200.0)
    assert health.responsive and health.consecutive_failures == 0


def test_slow_body_is_an_answer_not_a_pause() -> None:
    health = HostHealth()
    POLICY.on_response(health, 200, "timeout", None, now=100.0)  # headers came, body trickled
    assert not_before(health) == 0.0 and health.responsive
    assert health.consecutive_failures == 1


def test_failure_after_a_pause_pauses_again() -> None:
    policy = RetryPolicy(host_pause_after=2, host_pause_s=60.0)
    health = HostHealth()
    for now in (0.0, 1.0):
        policy.on_response(health, None, "timeout", None, now)
    assert not_before(health) == 61.0
    policy.on_response(health, None, "timeout", None, now=61.0)  # the one probe after the pause
    assert not_before(health) == 121.0


def test_success_resets_the_failure_count() -> None:
    policy = RetryPolicy(host_pause_after=3, host_pause_s=60.0)
    health = HostHealth()
    for status, error in [(None, "connect"), (None, "connect"), (200, None), (None, "connect")]:
        policy.on_response(health, status, error, None, now=0.0)
    assert health.consecutive_failures == 1
    assert not_before(health) == 0.0


@pytest.mark.parametrize("error", ["dns", "tls", "private_address", "robots"])
def test_errors_without_a_response_leave_health_alone(error: str) -> None:
    health = HostHealth(backoff_s=8.0, consecutive_failures=2, paused_until=5.0)
    POLICY.on_response(health, None, error, None, now=1.0)
    assert health == HostHealth(backoff_s=8.0, consecutive_failures=2, paused_until=5.0)


def test_429_is_not_a_host_failure() -> None:
    policy = RetryPolicy(host_pause_after=2, host_pause_s=60.0)
    health = HostHealth(consecutive_failures=1)
    policy.on_response(health, 429, None, None, now=0.0)
    assert health.consecutive_failures == 0
    assert not_before(health) == 0.0
