"""What the embedded frontier keeps in the data directory, and its writer-thread side.

Durability lives in the ``urls`` table (see store/sqlite.py): every
discovered URL is a row, queued until its page is committed. Memory grows with
hosts, not URLs: each host's queue is on disk with a small window in memory
(disk_queue.py), and the seen set is a sorted array of fingerprints
(seen.py). Leases are only in memory: after a crash the queued rows are read
again, so in-flight URLs are fetched again (at-least-once fetching). A resume
reads the per-host counts and a saved seen array, no URL: its time does not
grow with the URLs queued.
Each host's politeness state and the robots.txt fetches are kept across a
restart as well (restart_state.py says how, and why that is exact after kill -9).
The ``persist_*`` methods run on the backend's writer thread inside the
commit transaction; the robots.txt and render-miss methods on the event loop.

``DurableState`` is a part of ``SqliteFrontier`` (sqlite.py), which builds the
state declared below; its methods are the frontier's own, not a layer in front of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from trawler.frontier.disk_queue import DiskQueues
from trawler.frontier.seen import SAVE_EVERY, load_seen, remove_stale, save_seen

if TYPE_CHECKING:
    import sqlite3

    from trawler.frontier.hosts import HostTable
    from trawler.frontier.importance_store import KeptCash
    from trawler.frontier.restart_state import RestartState
    from trawler.frontier.seen import SeenSet
    from trawler.politeness import HostSlot, PolitenessPolicy
    from trawler.records import CrawlRequest, RobotsFetch


class DurableState:
    """Loading, keeping and closing the frontier's state on disk (module doc)."""

    # Built by SqliteFrontier.__init__ (sqlite.py).
    policy: PolitenessPolicy
    window: int
    _hosts: HostTable
    _seen: SeenSet
    _queues: DiskQueues
    _kept: RestartState
    _kept_cash: KeptCash | None
    seen_rows_read: int  # rows load() read to rebuild the seen set
    # SqliteFrontier's slots and ready-heaps (sqlite.py), the process's host table
    # (sqlite_holds.py).
    _slot: Callable[[str], HostSlot]
    _schedule: Callable[[HostSlot], None]
    share_hosts: Callable[[HostTable], None]

    if TYPE_CHECKING:  # SqliteFrontier's property (sqlite.py): declared, not defined here

        @property
        def active_hosts(self) -> int: ...

    # -- durable side (writer thread) -------------------------------------------
    def load(self, conn: sqlite3.Connection) -> None:
        """Open the queues and the seen set on the database (start/resume); the host
        slots first, so each host is scheduled at its restored time. Reads no queued URL."""
        self._queues = DiskQueues(self.window)
        hosts = self._queues.open(conn)
        self.seen_rows_read = load_seen(conn, self._seen)
        if self.seen_rows_read >= SAVE_EVERY:
            with conn:
                save_seen(conn, self._seen, force=True)
        remove_stale(conn)
        self._kept.load(conn, self._slot, self.policy, hosts)
        if self._kept_cash is not None:  # before the hosts are ordered by it
            self._kept_cash.load(conn)
        self.share_hosts(self._hosts)  # the restored times, for the other jobs too
        for host in hosts:
            self._schedule(self._slot(host))

    def restart_mark(self) -> tuple[int, int]:
        """Taken on the loop as a batch is handed over: what its commit keeps."""
        if self._kept_cash is not None:
            self._kept_cash.mark()
        return self._kept.mark()

    def persist_hosts(self, conn: sqlite3.Connection, upto: tuple[int, int] | None = None) -> None:
        """Host politeness and robots.txt state noted since the last commit, or up to the
        batch's ``restart_mark()`` (restart_state.py), and the seen array when enough
        was added to it."""
        self._kept.persist(conn, upto)
        if self._kept_cash is not None:
            self._kept_cash.persist(conn)
        save_seen(conn, self._seen)

    def persist_stopped(self, conn: sqlite3.Connection) -> None:
        """At close: with no host busy, every request is recorded: a resume needs no extra wait."""
        if self.active_hosts == 0:
            self._kept.persist_stopped(conn)

    def persist_closing(self, conn: sqlite3.Connection) -> None:
        """At close, the loop idle: save the seen array, so the next resume reads no URL."""
        self._seen.merge()
        with conn:
            save_seen(conn, self._seen, force=True)
            if self._kept_cash is not None:  # the cash credited since the last commit
                self._kept_cash.mark()
                self._kept_cash.persist(conn)
        remove_stale(conn)
        self._queues.close()

    def persist_new(self, conn: sqlite3.Connection, requests: Sequence[CrawlRequest]) -> None:
        self._queues.persist_new(conn, requests)

    def persist_done(
        self,
        conn: sqlite3.Connection,
        done: Sequence[tuple[CrawlRequest, bool]],
        skipped: Sequence[tuple[CrawlRequest, str]],
    ) -> None:
        """Mark URLs done (or dead-lettered: retries spent) and skipped."""
        self._queues.persist_done(conn, done, skipped)
        if self._kept_cash is not None:
            self._kept_cash.done(conn, [r.fp for r, _ in done] + [r.fp for r, _ in skipped])

    # -- kept for the next run (event loop) -------------------------------------
    async def shared_robots(self, site: str, profile: str) -> RobotsFetch | None:
        """One process: only what an earlier run kept (the gate caches the rest)."""
        return self._kept.take_robots(site, profile)

    async def share_robots(
        self, site: str, profile: str, fetch: RobotsFetch, ttl_s: float, *, job_only: bool
    ) -> None:
        """Kept for the next run; the data directory holds one job, so job_only is moot."""
        self._kept.note_robots(site, profile, fetch)

    async def render_misses(self, host: str | None = None) -> dict[str, int]:
        kept = self._kept.render_misses
        hosts = kept if host is None else (host,)
        return {name: kept[name] for name in hosts if kept.get(name)}

    async def count_render_miss(self, host: str, added: bool) -> int:
        """Kept in the data directory with the next commit (restart_state.py)."""
        return self._kept.count_render_miss(host, added)

    def drop_kept_robots(self) -> None:
        self._kept.drop_robots()
