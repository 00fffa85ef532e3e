"""Per-host queues on disk, with a small window of each host's first URLs in memory.

Every queued URL is a row of ``urls`` (store/sqlite.py), clustered by
``(host, depth, seq)``: one host's queue is one range of the table, in the
order it is crawled, and a new URL is appended at the end of its host's range
(``seq`` grows). Memory holds only a window of up to ``window`` URLs a host;
a lease that leaves fewer than half of them reads the next ones at once
(refilled ahead of need: a host whose window ran dry waits on a read only
right after a restart).

What is in memory is stated by each host's ``cursor``: every queued row of
the host with a key (depth, seq) up to the cursor is in memory (in the window,
or leased), no row above it is. A new URL (its row committed) goes into the
window when its key is below the cursor (a shallower URL found late), or when
nothing of the host is left on disk and the window has room; otherwise it
stays on disk, counted. A window that a run of shallow URLs grows past twice
its size gives its deepest URLs back to disk and lowers its cursor; a refill
then skips rows that are leased (``_leased``), which would otherwise be read
twice.

A refill reads on the event loop through its own read-only connection (WAL:
it never waits for the writer, and a read of one window is ~0.1 ms). It reads
committed rows only, and only rows already enqueued (``seq`` up to
``_enqueued_seq``): a row committed whose ``enqueue`` has not run yet would be
counted twice.

Per-host counts of queued (and of admitted: not skipped) rows are kept in
``host_queues`` in each commit's transaction, so that a resume schedules every
host, and knows its budget, without reading its URLs.
"""

from __future__ import annotations

import heapq
import itertools
import sqlite3
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from trawler.records import CrawlRequest
from trawler.store.sqlite import DEAD, DONE, QUEUED, SKIPPED
from trawler.store.sqlite_totals import count_visited

WINDOW = 16  # URLs of a host kept in memory
CHUNK = 10_000  # rows per executemany: a huge batch is written in bounded pieces

Key = tuple[int, int]  # (depth, seq): the order of a host's queue
QueueItem = tuple[int, int, CrawlRequest]
BEFORE_ALL: Key = (-1, -1)
Rank = Callable[[CrawlRequest], float]  # higher first (frontier/importance.py)

_REFILL = (
    "SELECT depth, seq, url, parent_url, fp, attempts, kind, lastmod, changefreq FROM urls"
    f" WHERE host = ? AND (depth, seq) > (?, ?) AND state = {QUEUED} AND seq <= ?"
    " ORDER BY depth, seq LIMIT ?"
)
_COUNT = (
    "INSERT INTO host_queues (host, queued, admitted) VALUES (?, ?, ?)"
    " ON CONFLICT(host) DO UPDATE SET queued = queued + excluded.queued,"
    " admitted = admitted + excluded.admitted"
)


@dataclass(slots=True)
class HostQueue:
    window: list[QueueItem] = field(default_factory=list)  # a heap by key
    count: int = 0  # queued URLs of the host, window and disk; leased ones not
    cursor: Key = BEFORE_ALL  # queued rows up to here are in memory, none above

    @property
    def on_disk(self) -> int:
        return self.count - len(self.window)


