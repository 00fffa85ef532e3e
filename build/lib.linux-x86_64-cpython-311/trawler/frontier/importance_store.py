"""OPIC cash kept across a restart (``--priority importance``, embedded frontier).

The estimate (importance.py) lives on the event loop. Each group commit takes the
cash of the URLs credited since the last one (``mark``, on the loop, with the
batch's restart mark) and writes it in the commit's transaction (``persist``, on the
writer thread), so what is durable matches the queue that is: a resumed crawl reads
it back (``load``) and picks each host's URLs, and the hosts not visited yet, by the
cash they had, not from nothing. A URL's row goes when it is done or skipped; a URL
leased when the crawl stopped keeps the row of its last credit, and is queued with it
again. Cash credited after the last commit is lost to a kill -9, as the URLs found
after it are: an estimate, not a ledger.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterable

from trawler.frontier.importance import Importance
from trawler.store.sqlite import has_table

CASH_TABLE = "importance_cash"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {CASH_TABLE} ("
    " fp INTEGER PRIMARY KEY, host TEXT NOT NULL, cash REAL NOT NULL) WITHOUT ROWID"
)


def add_importance_cash(conn: sqlite3.Connection) -> None:
    """The table, in a data directory of a crawl started before it (idempotent)."""
    if not has_table(conn, CASH_TABLE):
        with conn:
            conn.execute(_SCHEMA)


class KeptCash:
    """The durable side of an ``Importance``: notes on the loop, writes on the writer."""

    def __init__(self, importance: Importance) -> None:
        self.importance = importance
        self._notes: deque[list[tuple[int, str, float]]] = deque()  # thread-safe appends

    def mark(self) -> None:
        """On the loop, as a batch is handed over: the cash its commit keeps."""
        changed = self.importance.take_changes()
        if changed:
            self._notes.append(changed)

    def persist(self, conn: sqlite3.Connection) -> None:
        """In the commit's transaction: the cash marked so far."""
        while self._notes:
            conn.executemany(
                f"INSERT OR REPLACE INTO {CASH_TABLE} (fp, host, cash) VALUES (?, ?, ?)",
                self._notes.popleft(),
            )

    def done(self, conn: sqlite3.Connection, fps: Iterable[int]) -> None:
        """URLs fetched or left out: their cash was shared out, or is of no use."""
        conn.executemany(f"DELETE FROM {CASH_TABLE} WHERE fp = ?", ((fp,) for fp in fps))

    def load(self, conn: sqlite3.Connection) -> int:
        """Before the queues are scheduled (resume): the kept cash; returns the rows."""
        add_importance_cash(conn)
        rows = conn.execute(f"SELECT fp, host, cash FROM {CASH_TABLE}").fetchall()
        self.importance.restore(rows)
        return len(rows)
