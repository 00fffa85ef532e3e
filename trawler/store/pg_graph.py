"""The link graph in PostgreSQL: the ``links`` table's writes and reads (pgschema.GRAPH).

Edges are written in the commit's transaction, after their pages: a page's id
comes back from its insert (``RETURNING``), and a page another worker stored
first (``ON CONFLICT DO NOTHING``: no row back) keeps the edges it was stored
with, so no edge is stored twice and none without its page.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import psycopg

from trawler.dedup import url_fingerprint
from trawler.graph import EDGE_COLUMNS
from trawler.records import Edge

REFERRERS_SHOWN = 10  # pages linking to a URL named in its report (as sqlite_graph)
_INSERT = (
    "INSERT INTO links (job_id, from_page, position, to_url, to_fp, anchor, rel, reason)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def edge_rows(job_id: str, page_id: int, edges: Sequence[Edge], clean: Any) -> list[tuple]:
    """Rows of one page's edges; ``clean`` makes text storable (pg_commit._clean)."""
    return [
        (job_id, page_id, position, clean(url), fp, clean(anchor), clean(rel), reason)
        for position, (url, fp, anchor, rel, reason) in enumerate(edges)
    ]


async def insert_pages(
    cur: psycopg.AsyncCursor, insert_page: str, page_rows: list[tuple], job_id: str,
    edges: Mapping[str, Sequence[Edge]], clean: Any,
) -> None:  # fmt: skip
    """The pages (``insert_page``'s rows), then the edges (by page URL) of those
    this insert stored."""
    if not edges:
        await cur.executemany(insert_page, page_rows)
        return
    await cur.executemany(insert_page + " RETURNING url, id", page_rows, returning=True)
    stored: dict[str, int] = {}
    while True:
        for url, page_id in await cur.fetchall():
            stored[url] = page_id
        if not cur.nextset():
            break
    rows = [
        row
        for url, page_id in stored.items()
        for row in edge_rows(job_id, page_id, edges.get(url, ()), clean)
    ]
    if rows:
        await cur.executemany(_INSERT, rows)


async def insert_page(
    cur: psycopg.AsyncCursor, insert_page: str, page_row: tuple, job_id: str,
    edges: Sequence[Edge], clean: Any,
) -> None:  # fmt: skip
    """One page, then its edges if this insert stored it."""
    if not edges:
        await cur.execute(insert_page, page_row)
        return
    row = await (await cur.execute(insert_page + " RETURNING id", page_row)).fetchone()
    if row is not None:
        await cur.executemany(_INSERT, edge_rows(job_id, row[0], edges, clean))


async def iter_edges(
    conn: psycopg.AsyncConnection, job_id: str, batch_rows: int = 1000
) -> AsyncGenerator[dict, None]:
    """Every edge of the job (``EDGE_COLUMNS``) in commit order, each page's in
    document order, through a server-side cursor (in the caller's transaction)."""
    cursor = conn.cursor(name=f"edges_{uuid.uuid4().hex[:8]}")
    cursor.itersize = batch_rows
    async with cursor:
        await cursor.execute(
            "SELECT p.url, l.to_url, l.anchor, l.rel, l.reason FROM links AS l"
            " JOIN pages AS p ON p.id = l.from_page"
            " WHERE l.job_id = %s ORDER BY l.from_page, l.position",
            (job_id,),
        )
        async for row in cursor:
            yield dict(zip(EDGE_COLUMNS, row, strict=True))


def inbound_report(conn: psycopg.Connection, job_id: str, url: str) -> dict:
    """A URL report's inbound links (as sqlite_graph.inbound_report)."""
    count, first = inbound(conn, job_id, url_fingerprint(url))
    return {"inbound_links": count, "linked_from": first}


def inbound(conn: psycopg.Connection, job_id: str, fp: int) -> tuple[int, list[str]]:
    """Pages linking to the URL of fingerprint ``fp``: how many, and the first
    ``REFERRERS_SHOWN`` in commit order."""
    count = conn.execute(
        "SELECT count(DISTINCT from_page) FROM links WHERE job_id = %s AND to_fp = %s",
        (job_id, fp),
    ).fetchone()
    first = conn.execute(
        "SELECT p.url FROM (SELECT DISTINCT from_page FROM links WHERE job_id = %s"
        " AND to_fp = %s ORDER BY from_page LIMIT %s) AS l"
        " JOIN pages AS p ON p.id = l.from_page ORDER BY p.id",
        (job_id, fp, REFERRERS_SHOWN),
    )
    return int(count[0]) if count else 0, [row[0] for row in first]
