"""WAL checkpoints off the commit path.

SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
1,000 pages: the committing thread copies every page of the WAL into the
database file and fsyncs it before the commit returns. A frontier commit
dirties about one B-tree leaf per host it adds URLs to (10,000 pages at 10,000
hosts), so at scale every commit paid a whole checkpoint: measured on a 10 M-URL
database, 10 of the 17 µs of wall time a commit spent per new URL
(bench/RESULTS.md, issue 11).

A ``Checkpointer`` is a thread with its own connection that runs a PASSIVE
checkpoint (it never blocks the writer or a reader) after each commit, on the
other core, while the writer goes on. The writer's own automatic checkpoint
stays as a backstop at ``BACKSTOP_PAGES``, should this thread fall behind, so
the WAL stays bounded either way. A crash at any moment loses nothing: a
checkpoint only copies committed pages.

Checkpoints come at most every ``EVERY_S``, not after each commit: the commits of
that second share one, and a page they all dirty (the B-trees' upper levels, the
search index's segments, the frontier's host rows) is copied into the database
once, not four times (bench/RESULTS.md, issue 14, session 38).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("trawler")
BACKSTOP_PAGES = 16_384  # 64 MB of 4 KiB pages: the writer checkpoints itself past this
EVERY_S = 1.0  # at most one checkpoint a second (the crawl commits every 0.25 s)


class Checkpointer:
    def __init__(self, path: Path, every_s: float = EVERY_S) -> None:
        """``path``: the database file (in WAL mode) the writer commits to."""
        self.path = path
        self.every_s = every_s
        self.checkpoints = 0  # done so far (tests)
        self._wake = threading.Event()
        self._stopped = threading.Event()  # ends the pause between checkpoints
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="trawler-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: checkpoint soon (several commits may share one)."""
        self._wake.set()

    def close(self) -> None:
        """Stop the thread (before the writer closes its connection: the last
        connection to close checkpoints the rest and removes the WAL)."""
        self._stopping = True
        self._stopped.set()
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                self._checkpoint(conn)
                self._stopped.wait(self.every_s)  # commits meanwhile share the next one
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
        except sqlite3.Error as exc:  # busy or full disk: the backstop still bounds the WAL
            log.debug("background checkpoint of %s failed: %s", self.path, exc)
