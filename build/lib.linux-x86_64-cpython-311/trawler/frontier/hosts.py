"""The host table one process shares across all its jobs: politeness per host, not per job.

Each embedded frontier keeps its own ``HostSlot`` per host (its ready-heap place,
its Crawl-delay, its back-off); the table adds what must hold across jobs: which
frontier has a request to the host in flight (at most one in the process), when
the host was last sent a request by anyone, and the latest next-allowed time any
job set for it. A frontier claims a host when it leases one of its URLs and
releases it in ``finish_host``; a frontier that found the host held by another
job asks to be told when it is released, and schedules the host again then.

So two jobs crawling one host never have two requests in flight to it, and the
gap between two requests to it is at least the interval of the job that sent
the first one (its next-allowed time) and the interval of the job that sends
the second one (from the last send by anyone). Loop-only, no locks; no I/O.
Across processes (distributed mode) the same holds through Redis instead
(frontier/redis.py).
"""

from __future__ import annotations

from trawler.politeness import HostClaim, Released


class HostTable:
    """Host name → ``HostClaim``; one per process (Services), or one per frontier alone."""

    def __init__(self) -> None:
        self._claims: dict[str, HostClaim] = {}

    def get(self, host: str) -> HostClaim:
        claim = self._claims.get(host)
        if claim is None:
            claim = self._claims[host] = HostClaim(host)
        return claim

    @staticmethod
    def wait(claim: HostClaim, released: Released) -> None:
        """Call ``released(host)`` once, when the claim's holder releases it."""
        if claim.waiters is None:
            claim.waiters = set()
        claim.waiters.add(released)

    @staticmethod
    def release(claim: HostClaim) -> None:
        claim.holder = None
        waiters, claim.waiters = claim.waiters, None
        if waiters:
            for released in waiters:
                released(claim.host)

    @staticmethod
    def note(claim: HostClaim, last_sent_at: float | None, next_allowed_at: float) -> None:
        """A job's view of the host changed: keep the latest of each time."""
        if last_sent_at is not None and (
            claim.last_sent_at is None or last_sent_at > claim.last_sent_at
        ):
            claim.last_sent_at = last_sent_at
        if next_allowed_at > claim.next_allowed_at:
            claim.next_allowed_at = next_allowed_at

    @staticmethod
    def sooner(claim: HostClaim, last_sent_at: float | None, next_allowed_at: float) -> None:
        """The job that sent the host's last request saw it recover (a good answer
        after a 429/503): the next-allowed time that request set may come sooner."""
        if last_sent_at is not None and last_sent_at == claim.last_sent_at:
            claim.next_allowed_at = min(claim.next_allowed_at, next_allowed_at)

    def forget_times(self) -> None:
        """Politeness settings changed: each job notes its hosts again (set_policy)."""
        for claim in self._claims.values():
            claim.next_allowed_at = 0.0

    def __len__(self) -> int:
        return len(self._claims)
