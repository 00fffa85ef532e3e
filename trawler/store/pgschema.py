"""The distributed store's schema: its migrations and how they are applied.

``MIGRATIONS`` is an ordered, append-only list (never edit a released step,
add one); the ``schema_version`` table records what was applied. Workers
starting together serialise on a transaction-scoped advisory lock, so each
step runs once. postgres.py migrates on connect.
"""

from __future__ import annotations

import psycopg

from trawler.outcome import NOT_HTML
from trawler.urls import seed_hosts

# Any constant bigint: the advisory lock key that serialises migrations ("trawler").
MIGRATION_LOCK_KEY = 0x74726177_6C6572

# Each job's scope, the hosts of its seeds; seeds leave the config (seeds.py):
# _seeds_to_scope_hosts moves those of older jobs right after this step.
SCOPE_HOSTS = """
CREATE TABLE job_scope_hosts (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    host text NOT NULL,
    PRIMARY KEY (job_id, host)
);
CREATE INDEX jobs_by_state ON jobs (state, created_at);
"""

# The job layer's states and history (jobs/model.py, jobs/postgres.py): `failed`, the
# times a job started and ended, its seeding flag, a creation order, and every change
# of state in job_events. Jobs of older versions get what can be known of them.
JOB_EVENTS = """
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (
    state IN ('pending', 'running', 'paused', 'cancelled', 'finished', 'failed'));
ALTER TABLE jobs
    ADD COLUMN seq bigserial,
    ADD COLUMN started_at timestamptz,
    ADD COLUMN finished_at timestamptz,
    ADD COLUMN seeding boolean NOT NULL DEFAULT false;
UPDATE jobs SET started_at = created_at WHERE state <> 'pending';
UPDATE jobs SET finished_at = updated_at WHERE state IN ('finished', 'cancelled');
CREATE TABLE job_events (
    id bigserial PRIMARY KEY,
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    from_state text,                -- NULL: the job's creation
    to_state text NOT NULL,
    at double precision NOT NULL,   -- Unix time, PostgreSQL's clock
    reason text NOT NULL DEFAULT ''
);
CREATE INDEX job_events_by_job ON job_events (job_id, id);
INSERT INTO job_events (job_id, from_state, to_state, at, reason)
    SELECT id, NULL, state, extract(epoch FROM created_at), 'created before job events'
    FROM jobs ORDER BY created_at;
"""

# The operators' controls every worker obeys (jobs/postgres_controls.py): the domain
# blocklist, and one row of politeness settings with a version that moves on each
# change of either, so that a worker polls one number.
CONTROLS = """
CREATE TABLE blocklist (
    domain text PRIMARY KEY,        -- blocklist.blocklist_domain's canonical form
    reason text NOT NULL DEFAULT '',
    added_at double precision NOT NULL  -- Unix time
);
CREATE TABLE operator_settings (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version bigint NOT NULL DEFAULT 0,
    delay_s double precision,       -- NULL: each job keeps its own
    max_crawl_delay_s double precision,
    concurrency integer
);
INSERT INTO operator_settings DEFAULT VALUES;
"""

_FAILED = f"error IS NOT NULL AND error <> '{NOT_HTML}'"  # postgres_read.FAILED
_GROUPED = (
    "SELECT job_id, count(*) AS pages, coalesce(sum(content_length), 0) AS bytes,"
    f" count(*) FILTER (WHERE {_FAILED}) AS failed FROM {{rows}} GROUP BY job_id ORDER BY job_id"
)
# A minute's bucket: floor(fetched_at / 60), in double precision like fetched_at (no
# cast can fail); rows without a fetch time have none, as no time window holds them.
_MINUTES = (
    "SELECT job_id, floor(fetched_at / 60) AS minute, count(*) AS pages,"
    f" count(*) FILTER (WHERE {_FAILED}) AS failed FROM {{rows}}"
    " WHERE fetched_at IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
)

