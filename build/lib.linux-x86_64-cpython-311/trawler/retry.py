"""Retry and back-off policy: what to do after each fetch, per URL and per host.

Pure decisions over small records, no I/O, no clock of its own: callers pass
``now`` (``time.monotonic()``) and a ``random.Random`` for jitter.

Per URL, ``RetryPolicy.decide`` maps one fetch outcome to a ``Decision``:

| outcome | action |
|---|---|
| 2xx, 3xx | done |
| dns failure | fail: a name that does not resolve now will not in seconds |
| connect / timeout / connection_closed | retry with exponential back-off, then fail |
| 5xx other than 503 | retry with exponential back-off, then dead (dead-lettered) |
| 429, 503 | retry no sooner than Retry-After (RFC 9110 §10.2.3), then dead |
| other 4xx | fail |
| any other error (too_large, not_html, robots, private_address, ...) | fail |

Per host, ``RetryPolicy.on_response`` updates a ``HostHealth``: 429/503 grow
the host's extra interval and pause it for Retry-After; good answers let the
interval recover gradually; a run of connect errors, timeouts or 5xx pauses
the host for a while instead of hammering it. A host that does not answer in
time (a timeout before any status line) is paused at once for
``timeout_pause_s``, as long as it held a crawl slot waiting: a host that
accepts connections and never answers can then use at most half of one slot.
``responsive`` tells the frontier which hosts answered their last request;
the others wait behind them (frontier/sqlite.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Action = Literal["done", "retry", "fail", "dead"]

# Errors a later attempt may cure: the server was unreachable or hung up.
TRANSIENT_ERRORS = frozenset({"connect", "timeout", "connection_closed"})
# Statuses that ask the client to slow down: 429 (RFC 6585 §4), 503 (RFC 9110 §15.6.4).
SLOW_DOWN_STATUSES = frozenset({429, 503})

BACKOFF_INITIAL_S = 1.0  # first extra interval after a 429/503 without Retry-After
BACKOFF_MAX_S = 600.0  # the extra interval never grows past this
BACKOFF_FLOOR_S = 0.1  # recovering below this drops the extra interval to zero


@dataclass(slots=True)
class Decision:
    """What to do with a URL after one fetch attempt."""

    action: Action  # done · retry (after delay_s) · fail (no retry) · dead (retries spent)
    delay_s: float  # for retry: wait at least this long before the next attempt
    reason: str  # short code: the error, or http_<status>


@dataclass(slots=True)
class HostHealth:
    """How one host (``host[:port]``) has been answering. Times are monotonic seconds."""

    backoff_s: float = 0.0  # extra interval on top of the politeness interval
    consecutive_failures: int = 0  # connect errors, timeouts and 5xx in a row
    paused_until: float = 0.0  # no request may start before this (Retry-After, pause)
    # Its last request got an answer (a status line); None: not tried yet.
    responsive: bool | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The configured side of retries and back-off, shared by all URLs and hosts."""

    max_attempts: int = 3  # total fetch attempts for transient errors, 5xx, 429
    base_delay_s: float = 2.0  # first retry waits about this long, then doubles
    max_delay_s: float = 300.0  # back-off cap (Retry-After may ask for longer)
    jitter: float = 0.5  # each delay is scaled by a random factor in [1 - jitter, 1 + jitter]
    host_pause_after: int = 10  # consecutive failures of one host before it is paused
    host_pause_s: float = 300.0
    max_retry_after_s: float = 3600.0  # a longer Retry-After dead-letters the URL
    timeout_pause_s: float = 10.0  # a timeout without any answer pauses the host this long

    # -- per URL ----------------------------------------------------------------------
    def decide(
        self,
        error: str | None,
        status: int | None,
        attempts_made: int,
        rng: random.Random,
        retry_after_s: float | None = None,
    ) -> Decision:
        """The fate of a URL after its ``attempts_made``-th attempt (1 after the first).

        ``error`` takes precedence over ``status``: a body cut off mid-way
        (``connection_closed`` on a 200) is retried, a 200 that was
        ``too_large`` fails.
        """
        if error is not None:
            if error in TRANSIENT_ERRORS:
                return self._retry_or(error, "fail", attempts_made, rng)
            return Decision("fail", 0.0, error)
        if status is None:
            return Decision("fail", 0.0, "no_response")
        reason = f"http_{status}"
        if 200 <= status < 400:
            return Decision("done", 0.0, reason)
        if status in SLOW_DOWN_STATUSES:
            return self._slow_down(reason, attempts_made, rng, retry_after_s)
        if 500 <= status < 600:
            return self._retry_or(reason, "dead", attempts_made, rng)
        return Decision("fail", 0.0, reason)  # 4xx, and anything outside 2xx-5xx

    def backoff_delay_s(self, attempts_made: int, rng: random.Random) -> float:
        """base * 2**(attempts - 1), capped at max_delay_s, then scaled by ± jitter."""
        exponent = min(max(attempts_made - 1, 0), 62)  # 2**62 s is past any cap
        delay = min(self.base_delay_s * 2**exponent, self.max_delay_s)
        return max(delay * rng.uniform(1.0 - self.jitter, 1.0 + self.jitter), 0.0)

    def _retry_or(
        self, reason: str, give_up: Action, attempts_made: int, rng: random.Random
    ) -> Decision:
        if attempts_made >= self.max_attempts:
            return Decision(give_up, 0.0, reason)
        return Decision("retry", self.backoff_delay_s(attempts_made, rng), reason)

    def _slow_down(
        self, reason: str, attempts_made: int, rng: random.Random, retry_after_s: float | None
    ) -> Decision:
        # RFC 9110 §10.2.3: Retry-After says how long the client ought to wait
        # before a follow-up request; it is a floor under our own back-off.
        if retry_after_s is not None and retry_after_s > self.max_retry_after_s:
            return Decision("dead", 0.0, f"{reason}_retry_after_too_long")
        decision = self._retry_or(reason, "dead", attempts_made, rng)
        if decision.action == "retry" and retry_after_s is not None:
            decision.delay_s = max(decision.delay_s, retry_after_s)
        return decision

    # -- per host -----------------------------------------------------------------------
    def on_response(
        self,
        health: HostHealth,
        status: int | None,
        error: str | None,
        retry_after_s: float | None,
        now: float,
    ) -> None:
        """Update a host's health after one request to it (robots.txt included)."""
        if status is not None:  # a status line is an answer, even with a slow body
            health.responsive = True
        elif error in TRANSIENT_ERRORS:
            health.responsive = False
        if error in TRANSIENT_ERRORS or (error is None and status is not None and status >= 500):
            self._failed(health, now)
            if error == "timeout" and status is None:  # not even a status line
                health.paused_until = max(health.paused_until, now + self.timeout_pause_s)
        elif status is not None:  # the host answered: a content error is not its fault
            health.consecutive_failures = 0
        if status in SLOW_DOWN_STATUSES:
            self._slow_host(health, retry_after_s, now)
        elif status is not None and status < 500 and error not in TRANSIENT_ERRORS:
            _recover(health)
        # dns, tls, private_address... without a status say nothing about load.

    def _failed(self, health: HostHealth, now: float) -> None:
        health.consecutive_failures += 1
        # Once the run is long enough, every further failure pauses the host
        # again: after a pause it gets one request, not a burst, until it
        # answers well (which resets the count).
        if health.consecutive_failures >= self.host_pause_after:
            health.paused_until = max(health.paused_until, now + self.host_pause_s)

    def _slow_host(self, health: HostHealth, retry_after_s: float | None, now: float) -> None:
        grown = health.backoff_s * 2 if health.backoff_s else BACKOFF_INITIAL_S
        health.backoff_s = min(max(retry_after_s or 0.0, grown), BACKOFF_MAX_S)
        if retry_after_s is not None:
            wait = min(retry_after_s, self.max_retry_after_s)
            health.paused_until = max(health.paused_until, now + wait)


def _recover(health: HostHealth) -> None:
    """A good answer halves the extra interval; a small remainder is dropped."""
    health.backoff_s /= 2
    if health.backoff_s < BACKOFF_FLOOR_S:
        health.backoff_s = 0.0


def not_before(health: HostHealth) -> float:
    """The earliest monotonic time the host may be contacted (Retry-After, pause)."""
    return health.paused_until


def extra_interval_s(health: HostHealth) -> float:
    """Seconds to add to the host's politeness interval while it is backed off."""
    return health.backoff_s
