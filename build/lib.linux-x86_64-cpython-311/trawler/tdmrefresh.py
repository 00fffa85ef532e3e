"""A revisited page's reuse reservation made current (issue 18): a page's TDMRep
statement may change between visits (a header added, a meta removed), and the
stored fields say what its latest answer said.

A 2xx revisit whose body was read again (changed) was parsed as a crawled page is:
its fields come from that page, the origin's statements added (tdmgate.py). One whose
body is the same as before (unchanged) has the same meta as before: a stored meta
statement stays; otherwise its headers' or its origin's file's applies. A 304 and a
failure say nothing new: the stored fields stay.

Both stores write them with the visit (recrawl_store.py, store/dist_revisits.py).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from trawler.records import PageRecord
from trawler.recrawl_visit import CHANGED, RevisitOutcome
from trawler.tdmrep import SOURCE_META

if TYPE_CHECKING:
    import psycopg

    from trawler.tdmgate import TdmGate

FIELDS = ("tdm_reservation", "tdm_policy", "tdm_source", "ai_robots_groups",
          "ai_robots_disallowed")  # fmt: skip
_SET = ", ".join(f"{name} = ?" for name in FIELDS)
# An unchanged body: its meta statement, stored, still holds.
_KEEP_META = f" AND tdm_source IS NOT '{SOURCE_META}'"


def refresh(outcome: RevisitOutcome, page: PageRecord | None, gate: TdmGate) -> None:
    """Set ``outcome.reservation`` (FIELDS' values) for a 2xx revisit; ``page``: the
    page parsed from a changed body, None when it was not read again."""
    result = outcome.result
    if result is None or result.status is None or not 200 <= result.status < 300:
        return
    judgement = outcome.judgement
    if page is not None and judgement is not None and judgement.verdict == CHANGED:
        gate.annotate(page)
        outcome.reservation = tuple(getattr(page, name) for name in FIELDS)
        return
    stated, groups = gate.restated(result.final_url or outcome.state.url, result.headers)
    named = None if groups is None else ",".join(groups.named)
    disallowed = None if groups is None else ",".join(groups.disallowed)
    outcome.reservation = (stated.reserved, stated.policy, stated.source, named, disallowed)
    outcome.keeps_meta = True


def store(conn: sqlite3.Connection, outcome: RevisitOutcome) -> None:
    """The embedded store's page row, in the visit's transaction."""
    if outcome.reservation is None:
        return
    where = " WHERE url = ?" + (_KEEP_META if outcome.keeps_meta else "")
    conn.execute(f"UPDATE pages SET {_SET}{where}", (*outcome.reservation, outcome.state.url))


async def astore(cur: psycopg.AsyncCursor, job_id: str, outcome: RevisitOutcome) -> None:
    """A distributed job's page row, in the visit's transaction."""
    if outcome.reservation is None:
        return
    keep = " AND tdm_source IS DISTINCT FROM %s" if outcome.keeps_meta else ""
    sql = f"UPDATE pages SET {_SET.replace('?', '%s')} WHERE job_id = %s AND url = %s{keep}"
    args = (*outcome.reservation, job_id, outcome.state.url)
    await cur.execute(sql, (*args, SOURCE_META) if outcome.keeps_meta else args)