# The dashboard's reads of a big job (issue 13, store/postgres_read.py). Each job's
# pages, body bytes and failed fetches, and the same by minute of fetch time (the last
# hour's numbers read 60 rows, not 360,000 at 100 pages/s), kept by a statement trigger
# in the writing transaction (one grouped upsert a statement, a COPY or a cascade
# included; the job's rows are locked until that commit, before its counters: the order
# every batch takes), counted once here for the pages stored before. The short time
# windows read an index that covers them; the errors, an index of the failed pages only.
# The trigger comes before the count: a batch still writing under an older worker is
# counted by one of them.
PAGE_TOTALS = f"""
CREATE TABLE page_totals (
    job_id text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    pages bigint NOT NULL, bytes bigint NOT NULL, failed bigint NOT NULL
);
CREATE TABLE page_minutes (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    minute double precision NOT NULL,  -- floor(fetched_at / 60)
    pages bigint NOT NULL, failed bigint NOT NULL,
    PRIMARY KEY (job_id, minute)
);
CREATE FUNCTION page_totals_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE page_totals t SET pages = t.pages - g.pages, bytes = t.bytes - g.bytes,
            failed = t.failed - g.failed
        FROM ({_GROUPED.format(rows="gone")}) g WHERE t.job_id = g.job_id;
        UPDATE page_minutes t SET pages = t.pages - g.pages, failed = t.failed - g.failed
        FROM ({_MINUTES.format(rows="gone")}) g
        WHERE t.job_id = g.job_id AND t.minute = g.minute;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO page_totals (job_id, pages, bytes, failed) {_GROUPED.format(rows="added")}
        ON CONFLICT (job_id) DO UPDATE SET pages = page_totals.pages + excluded.pages,
            bytes = page_totals.bytes + excluded.bytes,
            failed = page_totals.failed + excluded.failed;
        INSERT INTO page_minutes (job_id, minute, pages, failed) {_MINUTES.format(rows="added")}
        ON CONFLICT (job_id, minute) DO UPDATE SET pages = page_minutes.pages + excluded.pages,
            failed = page_minutes.failed + excluded.failed;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER page_totals_insert AFTER INSERT ON pages REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION page_totals_keep();
CREATE TRIGGER page_totals_delete AFTER DELETE ON pages REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION page_totals_keep();
CREATE TRIGGER page_totals_update AFTER UPDATE ON pages
    REFERENCING OLD TABLE AS gone NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION page_totals_keep();
INSERT INTO page_totals (job_id, pages, bytes, failed) {_GROUPED.format(rows="pages")};
INSERT INTO page_minutes (job_id, minute, pages, failed) {_MINUTES.format(rows="pages")};
CREATE INDEX pages_job_fetched ON pages (job_id, fetched_at)
    INCLUDE (status, error, content_length);
CREATE INDEX pages_job_failed ON pages (job_id, id) INCLUDE (error) WHERE {_FAILED};
"""

# Revisits of a continuous job (issue 15, store/pg_versions.py), the embedded tables
# (store/versions.py) keyed by job: each revisited page's state, its content versions
# (version 1: the page as the crawl stored it) and every visit (the estimator's input).
# ``claimed_until``: the page was handed to Redis's revisit lanes until then by a
# feeding worker (store/dist_revisits.py); ``depth``: the page's, for its links.
REVISITS = """
CREATE TABLE revisit_state (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    host text NOT NULL,
    final_url text NOT NULL,
    etag text, last_modified text,
    content_sha256 text, simhash text,
    version integer NOT NULL,
    version_at double precision NOT NULL,
    last_visit_at double precision NOT NULL,
    next_visit_at double precision NOT NULL,
    rate_per_s double precision NOT NULL,
    depth integer NOT NULL DEFAULT 0,
    claimed_until double precision,
    PRIMARY KEY (job_id, url)
);
CREATE INDEX revisit_due ON revisit_state (job_id, next_visit_at);
CREATE TABLE page_versions (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    version integer NOT NULL,
    fetched_at double precision NOT NULL, final_url text, status integer, content_type text,
    content_length bigint, content_sha256 text, simhash text, distance integer,
    title text, text text, etag text, last_modified text, warc_file text, warc_offset bigint,
    PRIMARY KEY (job_id, url, version)
);
CREATE TABLE visits (
    id bigserial PRIMARY KEY,
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    visited_at double precision NOT NULL,
    status integer,
    verdict text NOT NULL,
    distance integer,
    body_bytes bigint NOT NULL,
    warc_file text, warc_offset bigint
);
CREATE INDEX visits_url ON visits (job_id, url, visited_at);
"""

# On-demand revisit passes of distributed jobs (issue 15, store/pg_passes.py): a row
# while a finished or cancelled job runs one. Its pages due by ``due_at`` are the
# pass's; the job goes back to ``back_to`` once none is left.
PASSES = """
CREATE TABLE revisit_passes (
    job_id text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    due_at double precision NOT NULL,
    back_to text NOT NULL,
    revisit_min_s double precision NOT NULL,
    revisit_max_s double precision NOT NULL,
    pages integer NOT NULL
);
"""

