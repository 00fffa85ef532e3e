"""Where the distributed frontier's keys live: one Redis, or a Redis Cluster.

Every scheduling step is one Lua script (redis_scripts.py), and a script on a
Redis Cluster may touch the keys of one hash slot only. The scripts build their
keys from two prefixes, the job's ``jp`` and the hosts' ``hp``; this module
chooses them.

On one Redis (``redis://``) there is one bucket and the layout is redis.py's:
``trawler:{job}:…`` and ``trawler:host:<host>``.

On a Redis Cluster (``redis+cluster://host:port``) hosts are split into
``CLUSTER_BUCKETS`` buckets by a hash of the host name, and each bucket has a
hash tag of its own, shared by every job: ``trawler:{<tag>}:<job>:…`` for the
job's keys of that bucket (its ready ZSET, the queues, leases, holds and seen
set of its hosts) and ``trawler:{<tag>}:host:<host>`` for the hosts' shared
politeness state. So a script touches one slot, a host's state stays with its
queues on one shard, and there is no global key on the hot path: a worker
polls the buckets in turn (redis_sweep.py). The tags are chosen so that their slots
spread evenly over 0..16383, whatever contiguous split of the slots the
cluster's masters own (``redis-cli --cluster create`` gives equal ranges).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cache
from urllib.parse import urlsplit

CLUSTER_SCHEME = "redis+cluster"
CLUSTER_BUCKETS = 16  # per job; each a slot, spread over the masters


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme == CLUSTER_SCHEME


@cache
def bucket_tag(bucket: int, buckets: int) -> str:
    """A hash tag whose slot falls in the bucket's share of the slot space."""
    from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot  # the CLI imports this module

    span = REDIS_CLUSTER_HASH_SLOTS / buckets
    low, high = int(bucket * span), int((bucket + 1) * span)
    for n in range(1_000_000):
        tag = f"b{bucket}.{n}"
        if low <= key_slot(tag.encode()) < high:
            return tag
    raise AssertionError("unreachable: a slot range of any size is hit within a few tries")


@dataclass(slots=True, frozen=True)
class KeySpace:
    """The key prefixes of one job: ``buckets`` 1 is the single-Redis layout."""

    prefix: str
    job_id: str
    buckets: int = 1

    def bucket_of(self, host: str) -> int:
        if self.buckets == 1:
            return 0
        return zlib.crc32(host.encode()) % self.buckets

    def job_prefix(self, bucket: int = 0) -> str:
        if self.buckets == 1:
            return f"{self.prefix}:{{{self.job_id}}}:"
        return f"{self.prefix}:{{{bucket_tag(bucket, self.buckets)}}}:{self.job_id}:"

    def host_prefix(self, bucket: int = 0) -> str:
        if self.buckets == 1:
            return f"{self.prefix}:host:"
        return f"{self.prefix}:{{{bucket_tag(bucket, self.buckets)}}}:host:"

    def job_wide_prefix(self) -> str:
        """The job's own hash tag, a slot of its own on a cluster: keys that speak for
        the whole job off the hot path (--max-pages, the revisit feeder's turn). On one
        Redis it is bucket 0's prefix."""
        return f"{self.prefix}:{{{self.job_id}}}:"

    def host_key(self, host: str) -> str:
        return self.host_prefix(self.bucket_of(host)) + host

    def all_buckets(self) -> range:
        return range(self.buckets)
