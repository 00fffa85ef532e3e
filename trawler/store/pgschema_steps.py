"""The SQL of the distributed store's schema steps 4 to 15, each with why it is there.

Constants only: pgschema.py lists them in ``MIGRATIONS``, in order, with the steps
that came before and after, and applies them. A released step's text never changes
(a new step does what a change would); the search caps are read by the queries
(store/pg_search.py), which cut what they index as the step does.
"""

from __future__ import annotations

from trawler.outcome import NOT_HTML

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

# Idempotent commits (issue 17, store/pg_commit.py ``store_batch``): each writer (one
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
# any worker; exact copies by the stored originals' text hash. (The keys are
# simhash_index.block_keys now; a released step's text stays as it was.)
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
