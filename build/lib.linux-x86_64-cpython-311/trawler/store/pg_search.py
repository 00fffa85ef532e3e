"""Full-text search over the distributed store: PostgreSQL's tsvector, GIN and
``ts_rank_cd`` (issue 17), answering as store/search.py does over SQLite.

The index is ``pages.search_vector`` (pgschema_steps.SEARCH): a generated column, so
a page is searchable in the transaction that stores it; NULL for a page that is
not searchable (not 2xx, an error, noindex), which no query matches.

Queries take the embedded syntax (search.py's module doc): words AND-ed,
``"a phrase"``, ``-word`` / ``-"a phrase"`` excluded, ``pre*`` a prefix;
anything else literal. Each term is quoted for ``websearch_to_tsquery``, so
that ``or`` and ``-`` inside a term are words, not operators; a prefix term
is a ``to_tsquery`` lexeme with ``:*`` (websearch syntax has no prefix).
``raw=True`` takes PostgreSQL's ``to_tsquery`` syntax as is (its errors raise
``ValueError``). Terms are folded as the index is (``trawler_search_fold``).

Ranking: ``ts_rank_cd`` with the weights A (title) 1.0, B (description) 0.5,
C (text) 0.1, the embedded bm25's 10, 5, 1, and normalisation 1 (divided by
1 + log of the page's length: a long page's many hits count less, as bm25's).
Snippets are ``ts_headline``'s, 16 words around the matches, marked with
search.HIGHLIGHT_START/END and an ellipsis where the column goes on, as
SQLite's ``snippet()``; terms matched only through the folding ("cafe" for
"café") are found but not highlighted (ts_headline parses the page unfolded).
"""

from __future__ import annotations

from typing import Any

import psycopg

from trawler.store.pgschema_steps import SEARCH_OTHER_CHARS, SEARCH_TEXT_CHARS
from trawler.store.search import (
    _TERM,
    _WORD_CHAR,
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    SNIPPET_ELLIPSIS,
    SNIPPET_TOKENS,
    SearchHit,
)

_WEIGHTS = "'{0, 0.1, 0.5, 1.0}'"  # D (unused), C text, B description, A title
_RANK = f"ts_rank_cd({_WEIGHTS}, p.search_vector, QUERY, 1)"
_WEBSEARCH = "websearch_to_tsquery('simple', trawler_search_fold(%s))"
_TSQUERY = "to_tsquery('simple', trawler_search_fold(%s))"
_HEADLINE_OPTIONS = (
    f'StartSel="{HIGHLIGHT_START}", StopSel="{HIGHLIGHT_END}", MaxWords={SNIPPET_TOKENS},'
    f" MinWords={SNIPPET_TOKENS // 2}, ShortWord=0, MaxFragments=1"
)
# The page's columns a snippet may come from, in the order one is preferred; each
# capped as the index is (pgschema_steps.SEARCH).
_SNIPPET_COLUMNS = (
    f"(1, left(p.text, {SEARCH_TEXT_CHARS})), (2, left(p.description, {SEARCH_OTHER_CHARS})),"
    f" (3, left(p.title, {SEARCH_OTHER_CHARS}))"
)
# A duplicate is left out when its original, in the same job, matches the query and
# the filters ({filters} on `o`): search.py's _NOT_SHADOWED.
_NOT_SHADOWED = (
    " AND (p.duplicate_of IS NULL OR NOT EXISTS (SELECT 1 FROM pages AS o"
    " WHERE o.job_id = p.job_id AND o.url = p.duplicate_of"
    " AND o.search_vector @@ {{query}}{filters}))"
)


def to_pg_query(text: str) -> tuple[str, list[str]] | None:
    """Free text → (a tsquery expression, its parameters); None if nothing to search.

    Never raises: the syntax of search.to_fts_query, whatever the text.
    """
    words: list[str] = []  # websearch syntax: "term" and -"term", AND-ed
    prefixes: list[str] = []  # (!!)to_tsquery('term':*)
    params: list[str] = []
    included = False
    for match in _TERM.finditer(text.replace("\x00", " ")):  # PostgreSQL text holds no NUL
        negated, phrase, word = match.group(1), match.group(2), match.group(3)
        term = phrase if phrase is not None else word.rstrip("*")
        if not _WORD_CHAR.search(term):
            continue  # punctuation only: no lexeme in it
        included = included or not negated
        if word is not None and word.endswith("*"):
            lexeme = term.replace("\\", "\\\\").replace("'", "''")
            prefixes.append(("!!" if negated else "") + _TSQUERY)
            params.append(f"'{lexeme}':*")
        else:
            words.append(f'{negated}"{term}"')
    if not included:
        return None  # as embedded: a query of exclusions finds nothing
    parts = prefixes
    if words:
        parts = [_WEBSEARCH, *prefixes]
        params.insert(0, " ".join(words))
    return "(" + " && ".join(parts) + ")", params


