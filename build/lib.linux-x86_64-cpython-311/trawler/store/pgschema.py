"""The distributed store's schema: its migrations and how they are applied.

``MIGRATIONS`` is an ordered, append-only list (never edit a released step,
add one); the ``schema_version`` table records what was applied. Workers
starting together serialise on a transaction-scoped advisory lock, so each
step runs once. postgres.py migrates on connect. The texts of steps 4 to 15
are in pgschema_steps.py; later ones stand here, above the list.
"""

from __future__ import annotations

import psycopg

from trawler.store.pgschema_steps import (
    APPLIED_COMMITS,
    CONTROLS,
    JOB_EVENTS,
    PAGE_TOTALS,
    PASSES,
    REVISITS,
    SCOPE_HOSTS,
    SEARCH,
    SHARED_DEDUP,
    VALIDATORS,
)
from trawler.urls import seed_hosts

# Any constant bigint: the advisory lock key that serialises migrations ("trawler").
MIGRATION_LOCK_KEY = 0x74726177_6C6572


# Reuse reservations (issue 18, tdmrep.py): a page's TDMRep statement and where it was
# read, and its host's robots.txt groups for AI crawlers, as the embedded store keeps them.
RESERVATIONS = """
ALTER TABLE pages ADD COLUMN tdm_reservation boolean;
ALTER TABLE pages ADD COLUMN tdm_policy text;
ALTER TABLE pages ADD COLUMN tdm_source text;
ALTER TABLE pages ADD COLUMN ai_robots_groups text;
ALTER TABLE pages ADD COLUMN ai_robots_disallowed text;
"""

# The link graph (issue 18; store/pg_graph.py): a row per edge, the page it is on by
# its pages.id, its place on the page, the target as text and its fingerprint (the
# index the inbound-link counts read).
GRAPH = """
CREATE TABLE links (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    from_page bigint NOT NULL,      -- pages.id of the page the link is on
    position integer NOT NULL,      -- its place among the page's edges
    to_url text NOT NULL,           -- normalised; as resolved when it does not normalise
    to_fp bigint,                   -- dedup.url_fingerprint(to_url); NULL: bad_url
    anchor text, rel text,
    reason text,                    -- NULL: admitted by the link filter; else why not
    PRIMARY KEY (job_id, from_page, position)
);
CREATE INDEX links_to ON links (job_id, to_fp, from_page);
"""

# Why each URL was fetched or left out (issue 18, provenance.py): one row a URL of
# the job, as the embedded store's provenance table (store/sqlite_provenance.py).
PROVENANCE = """
CREATE TABLE provenance (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    parent_url text, via text NOT NULL, anchor text, reason text, detail text,
    PRIMARY KEY (job_id, url)
);
"""

