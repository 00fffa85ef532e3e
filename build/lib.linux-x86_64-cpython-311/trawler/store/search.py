"""Full-text search over the embedded store: SQLite FTS5, ranked by BM25.

Design: ``pages_fts`` is an *external-content* FTS5 table over ``pages``
(``content='pages', content_rowid='id'``). It stores only the inverted index;
``snippet()`` reads title, description and text back from the ``pages`` row,
so page text is not stored twice. The price of external content is that the
index is not kept in step by SQLite: every row put into it must be deleted
from it with its old values before that page row changes. Pages are
insert-only, so rows are added once, in the commit transaction that stores
them (``index_pages_after``), and never touched again. No triggers: only
searchable pages are indexed (2xx, no fetch error, not noindex), and FTS5's
own ``'rebuild'`` would index every page row, so use ``rebuild_search_index``
instead.

Duplicates (``duplicate_of`` set: the same or nearly the same main text as
an earlier page, or a canonical URL elsewhere) are indexed too, so text found
only on a duplicate can be found. A result list shows a duplicate only when
its original does not match the query: a search for their common text finds
the original alone.

The tokenizer is ``unicode61 remove_diacritics 2``: case-folded, and
"café" matches "cafe" (and the other way round).

Query syntax (``to_fts_query``), free text that never raises:

- words are AND-ed: ``harbour pilot``
- ``"quoted phrase"``: the words next to each other, in order
- ``-word`` / ``-"a phrase"``: exclude pages that match it
- ``pilot*``: prefix search (pilot, pilots, pilotage)

Everything else is literal: FTS5 operators (AND, OR, NOT, NEAR, ``(``,
``:``, ``^``) typed by a user are searched as words, an unterminated quote
ends at the end of the query, and punctuation-only terms are dropped.
``raw=True`` passes FTS5 syntax through (its errors raise ``ValueError``).

Snippets mark matched terms with ``**`` on both sides (``HIGHLIGHT_START``,
``HIGHLIGHT_END``); ``split_highlights`` cuts a snippet into (text,
highlighted) pieces for a renderer (the CLI's bold, the API's ``<mark>``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

HIGHLIGHT_START = HIGHLIGHT_END = "**"
SNIPPET_ELLIPSIS = "…"
SNIPPET_TOKENS = 16
# BM25 weight of a match in each column: a title hit counts 10x a body hit.
COLUMN_WEIGHTS = {"title": 10.0, "description": 5.0, "text": 1.0}

SEARCH_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    title, description, text,
    content='pages', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
"""
# Columns the search and dedup features add to `pages` (the store's SCHEMA has the rest).
PAGE_COLUMNS_ADDED = {
    "host": "TEXT",
    "simhash": "TEXT",
    "text_hash": "TEXT",
    "duplicate_of": "TEXT",
    "minhash": "BLOB",  # MinHash sketch (minhash.py); NULL in rows stored before it
}

# A page is searchable when this holds: worth finding, and allowed to be found.
_SEARCHABLE = (
    "pages.status BETWEEN 200 AND 299 AND pages.error IS NULL"
    " AND NOT coalesce(pages.noindex, 0)"
    " AND coalesce(pages.title, pages.description, pages.text) IS NOT NULL"
)
# A duplicate is left out of a result list when its original is in it: indexed (so
# searchable), matching the query and the filters ({filters} on `original`).
_NOT_SHADOWED = (
    " AND (pages.duplicate_of IS NULL OR NOT EXISTS (SELECT 1 FROM pages AS original"
    " WHERE original.url = pages.duplicate_of{filters}"
    " AND original.id IN (SELECT rowid FROM pages_fts WHERE pages_fts MATCH ?)))"
)
_BM25 = f"bm25(pages_fts, {', '.join(str(w) for w in COLUMN_WEIGHTS.values())})"

# One query term: optional "-", then a "quoted phrase" (maybe unterminated) or a bare word.
_TERM = re.compile(r'(-?)(?:"([^"]*)"?|([^\s"]+))')
_WORD_CHAR = re.compile(r"\w")
_HIGHLIGHT = re.compile(f"{re.escape(HIGHLIGHT_START)}(.*?){re.escape(HIGHLIGHT_END)}", re.S)


class SearchIndexMissing(RuntimeError):
    """The database has no pages_fts table (made before search existed, or not a crawl)."""