def search(
    conn: psycopg.Connection,
    job_id: str,
    query: str,
    limit: int = 10,
    host: str | None = None,
    since: float | None = None,
    until: float | None = None,
    *,
    raw: bool = False,
) -> list[SearchHit]:
    """The best ``limit`` searchable pages of the job for ``query``, best first
    (search.search's answer, over PostgreSQL)."""
    tsquery = _tsquery(conn, query, raw)
    if tsquery is None or limit <= 0 or _unstorable(host):
        return []
    expression, params = tsquery
    where, values = _matching(expression, params, job_id, host, since, until)
    rows = conn.execute(
        f"SELECT p.id, p.url, p.title, {_RANK.replace('QUERY', expression)} AS score, p.host,"
        f" p.fetched_at {where} ORDER BY score DESC, p.id LIMIT %s",
        [*params, *values, limit],
    ).fetchall()
    snippets = _snippets(conn, expression, params, [row[0] for row in rows])
    return [
        SearchHit(url, title, snippets.get(page_id, ""), score, page_host, fetched_at)
        for page_id, url, title, score, page_host, fetched_at in rows
    ]


def count_matches(
    conn: psycopg.Connection,
    job_id: str,
    query: str,
    host: str | None = None,
    since: float | None = None,
    until: float | None = None,
    *,
    raw: bool = False,
) -> int:
    """How many pages ``search`` would list for ``query`` with no limit."""
    tsquery = _tsquery(conn, query, raw)
    if tsquery is None or _unstorable(host):
        return 0
    where, values = _matching(*tsquery, job_id, host, since, until)
    row = conn.execute(f"SELECT count(*) {where}", values).fetchone()
    return row[0] if row else 0


def _unstorable(host: str | None) -> bool:
    return host is not None and "\x00" in host  # no stored host holds a NUL: none match


def _tsquery(conn: psycopg.Connection, query: str, raw: bool) -> tuple[str, list[str]] | None:
    if not raw:
        return to_pg_query(query)
    if "\x00" in query:
        raise ValueError("invalid tsquery: a NUL character")
    try:  # probed in a savepoint: an error leaves the reader's transaction usable
        with conn.transaction():
            conn.execute(f"SELECT {_TSQUERY}", (query,))
    except psycopg.errors.SyntaxError as error:
        raise ValueError(f"invalid tsquery {query!r}: {error}") from None
    return _TSQUERY, [query]


def _matching(
    expression: str, params: list[str], job_id: str, host: str | None,
    since: float | None, until: float | None,
) -> tuple[str, list[Any]]:  # fmt: skip
    """FROM and WHERE of the pages a result list may show, and all the values
    after the query's own parameters (the rank's, in the select list)."""
    filters: list[str] = []
    values: list[Any] = []
    for sql, value in (("host = %s", host), ("fetched_at >= %s", since),
                       ("fetched_at < %s", until)):  # fmt: skip
        if value is not None:
            filters.append(f" AND {{table}}.{sql}")
            values.append(value)
    both = "".join(filters)
    shadowed = _NOT_SHADOWED.format(filters=both.format(table="o")).format(query=expression)
    sql = (
        f"FROM pages AS p WHERE p.job_id = %s AND p.search_vector @@ {expression}"
        f"{both.format(table='p')}{shadowed}"
    )
    return sql, [job_id, *params, *values, *params, *values]


def _snippets(
    conn: psycopg.Connection, expression: str, params: list[str], page_ids: list[int]
) -> dict[int, str]:
    """Each page's snippet: of its text, else description, else title, the first
    with a highlighted term (all three, when none has one: the text's)."""
    if not page_ids:
        return {}
    rows = conn.execute(
        f"SELECT p.id, c.place, c.doc, ts_headline('simple', c.doc, {expression}, %s)"
        f" FROM pages AS p, LATERAL (VALUES {_SNIPPET_COLUMNS}) AS c (place, doc)"
        " WHERE p.id = ANY(%s) AND c.doc IS NOT NULL ORDER BY p.id, c.place",
        [*params, _HEADLINE_OPTIONS, page_ids],
    ).fetchall()
    found: dict[int, str] = {}
    for page_id, _place, doc, headline in rows:  # text, description, title
        kept = found.get(page_id)
        if kept is None or (HIGHLIGHT_START not in kept and HIGHLIGHT_START in headline):
            found[page_id] = _with_ellipses(doc, headline)
    return found


def _with_ellipses(doc: str, headline: str) -> str:
    """The headline with what the column has before and after it: punctuation
    alone (ts_headline ends a fragment at a word), or an ellipsis for more words."""
    plain = headline.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_END, "")
    start = doc.find(plain) if plain.strip() else -1
    if start < 0:
        return headline  # not found as is (the column's spacing): no guess
    before, after = doc[:start].strip(), doc[start + len(plain) :].strip()
    before = SNIPPET_ELLIPSIS if _WORD_CHAR.search(before) else before
    after = SNIPPET_ELLIPSIS if _WORD_CHAR.search(after) else after
    return f"{before}{headline}{after}"
