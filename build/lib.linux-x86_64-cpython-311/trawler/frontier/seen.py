"""The embedded frontier's URL-seen set: exact, about 8 bytes of RAM a URL.

A Python ``set[int]`` costs ~70 bytes a fingerprint (10 M URLs: 700 MB). Here
the bulk is one sorted numpy array of 64-bit fingerprints (8 bytes each),
searched a batch at a time; only recent fingerprints sit in small Python sets.
It is exact in the sense dedup.py defines: two URLs are the same when their
64-bit fingerprints are, so no filter false positive can lose a page.

Three parts, so that the array can be saved and trusted after a restart:
- ``_main``: fingerprints of rows committed to the ``urls`` table with a
  ``seq`` up to ``watermark`` (sorted array);
- ``_committed``: committed since the last merge into ``_main``;
- ``_pending``: marked seen by ``filter_new`` and not committed yet (they may
  never be: a crash, a URL over its host's budget). They are never saved: a
  saved one that was never committed would hide its URL for good. When they
  pile up (URLs over their host's budget are never committed) they move to a
  second sorted array, ``_volatile``, kept for this run only.

Saved at a clean stop (``snapshot.py``); a resume reads the file and only the
rows committed after it, so it does not scale with the URLs seen before.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

# Merge the recent sets into the array when they pass this share of it: a merge
# copies the array, so merging at a fixed share keeps the copying per URL constant.
MERGE_SHARE = 16
MERGE_MIN = 1 << 14
# Fewer keys than this (a page's links) are searched as they come: sorting them
# costs more than the ordered search saves.
SORT_MIN = 256


class SeenSet:
    def __init__(self) -> None:
        self._main = np.empty(0, dtype=np.int64)
        self._committed: set[int] = set()
        self._pending: set[int] = set()
        self._volatile = np.empty(0, dtype=np.int64)  # pending ones moved out of the set
        self.watermark = 0  # every committed row with seq <= watermark is in _main
        self._seq = 0  # the highest seq committed so far
        self.view: tuple[np.ndarray, int] = (self._main, 0)  # (array, watermark), consistent
        self.saved_watermark = -1  # of the array saved last (-1: none valid)
        self.saved_count = 0

    def __len__(self) -> int:
        return len(self._main) + len(self._committed) + len(self._pending) + len(self._volatile)

    def __contains__(self, fp: int) -> bool:
        return not self.mark_new([fp], mark=False)[0]

    def mark_new(self, fps: Sequence[int], *, mark: bool = True) -> list[bool]:
        """For each fingerprint: True when it was not seen; all are seen afterwards."""
        keys = np.fromiter(fps, dtype=np.int64, count=len(fps))
        in_arrays = _found(self._main, keys)
        if len(self._volatile):
            in_arrays |= _found(self._volatile, keys)
        pending, committed = self._pending, self._committed
        fresh = []
        for fp, old in zip(fps, in_arrays.tolist(), strict=True):
            new = not old and fp not in pending and fp not in committed
            if new and mark:
                pending.add(fp)
            fresh.append(new)
        if len(pending) > max(MERGE_MIN, len(self._main) // MERGE_SHARE):
            self._volatile = _merged(self._volatile, pending)
            self._pending = set()
        return fresh

    def committed(self, fps: Iterable[int], seq: int) -> None:
        """These fingerprints are in the database now, all rows up to ``seq`` too."""
        pending, committed = self._pending, self._committed
        for fp in fps:
            pending.discard(fp)
            committed.add(fp)
        self._seq = max(seq, self._seq)
        if len(committed) > max(MERGE_MIN, len(self._main) // MERGE_SHARE):
            self.merge()

    def merge(self) -> None:
        """Fold the committed set into the sorted array."""
        if self._committed:
            self._main = _merged(self._main, self._committed)
            self._committed = set()
            if len(self._volatile):  # those committed since are in _main now
                self._volatile = self._volatile[~_found(self._main, self._volatile)]
        self.watermark = max(self.watermark, self._seq)
        # One assignment: the writer thread saves it while the loop goes on.
        self.view = (self._main, self.watermark)

    def load(self, main: np.ndarray, watermark: int, since: np.ndarray) -> None:
        """A saved array (sorted, unique) plus the fingerprints committed after it."""
        if len(since):
            main = np.unique(np.concatenate([main, since]))
        self._main, self.watermark, self._seq = main, watermark, watermark
        self.view = (main, watermark)

    def saved(self) -> tuple[np.ndarray, int]:
        """The committed part, merged: what a snapshot may keep (loop idle)."""
        self.merge()
        return self.view

    @property
    def ram_bytes(self) -> int:
        """An estimate: 8 bytes per array entry, ~70 per entry of a Python set."""
        arrays = self._main.nbytes + self._volatile.nbytes
        return arrays + 70 * (len(self._committed) + len(self._pending))


def _found(array: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which ``keys`` the sorted ``array`` holds.

    The keys are searched in sorted order: NumPy's binary search then starts each
    from the previous one's place, and the array's pages are visited in order
    (0.9 against 1.4 µs a key in an array of 10 M)."""
    if not len(array):
        return np.zeros(len(keys), dtype=bool)
    # ndarray methods, not np.searchsorted(): those add a Python-level dispatch per call.
    # A key past the last entry is compared with the last one (clip): not found.
    if len(keys) < SORT_MIN:
        return array.take(array.searchsorted(keys), mode="clip") == keys
    order = keys.argsort()
    ordered = keys[order]
    found = np.empty(len(keys), dtype=bool)
    found[order] = array.take(array.searchsorted(ordered), mode="clip") == ordered
    return found


