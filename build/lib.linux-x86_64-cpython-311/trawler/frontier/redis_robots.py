"""robots.txt fetches shared between workers through Redis (RFC 9309 §2.4: a
robots.txt may be cached, here up to the TTL the robots gate chooses).

Each fetch is a hash (``ROBOTS_FIELDS``) with that TTL. An answer is shared
by every job whose fetcher has the same profile (headers, reach), under
``<prefix>:robots:<profile>:<origin>``; a fetch that failed stays in its own
job, under ``<prefix>:{job}:robots:<profile>:<origin>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from trawler.frontier.redis_codec import ms
from trawler.outage import ServiceHealth, guarded
from trawler.records import RobotsFetch

ROBOTS_FIELDS = ("status", "error", "body", "fetched_at", "failures")


class SharedRobots:
    """One job's view of the robots.txt fetches kept in Redis.

    ``shared_prefix`` is the prefix of keys common to all jobs, ``job_prefix``
    that of the job's own keys; ``health`` as for the frontier (outage.py).
    """

    def __init__(
        self, client: Redis, shared_prefix: str, job_prefix: str, health: ServiceHealth | None
    ) -> None:
        self.redis = client
        self.shared_prefix = shared_prefix
        self.job_prefix = job_prefix
        self.health = health

    async def get(self, site: str, profile: str) -> RobotsFetch | None:
        """The fetch another worker kept for ``site``, while it is fresh."""

        async def read() -> list[list[bytes | None]]:
            async with self.redis.pipeline(transaction=False) as pipe:
                for job_only in (False, True):
                    pipe.hmget(self.key(site, profile, job_only), *ROBOTS_FIELDS)
                return cast(list[list[bytes | None]], await pipe.execute())

        kept = (decode_robots(values) for values in await guarded(self.health, read))
        return next((fetch for fetch in kept if fetch is not None), None)

    async def put(
        self, site: str, profile: str, fetch: RobotsFetch, ttl_s: float, *, job_only: bool
    ) -> None:
        key = self.key(site, profile, job_only)

        async def write() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=encode_robots(fetch))
                pipe.pexpire(key, max(1, ms(ttl_s)))
                await pipe.execute()

        await guarded(self.health, write)

    def key(self, site: str, profile: str, job_only: bool) -> str:
        """Answers are shared by every job of the same fetch profile; errors stay in the job."""
        scope = self.job_prefix if job_only else self.shared_prefix
        return f"{scope}robots:{profile}:{site}"


def encode_robots(fetch: RobotsFetch) -> dict[FieldT, EncodableT]:
    """The hash fields (``ROBOTS_FIELDS``) that keep one robots.txt fetch."""
    values = ("" if fetch.status is None else fetch.status, fetch.error or "", fetch.body,
              repr(fetch.fetched_at), fetch.failures)  # fmt: skip
    return dict(zip(ROBOTS_FIELDS, values, strict=True))


def decode_robots(values: Sequence[bytes | None]) -> RobotsFetch | None:
    """The fetch kept in a hash's ``ROBOTS_FIELDS`` values; None when there is none."""
    status, error, body, fetched_at, failures = values
    if body is None:  # no such hash (expired); the client has no decode_responses: bytes
        return None
    return RobotsFetch(
        int(status) if status else None, error.decode() if error else None, body,
        float(fetched_at or 0), int(failures or 0),
    )  # fmt: skip