@dataclass(slots=True)
class SearchHit:
    url: str
    title: str | None
    snippet: str  # matched terms between HIGHLIGHT_START and HIGHLIGHT_END
    score: float  # -bm25: higher is better; comparable within one query only
    host: str | None
    fetched_at: float | None


# -- schema and indexing (writer side) ------------------------------------------------


def ensure_search_schema(conn: sqlite3.Connection) -> None:
    """Add the columns and the FTS table if missing; idempotent.

    When the FTS table is new and pages already exist (a data directory from
    before search), they are indexed now: a one-off migration.
    """
    existing = {row[1] for row in conn.execute("PRAGMA table_info(pages)")}
    backfill = not _has_search_index(conn)
    with conn:
        for name, sql_type in PAGE_COLUMNS_ADDED.items():
            if name not in existing:
                conn.execute(f"ALTER TABLE pages ADD COLUMN {name} {sql_type}")
        conn.execute(SEARCH_SCHEMA)
        _set_automerge(conn)
        if backfill:
            index_pages_after(conn, 0)


# Segments FTS5 merges at a time (its default: 4). Each commit adds a segment, and a
# merge rewrites the terms of all it takes: at 16, a page's terms are rewritten about
# half as often, ~25 % less CPU time to index a page (issue 14: 18.4 against 13.8 µs
# a page of the benchmark's web), the same answers, and queries as fast (more
# segments to read, each searched by its own b-tree: measured on 29,400 pages).
AUTOMERGE = 16


def _set_automerge(conn: sqlite3.Connection) -> None:
    """Keep AUTOMERGE in the index's config (a setting FTS5 stores with the table)."""
    row = conn.execute("SELECT v FROM pages_fts_config WHERE k = 'automerge'").fetchone()
    if row is None or row[0] != AUTOMERGE:
        conn.execute(
            "INSERT INTO pages_fts (pages_fts, rank) VALUES ('automerge', ?)", (AUTOMERGE,)
        )


def last_page_id(conn: sqlite3.Connection) -> int:
    """The highest pages.id so far (0 for none): read it before inserting a batch."""
    return conn.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0]


def index_pages_after(conn: sqlite3.Connection, after_id: int) -> int:
    """Index the searchable pages with id > ``after_id``; return how many.

    Call inside the commit transaction, after the batch's pages are inserted
    with ``after_id = last_page_id(conn)`` read before the insert: exactly the
    rows that transaction added (a URL already stored is not inserted again,
    so it is not indexed twice).
    """
    cursor = conn.execute(
        "INSERT INTO pages_fts (rowid, title, description, text)"
        f" SELECT id, title, description, text FROM pages WHERE id > ? AND {_SEARCHABLE}",
        (after_id,),
    )
    return cursor.rowcount


def index_pages(
    conn: sqlite3.Connection, rows: Iterable[tuple[int, str | None, str | None, str | None]]
) -> None:
    """Index (pages.id, title, description, text) rows the caller has chosen as searchable.

    Each id must be indexed once only (external content: see the module doc).
    """
    conn.executemany(
        "INSERT INTO pages_fts (rowid, title, description, text) VALUES (?, ?, ?, ?)",
        [row for row in rows if any(value is not None for value in row[1:])],
    )


def rebuild_search_index(conn: sqlite3.Connection) -> int:
    """Empty the index and index every searchable page again; return how many."""
    with conn:
        conn.execute("INSERT INTO pages_fts (pages_fts) VALUES ('delete-all')")
        return index_pages_after(conn, 0)


