"""The hosts the embedded frontier holds, and their politeness state.

A host is held from its lease (``next``), or ``acquire_host`` for a robots.txt
fetch, to ``finish_host``, so one request is in flight per host. Its slot's
times move with each request sent and each response (politeness.py), and are
noted in the process's host table (hosts.py): politeness holds across the jobs
of a process. A host another job holds waits until that job releases it.

``HeldHosts`` is a part of ``SqliteFrontier`` (sqlite.py), which builds the state
declared below; its methods are the frontier's own, not a layer in front of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from trawler.frontier.hosts import HostTable

if TYPE_CHECKING:
    from trawler.politeness import HostClaim, HostSlot, PolitenessPolicy


class HeldHosts:
    """Taking, pacing and giving back the hosts this frontier holds (module doc)."""

    # Built by SqliteFrontier.__init__ (sqlite.py).
    policy: PolitenessPolicy
    clock: Callable[[], float]
    _hosts: HostTable
    _slots: dict[str, HostSlot]
    _unproven_leased: set[str]
    _changed: asyncio.Event
    # SqliteFrontier's slots and ready-heaps (sqlite.py).
    _slot: Callable[[str], HostSlot]
    _note: Callable[[HostSlot], None]
    _schedule: Callable[[HostSlot], None]
    _caught_up: Callable[[HostSlot, HostClaim], bool]

    def share_hosts(self, table: HostTable) -> None:
        """Take part in the process's host table (Services), before the first lease."""
        self._hosts = table
        for host, slot in self._slots.items():
            slot.claim = claim = table.get(host)
            HostTable.note(claim, slot.last_sent_at, slot.next_allowed_at)

    def record_sent(self, host: str, sent_at: float) -> None:
        slot = self._slot(host)
        self.policy.after_request(slot, sent_at)
        self._note(slot)

    def record_response(
        self, host: str, status: int | None, error: str | None, retry_after_s: float | None
    ) -> None:
        slot = self._slot(host)
        before = slot.next_allowed_at
        self.policy.after_response(slot, status, error, retry_after_s, self.clock())
        if slot.next_allowed_at < before:  # recovering (politeness.after_response)
            assert slot.claim is not None
            HostTable.sooner(slot.claim, slot.last_sent_at, slot.next_allowed_at)
        self._note(slot)

    async def finish_host(self, host: str) -> None:
        slot = self._slot(host)
        slot.busy = False
        claim = slot.claim
        if claim is not None and claim.holder is self:
            HostTable.release(claim)  # other jobs waiting for the host schedule it again
        if host in self._unproven_leased:
            self._unproven_leased.discard(host)
            self._changed.set()  # a next() waiting for the cap may go on
        self._schedule(slot)

    async def acquire_host(self, host: str) -> None:
        slot = self._slot(host)
        claim = slot.claim
        assert claim is not None
        while slot.busy or claim.holder is not None:
            await asyncio.sleep(0.05)
        slot.busy = True
        claim.holder = self
        slot.in_heap_at = None  # its heap entry, if any, is now stale
        self._caught_up(slot, claim)
        await self.wait_host_ready(host)

    def host_wait_s(self, host: str) -> float:
        return self._slot(host).next_allowed_at - self.clock()

    async def wait_host_ready(self, host: str) -> None:
        slot = self._slot(host)
        # Again after each sleep: live settings (set_policy) may have moved the time on.
        while (delay := slot.next_allowed_at - self.clock()) > 0:
            await asyncio.sleep(delay)

    def set_crawl_delay(self, host: str, crawl_delay_s: float | None) -> None:
        slot = self._slot(host)
        self.policy.set_crawl_delay(slot, crawl_delay_s)
        self._note(slot)
