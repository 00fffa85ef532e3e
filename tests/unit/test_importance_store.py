"""OPIC cash kept across a restart (frontier/importance_store.py) on a real SQLite
file: what a commit writes, what a done URL drops, what a resume reads back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.unit.test_importance import req
from trawler.frontier.importance import SEED_CASH, Importance
from trawler.frontier.importance_store import CASH_TABLE, KeptCash, add_importance_cash


def rows(conn: sqlite3.Connection) -> dict[int, tuple[str, float]]:
    found = conn.execute(f"SELECT fp, host, cash FROM {CASH_TABLE}").fetchall()
    return {fp: (host, cash) for fp, host, cash in found}


def test_cash_is_written_with_a_commit_and_read_back_on_resume(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db")
    add_importance_cash(conn)
    add_importance_cash(conn)  # idempotent
    cash = Importance()
    kept = KeptCash(cash)
    seed, linked, other = (
        req("http://a.test/", 0, None),
        req("http://a.test/x"),
        req("http://b.test/y"),
    )
    cash.queued(seed)
    kept.mark()
    kept.persist(conn)
    assert rows(conn) == {seed.fp: ("a.test", SEED_CASH)}
    cash.leased(seed)
    cash.spread(seed, [linked, other], new=[linked, other])
    kept.mark()  # the seed, leased, is left as it was: done removes it
    kept.persist(conn)
    kept.done(conn, [seed.fp])
    conn.commit()
    assert rows(conn) == {linked.fp: ("a.test", 0.5), other.fp: ("b.test", 0.5)}
    kept.mark()
    kept.persist(conn)  # nothing changed: nothing written
    assert len(rows(conn)) == 2

    resumed = Importance()
    assert KeptCash(resumed).load(conn) == 2
    assert resumed.rank(linked) == 0.5 and resumed.host_rank("b.test") == 0.5
    assert resumed.risen == {"a.test", "b.test"}  # the frontier ranks the hosts by it
    assert resumed.take_changes() == []  # read back, not written again
    # The check can fail: a resume without the kept cash ranks them at nothing.
    assert Importance().rank(linked) == 0.0