MIGRATIONS: tuple[str, ...] = (
    # 1: jobs, pages (the embedded `pages` columns plus job_id), counters, fetch attempts.
    """
    CREATE TABLE jobs (
        id text PRIMARY KEY,
        config jsonb NOT NULL,
        state text NOT NULL
            CHECK (state IN ('pending', 'running', 'paused', 'cancelled', 'finished')),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE pages (
        id bigserial PRIMARY KEY,
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        url text NOT NULL,
        final_url text, status integer, content_type text, content_length bigint,
        depth integer, parent_url text, title text, description text, keywords text,
        text text, links_count integer, content_sha256 text, fetched_at double precision,
        fetch_duration_s double precision, error text, warc_file text, warc_offset bigint,
        canonical text, noindex boolean NOT NULL DEFAULT false, attempts integer,
        host text, duplicate_of text, simhash text, text_hash text, sitemap_lastmod text,
        UNIQUE (job_id, url)
    );
    CREATE INDEX pages_job_order ON pages (job_id, id);  -- export in commit order
    CREATE TABLE counters (
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        name text NOT NULL,
        value bigint NOT NULL,
        PRIMARY KEY (job_id, name)
    );
    CREATE TABLE fetch_attempts (
        id bigserial PRIMARY KEY,
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        url text NOT NULL, attempt integer NOT NULL, started_at double precision,
        duration_s double precision, status integer, error text, decision text
    );
    CREATE INDEX fetch_attempts_job ON fetch_attempts (job_id);
    """,
    # 2: the MinHash sketch that confirms a near-duplicate (minhash.py); NULL in older rows.
    """
    ALTER TABLE pages ADD COLUMN minhash bytea;
    """,
    # 3: export kinds (store/kinds.py): pages say page or sitemap; a row per robots.txt
    # download, archived in the WARC like pages. Sitemaps stored before are named by
    # what only they were (there is no URL table here to ask): a 2xx answer without an
    # error that is not HTML (any other such page was stored as not_html), or of
    # unknown type and not parsed.
    """
    ALTER TABLE pages ADD COLUMN kind text NOT NULL DEFAULT 'page';
    UPDATE pages SET kind = 'sitemap'
    WHERE status BETWEEN 200 AND 299 AND error IS NULL AND duplicate_of IS NULL AND (
        content_type NOT IN ('text/html', 'application/xhtml+xml', 'unknown/unknown',
                             'application/unknown', '*/*')
        OR (content_type IS NULL
            OR content_type IN ('unknown/unknown', 'application/unknown', '*/*'))
           AND text IS NULL AND title IS NULL);
    CREATE TABLE robots_fetches (
        id bigserial PRIMARY KEY,
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        url text NOT NULL, final_url text, status integer, content_type text,
        content_length bigint, content_sha256 text, fetched_at double precision,
        fetch_duration_s double precision, error text, host text,
        warc_file text, warc_offset bigint
    );
    CREATE INDEX robots_fetches_job_order ON robots_fetches (job_id, id);
    """,
    # Each job's scope: see SCOPE_HOSTS.
    SCOPE_HOSTS,
    # 5: job states and events: see JOB_EVENTS.
    JOB_EVENTS,
    # 6: operators' blocklist and politeness: see CONTROLS.
    CONTROLS,
    # 7: the dashboard's totals and indexes: see PAGE_TOTALS.
    PAGE_TOTALS,
    # 8: revisits and page versions: see REVISITS.
    REVISITS,
    # 9: a sitemap entry's <changefreq> (issue 15), carried by the Redis frontier's
    # queue entries (frontier/redis_codec.py); NULL in rows stored before they did.
    """
    ALTER TABLE pages ADD COLUMN sitemap_changefreq text;
    """,
    # 10: on-demand revisit passes: see PASSES.
    PASSES,
    # 11: the --render decision of a page (issue 16), as the workers of a job with
    # --render record it; the column keeps the pages rows one shape on both backends.
    """
    ALTER TABLE pages ADD COLUMN rendered text;
    """,
    # 12: the crawl's validators of a job that is not continuous: see VALIDATORS.
    VALIDATORS,
    # Full-text search: see SEARCH.
    SEARCH,
    # Each writer's last commit id: see APPLIED_COMMITS.
    APPLIED_COMMITS,
    # The shared duplicate index: see SHARED_DEDUP.
    SHARED_DEDUP,
    # Reuse reservations of each page: see RESERVATIONS.
    RESERVATIONS,
    # The link graph: see GRAPH.
    GRAPH,
    # Provenance of each URL: see PROVENANCE.
    PROVENANCE,
)

SCHEMA_VERSION = len(MIGRATIONS)
SCOPE_HOSTS_VERSION = MIGRATIONS.index(SCOPE_HOSTS) + 1


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer Trawler than this one."""


async def migrate(conn: psycopg.AsyncConnection) -> int:
    """Bring the schema to ``SCHEMA_VERSION``; safe to run from many workers at once."""
    async with conn.transaction():
        # Held until this transaction ends: a second worker waits here, then
        # finds the steps applied. Taken before CREATE TABLE IF NOT EXISTS,
        # which is not safe against a concurrent identical CREATE.
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = await (await conn.execute("SELECT max(version) FROM schema_version")).fetchone()
        current = (row[0] if row else None) or 0
        if current > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"database schema is version {current}; this Trawler knows {SCHEMA_VERSION}"
            )
        for version, sql in enumerate(MIGRATIONS[current:], start=current + 1):
            await conn.execute(sql)  # no parameters: several statements are allowed
            if version == SCOPE_HOSTS_VERSION:
                await _seeds_to_scope_hosts(conn)
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
    return SCHEMA_VERSION


async def _seeds_to_scope_hosts(conn: psycopg.AsyncConnection) -> None:
    """Migration 2's data step: jobs of an older Trawler keep their seeds in the
    config; their hosts become the job's scope and the seeds leave the config
    (they are in the job's frontier already)."""
    cur = await conn.execute("SELECT id, config -> 'seeds' FROM jobs WHERE config ? 'seeds'")
    for job_id, seeds in await cur.fetchall():
        rows = [(job_id, host) for host in sorted(seed_hosts(seeds or []))]
        async with conn.cursor() as insert:
            await insert.executemany(
                "INSERT INTO job_scope_hosts VALUES (%s, %s) ON CONFLICT DO NOTHING", rows
            )
        await conn.execute("UPDATE jobs SET config = config - 'seeds' WHERE id = %s", (job_id,))
