"""``--max-pages`` on a Redis Cluster: the job's page budget reserved in a slot of
its own, one step before the lease (issue 17).

On one Redis, NEXT checks the budget in the script that leases the URL
(redis_budget.py): pages stored plus URLs leased, both the job's. On a cluster a
script touches one bucket's slot, and the job's leases are spread over the
buckets. Two ways stay exact: split the budget over the buckets and move the
unspent part between them, or count the job's URLs in flight in one more key.
Splitting needs a re-balancing step whose every move is itself a two-slot
transfer, and a bucket's share runs out while another's sits unused (a job of
a few hosts, a budget of a few pages); the reservation costs one script call per
URL handed out and one per commit, and only for a job with --max-pages. So:

    trawler:{job}:budget:pages      the job's pages stored (PAGES, as on one Redis)
    trawler:{job}:budget:lease_exp  ZSET  reservation token -> expiry (ms)
    trawler:{job}:budget:clock      the lease clock of the reservations

A worker reserves a place (``RESERVE``: refused while pages stored plus places
reserved reach the budget, exactly NEXT's rule), then runs NEXT over the buckets;
the URL it gets keeps the place until its commit (after ``PAGES`` raised the
stored count: a page counts as reserved, stored or, briefly, both), its hand-back
or retry, and a sweep that finds nothing gives the place back at once. A dead
worker's places expire with its leases: renewed with them, and for as long plus
``RESERVE_MARGIN_MS``, so that a place never ends before its lease (the two are
set on different shards, a few ms apart, by clocks that may differ a little).
The lease clock (redis_prelude.PRELUDE) pushes the places back through an outage
as it does the leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

from trawler.frontier.redis_budget import BUDGET_LIB, PAGES
from trawler.frontier.redis_codec import ms
from trawler.frontier.redis_prelude import PRELUDE

if TYPE_CHECKING:
    from trawler.frontier.redis import RedisFrontier

RESERVE_MARGIN_MS = 2000
_MARGIN = f"local margin_ms = {RESERVE_MARGIN_MS}\n"

# ARGV: jp (the budget's), hp (unused), job, token, lease_ms, max_pages
# -> {0} budget spent | {1, -1} the places are all taken | {2} reserved
RESERVE = (
    PRELUDE
    + BUDGET_LIB
    + _MARGIN
    + """
local now, lease_ms = now_ms(), tonumber(ARGV[5])
lease_clock(now, lease_ms)
redis.call('ZREMRANGEBYSCORE', jp .. 'lease_exp', '-inf', n2s(now))
local spent = over_budget(tonumber(ARGV[6]))
if spent then return spent end
redis.call('ZADD', jp .. 'lease_exp', n2s(now + lease_ms + margin_ms), ARGV[4])
return {2}
"""
)

# ARGV: jp, hp, job, lease_ms, tokens... (places renewed; 0 tokens: ended)
RENEW_PLACES = (
    PRELUDE
    + _MARGIN
    + """
local now, lease_ms = now_ms(), tonumber(ARGV[4])
lease_clock(now, lease_ms)
local expires = n2s(now + lease_ms + margin_ms)
for i = 5, #ARGV do redis.call('ZADD', jp .. 'lease_exp', 'XX', expires, ARGV[i]) end
return 1
"""
)

# ARGV: jp, hp, job, tokens...
RELEASE = """
for i = 4, #ARGV do redis.call('ZREM', ARGV[1] .. 'lease_exp', ARGV[i]) end
return 1
"""


class ClusterBudget:
    """The reservations of one worker's ``RedisFrontier`` on a cluster (its companion:
    it calls Redis through the frontier's outage guard)."""

    def __init__(self, frontier: RedisFrontier, max_pages: int) -> None:
        self.frontier = frontier
        self.max_pages = max_pages
        self._jp = frontier.keys.job_wide_prefix() + "budget:"
        client = frontier.redis
        self._scripts = {name: client.register_script(text) for name, text in
                         (("RESERVE", RESERVE), ("RENEW", RENEW_PLACES),
                          ("RELEASE", RELEASE), ("PAGES", PAGES))}  # fmt: skip
        self._serial = count()
        self._tokens: dict[int, str] = {}  # fp -> its place, of the URLs leased
        self._spare: set[str] = set()  # places reserved by next() calls still sweeping

    async def reserve(self) -> str | list[int]:
        """A place for the next URL, or NEXT's reply when there is none (``[0]``: the
        budget is spent; ``[1, -1]``: wait). Each next() call reserves its own: a
        worker's tasks ask at once."""
        f = self.frontier
        token = f"{f.worker_id}:{next(self._serial)}"
        self._spare.add(token)
        reply = await self._run("RESERVE", [token, ms(f.options.lease_timeout_s), self.max_pages])
        if int(reply[0]) != 2:
            self._spare.discard(token)
            return [int(n) for n in reply]
        return token

    def bind(self, token: str, fp: int) -> None:
        """The place goes to the URL just leased with it."""
        self._spare.discard(token)
        self._tokens[fp] = token

    def forget(self, token: str) -> None:
        """A sweep that failed: the place is left to expire, never renewed."""
        self._spare.discard(token)

    async def give_back(self, token: str) -> None:
        """A sweep found nothing: the place is free for any worker again."""
        self._spare.discard(token)
        await self._run("RELEASE", [token])

    async def release(self, fps: Sequence[int]) -> None:
        """These URLs' leases ended (committed, handed back, to be retried)."""
        tokens = [t for t in (self._tokens.pop(fp, None) for fp in fps) if t is not None]
        if tokens:
            await self._run("RELEASE", tokens)

    async def record_pages(self, pages_stored: int) -> None:
        await self._run("PAGES", [pages_stored])

    async def renew(self) -> None:
        """With the leases: a place outlives its URL's lease (module doc)."""
        tokens = [*self._tokens.values(), *self._spare]
        if tokens:
            await self._run("RENEW", [ms(self.frontier.options.lease_timeout_s), *tokens])

    async def _run(self, name: str, args: Sequence[str | int]) -> Any:
        f, script = self.frontier, self._scripts[name]
        full = [self._jp, "", f.options.job_id, *args]
        return await f._call(lambda: script(keys=[self._jp + "lease_exp"], args=full))
