"""The options of one worker's view of a job's Redis frontier (redis.py).

Apart from ``RedisFrontier`` so that its parts (redis_holds.py, redis_sweep.py,
redis_upkeep.py) name them without importing the frontier itself; importable
from redis.py as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from trawler.frontier.redis_seen import SEEN_BASE_BITS


@dataclass(slots=True, frozen=True)
class RedisFrontierOptions:
    job_id: str
    worker_id: str = ""  # default: a fresh uuid; must not contain spaces
    lease_timeout_s: float = 60.0
    max_wait_s: float = 0.5  # longest sleep in next(), so new work is noticed
    busy_retry_s: float = 0.2  # look again at a host another job is holding
    auto_renew: bool = True  # renew leases, refresh stats and clock in the background
    prefix: str = "trawler"
    seen_base_bits: int = SEEN_BASE_BITS  # tests only: buckets split from 2**bits up
    # The job's budgets, over all its workers (redis_budget.py); None: no limit.
    max_pages: int | None = None
    max_pages_per_host: int | None = None
    # Host buckets (redis_keys.py); 0: 1 on one Redis, CLUSTER_BUCKETS on a cluster.
    buckets: int = 0
