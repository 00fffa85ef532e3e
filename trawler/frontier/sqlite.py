"""The embedded frontier: an in-memory ready-heap over SQLite-backed queues.

Mercator's design (DESIGN.md): one queue per host, ordered by depth (seeds and
shallow pages first), and a heap of hosts keyed by the monotonic time each
may next be contacted. A pick pops the earliest-ready host, O(log hosts),
never a scan. Heap entries are invalidated lazily: a slot remembers the key
it was pushed under (``in_heap_at``), and stale entries are dropped on pop.

Hosts sit in one of three heaps by how their last request went (retry.py,
``HostHealth.responsive``): answered, not tried yet, no answer (timeout,
connect error). The first two are picked by readiness alone; a host that did
not answer only when neither has a host ready. Hosts not known to answer
(the last two heaps) hold at most ``unproven_limit`` requests at once
(politeness.unproven_limit). Without that, hosts that accept connections and
never answer held every slot of the crawl, and the healthy hosts got no
request for minutes.

What the frontier keeps in the data directory, and its writer-thread side
(``load``, ``persist_*``), is sqlite_durable.py's ``DurableState``; the hosts it
holds and their politeness state, shared with the process's other jobs through
the host table (hosts.py), sqlite_holds.py's ``HeldHosts``. Both are parts of
``SqliteFrontier``: their methods are its own. A host another job holds is left
out of the heap until that job releases it; one that another job sent a request
to since goes back into the heap under its later next-allowed time.
Everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Sequence

from trawler.frontier.disk_queue import WINDOW, DiskQueues
from trawler.frontier.hosts import HostTable
from trawler.frontier.importance import Importance
from trawler.frontier.importance_store import KeptCash
from trawler.frontier.restart_state import RestartState
from trawler.frontier.seen import SeenSet
from trawler.frontier.sqlite_durable import DurableState
from trawler.frontier.sqlite_holds import HeldHosts
from trawler.politeness import HostClaim, HostSlot, PolitenessPolicy
from trawler.records import CrawlRequest
from trawler.recrawl_lanes import REVISIT, RevisitLanes

# (next_allowed_at, sequence, host): the ready-heap order. With --priority importance
# the hosts not contacted yet go by -(their cash) instead of the sequence.
ReadyEntry = tuple[float, float, str]


class SqliteFrontier(DurableState, HeldHosts):
    """The embedded frontier of one job (module doc)."""

    seen_lasts = True  # its seen set forgets nothing while open (seen.py)

    def __init__(
        self,
        policy: PolitenessPolicy,
        clock: Callable[[], float] = time.monotonic,
        unproven_limit: int | None = None,  # None: no cap
        window: int = WINDOW,  # URLs of a host held in memory once load() opens the disk
        hosts: HostTable | None = None,  # the process's; None: one of its own
        importance: Importance | None = None,  # --priority importance; None: depth order
    ) -> None:
        self.policy = policy
        self._hosts = hosts if hosts is not None else HostTable()
        self.clock = clock
        self.unproven_limit = unproven_limit
        self.window = window
        self._seen = SeenSet()
        self._queues = DiskQueues(window=None)  # all in memory until load() opens the disk
        self._slots: dict[str, HostSlot] = {}
        self._ready: list[ReadyEntry] = []  # hosts that answered their last request
        self._untried: list[ReadyEntry] = []  # hosts not contacted yet
        self._silent: list[ReadyEntry] = []  # hosts whose last request got no answer
        self._unproven_leased: set[str] = set()  # leased hosts from the last two
        self._seq = itertools.count()
        self._leased = 0
        self._closed = False
        self._changed = asyncio.Event()
        self._wake: asyncio.TimerHandle | None = None  # sets _changed at _wake_at (loop clock)
        self._wake_at = 0.0
        self._wake_due = 0.0  # _wake_at on self.clock: the timer wakes next() by then
        self._kept = RestartState(clock)
        self._revisits = RevisitLanes()  # due revisits beside the queues (recrawl_lanes.py)
        self.seen_rows_read = 0  # rows load() read to rebuild the seen set
        self.importance = importance
        self._kept_cash = KeptCash(importance) if importance is not None else None

    # -- scheduling (event loop) ------------------------------------------------
    async def filter_new(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        fresh = self._seen.mark_new([request.fp for request in requests])
        return [request for request, new in zip(requests, fresh, strict=True) if new]

    def enqueue(self, requests: Sequence[CrawlRequest]) -> None:
        """Schedule committed URLs: new ones, or leased ones handed back."""
        queues, committed = self._queues, []
        if self.importance is not None:
            for request in requests:
                self.importance.queued(request)
        for request in requests:
            if queues.push(request):
                committed.append(request.fp)
        for host in dict.fromkeys(request.host for request in requests):  # in order found
            self._schedule(self._slot(host))
        if committed or not self._queues.window:  # (no database: all are committed)
            fps = committed if self._queues.window else [r.fp for r in requests]
            self._seen.committed(fps, queues.enqueued_seq)
        if requests:
            self._changed.set()

    async def next(self) -> CrawlRequest | None:
        while not self._closed:
            if self.importance is not None and self.importance.risen:
                self._rerank(self.importance)
            heads = self._heads()
            if not heads:
                if self._leased == 0 and self._nothing_queued():
                    return None
                await self._wait(None)
                continue
            now = self.clock()
            ready = [(head, heap) for head, heap in heads if head[0] <= now]
            if ready:  # the earliest ready, a silent host only if no other is ready
                head, heap = min(ready, key=lambda item: (item[1] is self._silent, item[0]))
                request = self._lease(heap, head[2])
                if request is not None:
                    return request
                continue
            await self._wait(min(head[0] for head, _ in heads) - now)
        return None

    def _nothing_queued(self) -> bool:
        revisits = self._revisits
        if revisits.continuous or revisits.queued:
            return False
        return self._queues.queued == 0 or not revisits.discovery

    def _heads(self) -> list[tuple[ReadyEntry, list[ReadyEntry]]]:
        """The first live entry of each heap a host may be leased from now."""
        heaps = [self._ready]
        limit = self.unproven_limit
        if limit is None or len(self._unproven_leased) < limit:
            heaps += [self._untried, self._silent]
        return [(head, heap) for heap in heaps if (head := self._head(heap)) is not None]

    def _head(self, heap: list[ReadyEntry]) -> ReadyEntry | None:
        """The heap's first live entry, stale ones dropped."""
        while heap:
            ready_at, _, host = heap[0]
            slot = self._slots[host]
            if slot.in_heap_at != ready_at or slot.busy:
                heapq.heappop(heap)  # stale entry
            elif self._heap_of(slot) is not heap:  # its health changed while it waited
                heapq.heappush(self._heap_of(slot), heapq.heappop(heap))
            else:
                claim = slot.claim
                assert claim is not None
                if claim.holder is None and self._caught_up(slot, claim):
                    return heap[0]
                heapq.heappop(heap)  # another job holds the host, or sent to it since
                slot.in_heap_at = None
                if claim.holder is not None:
                    HostTable.wait(claim, self._host_released)  # back in heap when released
                else:
                    self._schedule(slot)  # under its later next-allowed time
        return None

    def set_policy(self, policy: PolitenessPolicy) -> None:
        """New politeness settings, live: every host's next time under them, and the
        ready-heaps rebuilt on those times (O(hosts log hosts), once per change)."""
        self.policy = policy
        for slot in self._slots.values():
            policy.recompute(slot)
            self._note(slot)
            if slot.in_heap_at is not None:
                slot.in_heap_at = None  # its old entry is stale now
                self._schedule(slot)

    def _caught_up(self, slot: HostSlot, claim: HostClaim) -> bool:
        """Fold in what the process's other jobs did to the host; True when the slot
        keeps its heap key (nothing new, the usual case: a comparison or two)."""
        same_sender = claim.last_sent_at == slot.last_sent_at
        if same_sender and claim.next_allowed_at <= slot.next_allowed_at:
            return True
        if claim.last_sent_at is not None and (
            slot.last_sent_at is None or claim.last_sent_at > slot.last_sent_at
        ):
            self.policy.after_request(slot, claim.last_sent_at)  # this job's interval from it
        slot.next_allowed_at = max(slot.next_allowed_at, claim.next_allowed_at)
        return slot.next_allowed_at == slot.in_heap_at

    def _host_released(self, host: str) -> None:
        """Another job released a host this frontier has URLs of."""
        slot = self._slots.get(host)
        if slot is not None and not self._closed:
            self._schedule(slot)

    def _lease(self, heap: list[ReadyEntry], host: str) -> CrawlRequest | None:
        heapq.heappop(heap)
        slot = self._slots[host]
        slot.in_heap_at = None
        request = self._revisits.take(host, self._queues.has_queued(host))  # whose turn
        if request is None and self._revisits.discovery:
            importance = self.importance
            if importance is None:
                request = self._queues.pop(host)
            elif (request := self._queues.pop(host, importance.rank)) is not None:
                importance.leased(request)
        if request is None:  # its count was off; nothing of it is queued
            return None
        slot.busy = True
        assert slot.claim is not None
        slot.claim.holder = self
        if heap is not self._ready:
            self._unproven_leased.add(host)
        self._leased += 1
        return request

    def _heap_of(self, slot: HostSlot) -> list[ReadyEntry]:
        responsive = slot.health.responsive
        if responsive is None:
            return self._untried
        return self._ready if responsive else self._silent

    async def retry_later(self, request: CrawlRequest, delay_s: float) -> None:
        """Keep the lease, and queue the URL again after ``delay_s`` (its host is not delayed)."""
        asyncio.get_running_loop().call_later(delay_s, self._requeue, request)

    def _requeue(self, request: CrawlRequest) -> None:
        if not self._closed:
            self._leased -= 1
            self._enqueue_one(request)

    def _enqueue_one(self, request: CrawlRequest) -> None:
        """A leased URL back in the queue, or a revisit back in its host's lane."""
        if request.kind != REVISIT:
            self.enqueue([request])
            return
        self._revisits.put_back(request)
        self._schedule(self._slot(request.host))
        self._changed.set()

    def ack(self, count: int) -> None:
        self._queues.forget_done()
        self._leased -= count
        if self._leased == 0:
            self._changed.set()

    async def hand_back(self, request: CrawlRequest, delay_s: float = 0.0) -> None:
        slot = self._slot(request.host)
        slot.next_allowed_at = max(slot.next_allowed_at, self.clock() + delay_s)
        self._note(slot)
        self._leased -= 1
        self._enqueue_one(request)

    # -- revisits (frontier/base.py ``Revisitable``) -----------------------------------
    def set_revisit_mode(self, continuous: bool, discovery: bool) -> None:
        self._revisits.continuous, self._revisits.discovery = continuous, discovery
        self._changed.set()  # a next() waiting for more revisits may be done now

    def revisit_poll_started(self) -> int:
        return self._revisits.poll_started()

    def add_revisits(self, requests: Sequence[CrawlRequest], poll: int | None) -> int:
        hosts = self._revisits.add(requests, poll)
        for host in dict.fromkeys(hosts):
            self._schedule(self._slot(host))
        return len(hosts)

    def revisits_done(self, urls: Sequence[str]) -> None:
        self._revisits.done(urls)

    @property
    def revisits_pending(self) -> int:
        return self._revisits.pending

    def close(self) -> None:
        self._closed = True
        self._changed.set()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    @property
    def queued(self) -> int:
        return self._queues.queued

    @property
    def leased(self) -> int:
        return self._leased

    @property
    def active_hosts(self) -> int:
        return sum(1 for slot in self._slots.values() if slot.busy)

    @property
    def hosts(self) -> int:
        return len(self._slots)

    # -- internals --------------------------------------------------------------
    def _slot(self, host: str) -> HostSlot:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = HostSlot(host, claim=self._hosts.get(host))
        return slot

    def _note(self, slot: HostSlot) -> None:
        """The slot's times changed: for a restart, and for the process's other jobs."""
        assert slot.claim is not None
        HostTable.note(slot.claim, slot.last_sent_at, slot.next_allowed_at)
        self._kept.note_host(slot)

    def _schedule(self, slot: HostSlot) -> None:
        """Put an idle host with queued URLs into the ready-heap (once)."""
        if slot.busy or slot.in_heap_at is not None:
            return
        if not self._revisits.schedulable(slot.host, self._queues.has_queued(slot.host)):
            return
        slot.in_heap_at = slot.next_allowed_at
        heap = self._heap_of(slot)
        heapq.heappush(heap, (slot.next_allowed_at, self._order(heap, slot.host), slot.host))
        # A host due no sooner than the waiting next()'s timer need not wake it (a host
        # is scheduled as each response ends, ~1 s ahead: one wake-up a page saved).
        if self._wake is None or slot.next_allowed_at < self._wake_due:
            self._changed.set()

    def _order(self, heap: list[ReadyEntry], host: str) -> float:
        """The tie-break among hosts ready at the same time: first come, first served;
        with --priority importance, the hosts not contacted yet by their cash."""
        if self.importance is not None and heap is self._untried:
            return -self.importance.host_rank(host)
        return next(self._seq)

    def _rerank(self, importance: Importance) -> None:
        """Hosts waiting for their first visit whose cash rose go up the heap: a new
        entry under the same time (the old one is dropped as stale once either is
        leased: ``in_heap_at`` is cleared then)."""
        for host in importance.risen:
            slot = self._slots.get(host)
            if slot is None or slot.in_heap_at is None or slot.busy:
                continue
            if self._heap_of(slot) is self._untried:
                heapq.heappush(self._untried, (slot.in_heap_at, -importance.host_rank(host), host))
        importance.risen.clear()

    async def _wait(self, timeout: float | None) -> None:
        """Sleep until something changes (new URLs, a host freed) or ``timeout``.

        A timer that sets the event, not asyncio.wait_for: that builds a task per
        wait, and the dispatcher waits here for nearly every URL it hands out. The
        timer is kept when the event ends the wait (the usual case: a page done, its
        host free again) and serves the next wait if it is due no later; a wake-up
        before the next host is ready only makes next() look again.
        """
        self._changed.clear()
        if timeout is not None:
            loop = asyncio.get_running_loop()
            wake_at = loop.time() + timeout
            if self._wake is None or self._wake_at > wake_at:
                if self._wake is not None:
                    self._wake.cancel()
                self._wake, self._wake_at = loop.call_at(wake_at, self._woken), wake_at
                self._wake_due = self.clock() + timeout
        await self._changed.wait()

    def _woken(self) -> None:
        self._wake = None
        self._changed.set()
