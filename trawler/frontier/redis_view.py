"""A read-only, blocking view of one job's shared frontier, for the API's readers.

The same keys as redis.py (see its key layout) read with a plain redis client on
a worker thread: the numbers `trawler serve --redis` shows next to what
PostgreSQL stored. Each call is a handful of commands, never a scan.
"""

from __future__ import annotations

from redis import Redis


class FrontierView:
    def __init__(self, client: Redis, job_id: str, prefix: str = "trawler") -> None:
        self.redis = client
        self._jp = f"{prefix}:{{{job_id}}}:"
        self._hp = f"{prefix}:host:"

    def queued(self) -> int:
        """URLs queued (leased ones not counted), as ``RedisFrontier.stats``."""
        return int(self.redis.get(self._jp + "queued") or 0)

    def active_hosts(self) -> int:
        """Hosts with URLs queued."""
        return int(self.redis.zcard(self._jp + "ready"))

    def host_queued(self, hosts: list[str]) -> dict[str, int]:
        """URLs queued per host: the lists of each depth, and an older version's ZSET."""
        pipe = self.redis.pipeline(transaction=False)
        for host in hosts:
            pipe.zrange(self._jp + f"d:{host}", 0, -1)
            pipe.zcard(self._jp + f"q:{host}")
        found = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for host, depths in zip(hosts, found[::2], strict=True):
            for depth in depths:
                pipe.llen(self._jp + f"l:{depth.decode()}:{host}")
        lengths = iter(pipe.execute())
        return {
            host: older + sum(next(lengths) for _ in depths)
            for host, depths, older in zip(hosts, found[::2], found[1::2], strict=True)
        }

    def host_politeness(self, hosts: list[str]) -> dict[str, tuple[float | None, float]]:
        """host -> (Crawl-delay, back-off s) the workers keep for it (shared by jobs)."""
        pipe = self.redis.pipeline(transaction=False)
        for host in hosts:
            pipe.hmget(self._hp + host, "crawl_delay", "backoff")
        found = {}
        for host, (delay, backoff) in zip(hosts, pipe.execute(), strict=True):
            found[host] = (float(delay) if delay else None, float(backoff or 0))
        return found