class DiskQueues:
    """The queues of all hosts. ``window=None``: no database, all in memory (tests)."""

    def __init__(self, window: int | None = WINDOW) -> None:
        self.window = window
        self.queued = 0
        self.rows_read = 0  # rows refills read (tests and the benchmark count them)
        self._queues: dict[str, HostQueue] = {}
        self._reader: sqlite3.Connection | None = None
        self._seq = itertools.count(1)
        self._enqueued_seq = 0  # every row up to this seq was enqueued
        self._new_seq: dict[int, int] = {}  # fp -> seq: committed, not enqueued yet
        self._leased: dict[int, tuple[str, int, int]] = {}  # fp -> (host, depth, seq)
        self._done: deque[int] = deque()  # fps finished by persist_done, until ack

    # -- writer thread -------------------------------------------------------------
    def open(self, conn: sqlite3.Connection) -> list[str]:
        """Counts per host and the next seq, without reading any URL; returns the
        hosts with queued URLs."""
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        self._reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        last = conn.execute("SELECT max(seq) FROM urls").fetchone()[0] or 0
        self._seq = itertools.count(last + 1)
        self._enqueued_seq = last
        rows = conn.execute("SELECT host, queued FROM host_queues WHERE queued > 0")
        for host, count in rows:
            self._queues[host] = HostQueue(count=count)
            self.queued += count
        return list(self._queues)

    def persist_new(self, conn: sqlite3.Connection, requests: Sequence[CrawlRequest]) -> None:
        """Append new URLs to their hosts' queues (inside the commit's transaction)."""
        new_seq, rows = self._new_seq, []
        for r in requests:
            seq = new_seq[r.fp] = next(self._seq)
            rows.append((r.host, r.depth, seq, r.fp, r.url, r.parent_url, r.kind, r.lastmod,
                         r.changefreq))  # fmt: skip
        # In key order, each host's new rows go into its B-tree leaf one after the
        # other and the leaves are visited once, in order (in discovery order, every
        # row was a walk from the root to another host's leaf).
        rows.sort()
        for chunk in _chunks(rows):
            conn.executemany(
                "INSERT INTO urls (host, depth, seq, fp, url, parent_url, kind, lastmod,"
                " changefreq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                chunk,
            )
        added = Counter(r.host for r in requests)
        conn.executemany(_COUNT, [(host, n, n) for host, n in added.items()])

    def persist_done(
        self,
        conn: sqlite3.Connection,
        done: Sequence[tuple[CrawlRequest, bool]],
        skipped: Sequence[tuple[CrawlRequest, str]],
    ) -> None:
        """Finish leased URLs: done (or dead-lettered) and skipped; a row already
        finished is left as it is and not counted twice."""
        changes: list[tuple[CrawlRequest, int, int, str | None]]
        changes = [(r, DEAD if dead else DONE, r.attempts + 1, None) for r, dead in done]
        changes += [(r, SKIPPED, r.attempts, reason) for r, reason in skipped]
        by_host: dict[tuple[str, bool], list[tuple]] = defaultdict(list)
        for request, state, attempts, reason in changes:
            host, depth, seq = self._leased.get(request.fp) or self._find(conn, request)
            by_host[host, state == SKIPPED].append((state, attempts, reason, host, depth, seq))
            self._done.append(request.fp)
        finished = []
        for (host, skipped_now), rows in by_host.items():
            cursor = conn.executemany(
                "UPDATE urls SET state = ?, attempts = ?, reason = ?"
                f" WHERE host = ? AND depth = ? AND seq = ? AND state = {QUEUED}",
                rows,
            )
            finished.append((host, -cursor.rowcount, -cursor.rowcount if skipped_now else 0))
        conn.executemany(_COUNT, finished)
        count_visited(conn, -sum(queued for _, queued, _ in finished))

    @staticmethod
    def _find(conn: sqlite3.Connection, request: CrawlRequest) -> tuple[str, int, int]:
        """The key of a URL that was not leased from this frontier (a scan of its host)."""
        row = conn.execute(
            "SELECT depth, seq FROM urls WHERE host = ? AND fp = ?", (request.host, request.fp)
        ).fetchone()
        return (request.host, *row) if row else (request.host, -1, -1)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # -- event loop ----------------------------------------------------------------
    def push(self, request: CrawlRequest) -> bool:
        """Queue a committed URL (new, handed back or retried); True if it is new.
        (The hot path of a commit: one call a URL found.)"""
        fp = request.fp
        seq = self._new_seq.pop(fp, None)
        new = seq is not None
        if seq is None:
            kept = self._leased.pop(fp, None)
            seq = kept[2] if kept is not None else next(self._seq)
        elif seq > self._enqueued_seq:
            self._enqueued_seq = seq
        queue = self._queues.get(request.host)
        if queue is None:
            queue = self._queues[request.host] = HostQueue()
        key = (request.depth, seq)
        limit, window = self.window, queue.window
        if limit is None or key < queue.cursor:
            heapq.heappush(window, (*key, request))
            if limit is not None and len(window) > 2 * limit:
                self._give_back(queue, limit)
        elif queue.count == len(window) and len(window) < limit:  # nothing on disk
            heapq.heappush(window, (*key, request))
            queue.cursor = key
        queue.count += 1
        self.queued += 1
        return new

    def pop(self, host: str, rank: Rank | None = None) -> CrawlRequest | None:
        """Lease the host's first URL (None if it has none after all); with ``rank``,
        the window's URL it ranks highest (ties: the first), not the first."""
        queue = self._queues[host]
        if not queue.window:
            self._refill(host, queue)
            if not queue.window:
                return None
        if rank is None:
            depth, seq, request = heapq.heappop(queue.window)
        else:
            depth, seq, request = _pop_best(queue.window, rank)
        queue.count -= 1
        self.queued -= 1
        if self.window is not None:
            self._leased[request.fp] = (host, depth, seq)
            if queue.on_disk and len(queue.window) <= self.window // 2:
                self._refill(host, queue)
        return request

    def has_queued(self, host: str) -> bool:
        queue = self._queues.get(host)
        return queue is not None and queue.count > 0

    def forget_done(self) -> None:
        """The commit that finished them returned: their rows will not be read again."""
        while self._done:
            self._leased.pop(self._done.popleft(), None)

    @property
    def enqueued_seq(self) -> int:
        return self._enqueued_seq

    def in_memory(self) -> int:
        """URLs held in windows (the benchmark reports it)."""
        return sum(len(queue.window) for queue in self._queues.values())

    def _refill(self, host: str, queue: HostQueue) -> None:
        assert self._reader is not None and self.window is not None
        wanted = self.window - len(queue.window)
        rows = self._reader.execute(
            _REFILL, (host, *queue.cursor, self._enqueued_seq, wanted)
        ).fetchall()
        self.rows_read += len(rows)
        leased = self._leased
        for depth, seq, url, parent, fp, attempts, kind, lastmod, changefreq in rows:
            queue.cursor = (depth, seq)
            if fp not in leased:
                request = CrawlRequest(url, depth, parent, host, fp, attempts, kind, lastmod,
                                       changefreq=changefreq)  # fmt: skip
                heapq.heappush(queue.window, (depth, seq, request))
        if len(rows) < wanted and queue.on_disk > 0:  # counts drifted: trust the rows
            self.queued -= queue.on_disk
            queue.count = len(queue.window)

    @staticmethod
    def _give_back(queue: HostQueue, limit: int) -> None:
        """Keep the first ``limit`` URLs in memory; the rest are on disk already."""
        kept = sorted(queue.window)[:limit]
        queue.window = kept  # a sorted list is a heap
        queue.cursor = (kept[-1][0], kept[-1][1])


def _pop_best(window: list[QueueItem], rank: Rank) -> QueueItem:
    """The item of highest rank out of the heap, ties to the first in depth order:
    ranks are read now, so cash a queued URL got since it entered the window
    counts. O(window), and a heapify only when the pick is not the last item."""
    ranks = [rank(item[2]) for item in window]
    top = max(ranks)
    if ranks[0] == top:  # the first in depth order is among the best (all alike, often)
        return heapq.heappop(window)
    best = ranks.index(top)
    if ranks.count(top) > 1:
        best = min((i for i, r in enumerate(ranks) if r == top), key=lambda i: window[i][:2])
    item = window[best]
    last = window.pop()
    if best < len(window):
        window[best] = last
        heapq.heapify(window)
    return item


def _chunks(rows: Sequence[tuple]) -> Iterator[Sequence[tuple]]:
    for start in range(0, len(rows), CHUNK):
        yield rows[start : start + CHUNK]