def _has_search_index(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pages_fts'").fetchone()
    return row is not None


# -- queries (read side) -----------------------------------------------------------


def to_fts_query(text: str) -> str | None:
    """Free text → a safe FTS5 query (syntax in the module doc); None if nothing to search."""
    include: list[str] = []
    exclude: list[str] = []
    for match in _TERM.finditer(text.replace("\x00", " ")):  # FTS5 stops at a NUL
        negated, phrase, word = match.group(1), match.group(2), match.group(3)
        prefix = word is not None and word.endswith("*")
        term = phrase if phrase is not None else word.rstrip("*")
        if not _WORD_CHAR.search(term):
            continue  # punctuation only: FTS5 would find no token in it
        quoted = '"' + term.replace('"', '""') + '"' + ("*" if prefix else "")
        (exclude if negated else include).append(quoted)
    if not include:
        return None  # FTS5 has no "everything except": a query of exclusions finds nothing
    query = " ".join(include)
    if exclude:
        query = f"({query})" + "".join(f" NOT {term}" for term in exclude)
    return query


def search(
    conn: sqlite3.Connection,
    query: str,
    limit: int = 10,
    host: str | None = None,
    since: float | None = None,
    until: float | None = None,
    *,
    raw: bool = False,
) -> list[SearchHit]:
    """The best ``limit`` searchable pages for ``query``, best first.

    ``host`` matches pages.host exactly; ``since`` <= fetched_at < ``until``
    (Unix times). ``raw`` takes FTS5 query syntax as is.
    """
    if not _has_search_index(conn):
        raise SearchIndexMissing("no search index in this database (pages_fts)")
    match = _checked_raw(conn, query) if raw else to_fts_query(query)
    if not match or limit <= 0:
        return []
    ranked = _ranked(conn, match, limit, host, since, until)
    snippets = _snippets(conn, match, [rowid for rowid, *_ in ranked])
    return [
        SearchHit(url, title, snippets.get(rowid, ""), -rank, page_host, fetched_at)
        for rowid, url, title, rank, page_host, fetched_at in ranked
    ]


def _checked_raw(conn: sqlite3.Connection, query: str) -> str:
    """The raw FTS5 query, or ValueError if FTS5 rejects it (probed on no rows)."""
    try:
        conn.execute("SELECT 1 FROM pages_fts WHERE pages_fts MATCH ? AND rowid = 0", (query,))
    except sqlite3.OperationalError as error:
        raise ValueError(f"invalid FTS5 query {query!r}: {error}") from error
    return query


def _ranked(
    conn: sqlite3.Connection,
    match: str,
    limit: int,
    host: str | None,
    since: float | None,
    until: float | None,
) -> list[tuple]:
    """(rowid, url, title, bm25, host, fetched_at) of the best matches, best first."""
    where, values = _matching(match, host, since, until)
    # Snippets are not made here: SQLite would make one for every match before the LIMIT.
    return conn.execute(
        f"SELECT pages.id, pages.url, pages.title, {_BM25} AS bm25_score,"
        f" pages.host, pages.fetched_at {where} ORDER BY bm25_score LIMIT ?",
        (*values, limit),
    ).fetchall()


def _matching(
    match: str, host: str | None, since: float | None, until: float | None
) -> tuple[str, list[str | float]]:
    """FROM and WHERE of the pages a result list may show, and their values."""
    filters: list[str] = []
    values: list[str | float] = []
    for sql, value in (("host = ?", host), ("fetched_at >= ?", since), ("fetched_at < ?", until)):
        if value is not None:
            filters.append(f" AND {{table}}.{sql}")
            values.append(value)
    where = "".join(filters)
    shadowed = _NOT_SHADOWED.format(filters=where.format(table="original"))
    sql = (
        "FROM pages_fts JOIN pages ON pages.id = pages_fts.rowid"
        f" WHERE pages_fts MATCH ? AND {_SEARCHABLE}{shadowed}{where.format(table='pages')}"
    )
    return sql, [match, *values, match, *values]


def count_matches(
    conn: sqlite3.Connection,
    query: str,
    host: str | None = None,
    since: float | None = None,
    until: float | None = None,
    *,
    raw: bool = False,
) -> int:
    """How many pages ``search`` would list for ``query`` with no limit."""
    if not _has_search_index(conn):
        raise SearchIndexMissing("no search index in this database (pages_fts)")
    match = _checked_raw(conn, query) if raw else to_fts_query(query)
    if not match:
        return 0
    where, values = _matching(match, host, since, until)
    return conn.execute(f"SELECT count(*) {where}", values).fetchone()[0]


def _snippets(conn: sqlite3.Connection, match: str, rowids: list[int]) -> dict[int, str]:
    if not rowids:
        return {}
    marks = ", ".join("?" for _ in rowids)
    rows = conn.execute(
        "SELECT rowid, snippet(pages_fts, -1, ?, ?, ?, ?) FROM pages_fts"
        f" WHERE pages_fts MATCH ? AND rowid IN ({marks})",
        (HIGHLIGHT_START, HIGHLIGHT_END, SNIPPET_ELLIPSIS, SNIPPET_TOKENS, match, *rowids),
    )
    return dict(rows.fetchall())


def split_highlights(snippet: str) -> list[tuple[str, bool]]:
    """Cut a snippet into (text, highlighted) pieces, in order, empty pieces dropped."""
    pieces = []
    for i, piece in enumerate(_HIGHLIGHT.split(snippet)):
        if piece:
            pieces.append((piece, i % 2 == 1))
    return pieces
