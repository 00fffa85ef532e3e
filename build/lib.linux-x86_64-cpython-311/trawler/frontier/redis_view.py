"""A read-only, blocking view of one job's shared frontier, for the API's readers.

The same keys as redis.py (see its key layout) read with a plain redis client on
a worker thread: the numbers `trawler serve --redis` shows next to what
PostgreSQL stored. On a Redis Cluster (redis_keys.py) the job's counters are
summed over its host buckets and a host is read in its own bucket; the client's
pipeline sends each shard its share. Each call is a handful of commands (one
per bucket at most), never a scan.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from redis import Redis
from redis.cluster import RedisCluster

from trawler.frontier.redis_keys import CLUSTER_BUCKETS, KeySpace, is_cluster_url


def connect_view(url: str, connect_timeout_s: float = 2, timeout_s: float = 5) -> Redis:
    """A blocking client for ``redis://`` or ``redis+cluster://`` (any one node).
    Typed as a Redis: the view uses commands both have (pipelines without MULTI)."""
    options = {"socket_connect_timeout": connect_timeout_s, "socket_timeout": timeout_s}
    if not is_cluster_url(url):
        return Redis.from_url(url, **options)
    plain = urlunsplit(("redis", urlsplit(url).netloc, "", "", ""))
    return RedisCluster.from_url(plain, **options)  # type: ignore[return-value]


class FrontierView:
    def __init__(self, client: Redis, job_id: str, prefix: str = "trawler") -> None:
        self.redis = client
        buckets = CLUSTER_BUCKETS if isinstance(client, RedisCluster) else 1
        self.keys = KeySpace(prefix, job_id, buckets)

    def queued(self) -> int:
        """URLs queued (leased ones not counted), as ``RedisFrontier.stats``."""
        return sum(int(n or 0) for n in self._per_bucket("queued", "get"))

    def active_hosts(self) -> int:
        """Hosts with URLs queued."""
        return sum(self._per_bucket("ready", "zcard"))

    def host_queued(self, hosts: list[str]) -> dict[str, int]:
        """URLs queued per host: the lists of each depth, and an older version's ZSET."""
        jps = {host: self.keys.job_prefix(self.keys.bucket_of(host)) for host in hosts}
        pipe = self.redis.pipeline(transaction=False)
        for host in hosts:
            pipe.zrange(jps[host] + f"d:{host}", 0, -1)
            pipe.zcard(jps[host] + f"q:{host}")
        found = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for host, depths in zip(hosts, found[::2], strict=True):
            for depth in depths:
                pipe.llen(jps[host] + f"l:{depth.decode()}:{host}")
        lengths = iter(pipe.execute())
        return {
            host: older + sum(next(lengths) for _ in depths)
            for host, depths, older in zip(hosts, found[::2], found[1::2], strict=True)
        }

    def host_politeness(self, hosts: list[str]) -> dict[str, tuple[float | None, float]]:
        """host -> (Crawl-delay, back-off s) the workers keep for it (shared by jobs)."""
        pipe = self.redis.pipeline(transaction=False)
        for host in hosts:
            pipe.hmget(self.keys.host_key(host), "crawl_delay", "backoff")
        found = {}
        for host, (delay, backoff) in zip(hosts, pipe.execute(), strict=True):
            found[host] = (float(delay) if delay else None, float(backoff or 0))
        return found

    def _per_bucket(self, name: str, command: str) -> list:
        """``command`` on the job's key ``name`` in each bucket."""
        pipe = self.redis.pipeline(transaction=False)
        for bucket in self.keys.all_buckets():
            getattr(pipe, command)(self.keys.job_prefix(bucket) + name)
        return pipe.execute()
