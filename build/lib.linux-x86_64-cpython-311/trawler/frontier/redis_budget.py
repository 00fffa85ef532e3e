"""Exact page budgets over all the workers of a job (issue 17), kept in Redis.

Where: the budgets are reserved when a URL is handed out (NEXT) and when it is
admitted (COMMIT), inside the frontier's atomic scripts, not at commit time in
PostgreSQL. Refused at commit, a page would have been fetched already: a request
the budget says not to make (the crawl tests count the web server's requests, not
only the stored rows), and its links found for nothing.

``--max-pages``: NEXT hands out a URL only while the job's pages stored plus its
URLs leased are below the budget, since each leased URL may become one page. The
pages stored (``pages``) are PostgreSQL's count in the last commit's own
transaction (page_totals), raised and never lowered (commits end out of order),
before that commit's leases end: a page counts as leased, stored or, briefly,
both (fewer URLs handed out, never more). A lease that ends without a page frees
its place; a dead worker's expire. Budget spent: NEXT says done; while the URLs
in flight may still spend it, the worker waits.

``--max-pages-per-host``: COMMIT admits a new URL only while its host has fewer
than the budget admitted (HASH ``admitted``), in the script that adds it to the
seen set: two workers finding one host's links at once admit the budget between
them. A refused URL is marked seen, as the embedded frontier's seen set does
(frontier/seen.py): the budget is never given back, so it would be refused again.
The COMMIT that marks it counts it (``host_budget_refused``), so each URL counts
once, over all workers and whatever retries; the worker raises the job's
``rejected.host_budget`` counter in PostgreSQL to that total after its commit
(``GREATEST``: raises in any order agree; a worker killed between its COMMIT and
its raise leaves the counter short until the job's next refusal raises it). Here
the workers' link filters do not refuse (the backend's ``host_url_counts`` is
None): this count is the only one.
"""

BUDGET_LIB = """
-- {0}: the job's page budget is spent; {1, -1}: the URLs in flight may spend it; else nil
local function over_budget(max_pages)
  if max_pages <= 0 then return nil end
  local stored = tonumber(redis.call('GET', jp .. 'pages') or 0)
  if stored >= max_pages then return {0} end
  if stored + redis.call('ZCARD', jp .. 'lease_exp') >= max_pages then return {1, -1} end
  return nil
end
local function host_has_room(host, max_per_host)
  return max_per_host <= 0
    or tonumber(redis.call('HGET', jp .. 'admitted', host) or 0) < max_per_host
end
local function host_admit(host, max_per_host)
  if max_per_host > 0 then redis.call('HINCRBY', jp .. 'admitted', host, 1) end
end
"""

# ARGV: jp, hp, job, the job's pages stored (as a commit's transaction counted them)
PAGES = """
local jp, stored = ARGV[1], tonumber(ARGV[4])
if stored > tonumber(redis.call('GET', jp .. 'pages') or 0) then
  redis.call('SET', jp .. 'pages', ARGV[4])
end
return 1
"""
