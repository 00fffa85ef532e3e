"""What the embedded frontier keeps across a restart besides its URLs: each host's
politeness state (tables ``hosts`` and ``frontier_state``) and the robots.txt
fetches (table ``robots``), so that a resumed crawl neither contacts a host
before its interval has passed nor fetches robots.txt again within 24 hours;
and what ``--render auto`` learnt of each host (table ``render_hosts``), so a
resumed crawl does not render again a host it had stopped rendering.

Cheap: the event loop notes a row (a tuple appended to a deque, which is
thread-safe) whenever a host's state changes, and the writer thread writes the
rows of the interval in each group commit's transaction. No request waits for a
write. Times are stored as wall-clock times: monotonic ones end with the process.

Exact after kill -9: a request sent after the last commit has no durable trace,
and writing one before every request would cost an fsync each. What we do know
is that such a request left before the restart, and that a host's next-allowed
time only ever grows. So when the previous run did not stop cleanly (the
``run`` state is still ``running``), every host it could have contacted whose
kept next-allowed time has passed is treated as if a request had left at the
restart: it waits one full interval (Crawl-delay and back-off included). A host
whose kept next-allowed time is still ahead sent nothing unrecorded (it could
not have), and keeps that time. After a clean stop, the close wrote every
host's state: it is kept as it is, with no extra wait.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from collections.abc import Callable, Iterable

from trawler.politeness import HostSlot, PolitenessPolicy
from trawler.records import RobotsFetch
from trawler.robotscache import CACHE_TTL_S

_HOST_COLUMNS = (
    "host, last_sent_at, next_allowed_at, crawl_delay_s, backoff_s, failures, paused_until"
)
_ROBOTS_COLUMNS = "site, profile, status, error, body, fetched_at, failures"


class RestartState:
    """Notes host and robots.txt state on the loop; loads and writes it on the writer thread."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._wall_offset_s = time.time() - clock()  # wall = monotonic + offset
        self._hosts: deque[tuple] = deque()
        self._robots: deque[tuple] = deque()
        self._kept_robots: dict[tuple[str, str], RobotsFetch] = {}
        self.render_misses: dict[str, int] = {}  # host -> renders in a row adding nothing
        self._render: deque[tuple[str, int]] = deque()

    # -- event loop ----------------------------------------------------------------
    def note_host(self, slot: HostSlot) -> None:
        wall = self._wall_offset_s
        last_sent = None if slot.last_sent_at is None else slot.last_sent_at + wall
        health = slot.health
        self._hosts.append((slot.host, last_sent, slot.next_allowed_at + wall, slot.crawl_delay_s,
                            health.backoff_s, health.consecutive_failures,
                            health.paused_until + wall))  # fmt: skip

    def note_robots(self, site: str, profile: str, fetch: RobotsFetch) -> None:
        self._robots.append((site, profile, fetch.status, fetch.error, fetch.body,
                             fetch.fetched_at, fetch.failures))  # fmt: skip

    def count_render_miss(self, host: str, added: bool) -> int:
        """The host's renders in a row that added nothing, kept with the next commit."""
        misses = 0 if added else self.render_misses.get(host, 0) + 1
        self.render_misses[host] = misses
        self._render.append((host, misses))
        return misses

    def mark(self) -> tuple[int, int]:
        """How many rows are noted now: a commit handed over at this moment writes these
        and no later ones. A robots.txt fetched while that commit is written has its WARC
        record in the next batch; kept by this commit, a kill between the two would leave
        a fetch that is never made again and never archived."""
        return len(self._hosts), len(self._robots)

    def take_robots(self, site: str, profile: str) -> RobotsFetch | None:
        """A robots.txt kept by an earlier run; handed out once (the gate keeps it then)."""
        return self._kept_robots.pop((site, profile), None)

    def drop_robots(self) -> None:
        """Hand out no robots.txt of an earlier run: each is fetched again."""
        self._kept_robots.clear()

    # -- writer thread ---------------------------------------------------------------
    def persist(self, conn: sqlite3.Connection, upto: tuple[int, int] | None = None) -> None:
        """Write the rows noted since the last call, or those up to ``upto`` (a ``mark()``),
        inside the caller's transaction."""
        hosts, robots = upto if upto is not None else (len(self._hosts), len(self._robots))
        conn.executemany(
            f"INSERT OR REPLACE INTO hosts ({_HOST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            _drain(self._hosts, 1, hosts).values(),
        )
        conn.executemany(
            f"INSERT OR REPLACE INTO robots ({_ROBOTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            _drain(self._robots, 2, robots).values(),
        )
        # Not tied to a batch (no WARC record goes with it): all noted so far.
        conn.executemany(
            "INSERT OR REPLACE INTO render_hosts (host, misses) VALUES (?, ?)",
            _drain(self._render, 1, len(self._render)).values(),
        )

    def persist_stopped(self, conn: sqlite3.Connection) -> None:
        """The crawl stopped with no request in flight: every host's state is written."""
        with conn:
            self.persist(conn)
            _set_run_state(conn, "stopped")

    def load(
        self,
        conn: sqlite3.Connection,
        slot: Callable[[str], HostSlot],
        policy: PolitenessPolicy,
        queued_hosts: Iterable[str],
    ) -> None:
        """Restore hosts and robots.txt; mark the run as running (durably) before any request."""
        row = conn.execute("SELECT value FROM frontier_state WHERE name = 'run'").fetchone()
        had_urls = conn.execute("SELECT 1 FROM urls LIMIT 1").fetchone() is not None
        # No state at all but URLs: a data directory of an older version, state unknown.
        clean = row[0] == "stopped" if row is not None else not had_urls
        restored = self._load_hosts(conn, slot)
        if not clean:
            now = self.clock()
            for host in restored.union(queued_hosts):
                if slot(host).next_allowed_at <= now:
                    policy.after_request(slot(host), now)  # as if a request left right now
        self._load_robots(conn)
        self.render_misses.update(conn.execute("SELECT host, misses FROM render_hosts"))
        with conn:
            _set_run_state(conn, "running")

    def _load_hosts(self, conn: sqlite3.Connection, slot: Callable[[str], HostSlot]) -> set[str]:
        wall = self._wall_offset_s
        hosts = set()
        for host, last_sent, next_allowed, crawl_delay, backoff, failures, paused in conn.execute(
            f"SELECT {_HOST_COLUMNS} FROM hosts"
        ):
            state = slot(host)
            state.last_sent_at = None if last_sent is None else last_sent - wall
            state.next_allowed_at = next_allowed - wall
            state.crawl_delay_s = crawl_delay
            state.health.backoff_s, state.health.consecutive_failures = backoff, failures
            state.health.paused_until = paused - wall
            hosts.add(host)
        return hosts

    def _load_robots(self, conn: sqlite3.Connection) -> None:
        """Fetches younger than the cache lifetime (robotscache.py decides the rest)."""
        rows = conn.execute(
            f"SELECT {_ROBOTS_COLUMNS} FROM robots WHERE fetched_at > ?",
            (time.time() - CACHE_TTL_S,),
        )
        for site, profile, *fetch in rows:
            self._kept_robots[site, profile] = RobotsFetch(*fetch)


def _drain(rows: deque[tuple], key_columns: int, count: int) -> dict[tuple, tuple]:
    """Pop the first ``count`` rows the loop noted (only this thread pops, so they are
    there); the last row of each key (its first columns) wins."""
    latest: dict[tuple, tuple] = {}
    for _ in range(count):
        row = rows.popleft()
        latest[row[:key_columns]] = row
    return latest


def _set_run_state(conn: sqlite3.Connection, state: str) -> None:
    conn.execute("INSERT OR REPLACE INTO frontier_state (name, value) VALUES ('run', ?)", (state,))