def _merged(main: np.ndarray, extra: set[int]) -> np.ndarray:
    new = np.fromiter(extra, dtype=np.int64, count=len(extra))
    new.sort()
    new = new[~_found(main, new)]  # a URL handed back or retried is committed again
    return np.insert(main, np.searchsorted(main, new), new)


# -- the saved array ------------------------------------------------------------------
# A file beside the database, named in ``frontier_state`` (name 'seen': "file watermark
# count") in the same transaction that makes its rows durable. A new file is written,
# fsynced and renamed before the row names it; a kill in between leaves the row naming
# the old file, which still holds. Rows never change their fingerprint, so a file stays
# true for the rows up to its watermark however long ago it was written.
SAVE_EVERY = 1 << 20  # save when this many (or an eighth more) URLs were committed since


def load_seen(conn: sqlite3.Connection, seen: SeenSet) -> int:
    """Read the saved array and the rows committed after it; returns the rows read."""
    main, watermark = np.empty(0, dtype=np.int64), 0
    saved = _saved_row(conn)
    if saved is not None:
        path, watermark, count = saved
        try:
            main = np.fromfile(path, dtype=np.int64)
        except OSError:
            main = np.empty(0, dtype=np.int64)
        if len(main) != count:  # missing or cut short: read every row instead
            main, watermark = np.empty(0, dtype=np.int64), 0
    rows = conn.execute("SELECT fp FROM urls WHERE seq > ?", (watermark,))
    parts = []
    while chunk := rows.fetchmany(1 << 16):
        parts.append(np.fromiter((fp for (fp,) in chunk), dtype=np.int64, count=len(chunk)))
    since = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    seen.load(main, watermark, since)
    seen.saved_watermark = watermark if len(since) == 0 else -1
    seen.saved_count = len(main)
    return len(since)


def save_seen(conn: sqlite3.Connection, seen: SeenSet, *, force: bool = False) -> None:
    """Save the committed array when enough was added since the last save (inside
    the caller's transaction)."""
    main, watermark = seen.view
    if watermark == seen.saved_watermark:
        return
    if not force and len(main) - seen.saved_count < max(SAVE_EVERY, seen.saved_count // 8):
        return
    directory = Path(conn.execute("PRAGMA database_list").fetchone()[2]).parent
    path = directory / f"seen-{watermark}.fp"
    with path.open("wb") as stream:
        main.tofile(stream)
        stream.flush()
        os.fsync(stream.fileno())
    old = _saved_row(conn)
    conn.execute(
        "INSERT OR REPLACE INTO frontier_state (name, value) VALUES ('seen', ?)",
        (f"{path.name} {watermark} {len(main)}",),
    )
    seen.saved_watermark, seen.saved_count = watermark, len(main)
    remove_stale(conn, keep=path if old is None else old[0], also=path)


def remove_stale(
    conn: sqlite3.Connection, keep: Path | None = None, also: Path | None = None
) -> None:
    """Delete saved arrays the committed row does not name (``keep``: the one it names
    until the caller's transaction commits; ``also``: the one that transaction names)."""
    if keep is None:
        saved = _saved_row(conn)
        keep = saved[0] if saved is not None else None
    directory = Path(conn.execute("PRAGMA database_list").fetchone()[2]).parent
    for stale in directory.glob("seen-*.fp"):
        if stale not in (keep, also):
            stale.unlink(missing_ok=True)


def _saved_row(conn: sqlite3.Connection) -> tuple[Path, int, int] | None:
    row = conn.execute("SELECT value FROM frontier_state WHERE name = 'seen'").fetchone()
    if row is None:
        return None
    name, watermark, count = row[0].split()
    directory = Path(conn.execute("PRAGMA database_list").fetchone()[2]).parent
    return directory / name, int(watermark), int(count)