# A page's ETag and Last-Modified as the crawl got them, for a job without revisit
# state (one not continuous): the validators its first revisit pass sends
# (pg_passes.py); a continuous job keeps them in revisit_state.
VALIDATORS = """
CREATE TABLE page_validators (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    etag text, last_modified text,
    PRIMARY KEY (job_id, url)
);
"""

# Full-text search (issue 17, store/pg_search.py): a weighted tsvector of each
# searchable page (the embedded index's rule: 2xx, no error, not noindex; NULL
# otherwise), a generated column, so it is made in the transaction that stores the
# page (and made again if the row changes), for the rows stored before too (the
# ALTER rewrites the table once), and a GIN index. Weights A, B, C: title,
# description, text (ranked 1.0, 0.5, 0.1: bm25's 10, 5, 1 of the embedded index).
# Config 'simple': no stemming and no stop words, as FTS5's unicode61 (english would
# stem "pilots" to "pilot" and drop "the": other answers than embedded's). No
# built-in config folds diacritics (unaccent is an extension we do not ask for), so
# trawler_search_fold lowers, decomposes (NFD) and drops the combining marks, as
# FTS5's remove_diacritics ("café" finds "cafe", and the other way round); queries
# are folded too. It costs ~0.13 ms a page of 2,300 characters; translate() of the
# accented Latin letters cost 1.9 ms (bench/bench_pg_search.py). normalize() needs a
# UTF8 database: in another encoding the function only lowers. The lengths are
# capped: a tsvector holds 1 MB of lexemes (more is an error, which would fail the
# page's batch), and past word 16,383 positions are not kept anyway.
_FOLD_UTF8 = "regexp_replace(normalize(lower($1), NFD), ''[\\u0300-\\u036f]'', '''', ''g'')"
SEARCH_TEXT_CHARS = 100_000  # of a page's text indexed (in SEARCH: change by a new step)
SEARCH_OTHER_CHARS = 10_000  # of its title, of its description
_WEIGHTED = (
    "setweight(to_tsvector('simple', trawler_search_fold(left(coalesce({column}, ''), {chars}))),"
    " '{weight}')"
)
SEARCH = f"""
DO $$ BEGIN
    EXECUTE 'CREATE FUNCTION trawler_search_fold(text) RETURNS text LANGUAGE sql IMMUTABLE'
        || ' PARALLEL SAFE AS $f$SELECT ' || CASE current_setting('server_encoding')
            WHEN 'UTF8' THEN '{_FOLD_UTF8}' ELSE 'lower($1)' END || '$f$';
END $$;
ALTER TABLE pages ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    CASE WHEN status BETWEEN 200 AND 299 AND error IS NULL AND NOT noindex THEN
        {_WEIGHTED.format(column="title", chars=SEARCH_OTHER_CHARS, weight="A")}
        || {_WEIGHTED.format(column="description", chars=SEARCH_OTHER_CHARS, weight="B")}
        || {_WEIGHTED.format(column="text", chars=SEARCH_TEXT_CHARS, weight="C")}
    END) STORED;
CREATE INDEX pages_search ON pages USING gin (search_vector);
"""

# Idempotent commits (issue 17, store/postgres.py ``store_batch``): each writer (one
# worker's backend of a job) records its last commit's id in the commit's own
# transaction, and a commit whose id is there already was applied: a retry after an
# unknown outcome (the connection lost during COMMIT) writes nothing again. A writer
# commits one batch at a time, so only its last id can be retried: one row a writer.
APPLIED_COMMITS = """
CREATE TABLE applied_commits (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    writer text NOT NULL,
    commit_id text NOT NULL,
    PRIMARY KEY (job_id, writer)
);
"""

# Duplicates across workers (issue 17, store/pg_dedup.py): each sketched original's
# SimHash blocks, one row a table of SimHashIndex (k+1), to find its near-copies from
# any worker; exact copies by the stored originals' text hash.
SHARED_DEDUP = """
CREATE TABLE dedup_blocks (
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    key bigint NOT NULL,            -- simhash.block_keys: table and block value
    url text NOT NULL,              -- the original's pages row
    simhash bigint NOT NULL,        -- its SimHash (signed): far ones are not read
    PRIMARY KEY (job_id, key, url)
);
CREATE INDEX pages_text_hash ON pages (job_id, text_hash) WHERE duplicate_of IS NULL;
"""


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
