"""The distributed frontier's link to the Redis server: a client that rides out
a Redis restart, and the offset between Redis ``TIME`` and this process's
monotonic clock.

Host times live in Redis as Redis time (ms), so every worker reads one clock;
a worker's ``HostSlot`` keeps monotonic seconds. ``RedisClock`` converts
between the two through an offset measured against ``TIME`` at open and
every ``CLOCK_SYNC_S``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, MasterDownError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from trawler.frontier.redis_keys import is_cluster_url

CLOCK_SYNC_S = 30.0
MAX_CONNECTIONS = 32  # per worker; tasks beyond it wait for a free connection
# Far above the slowest script call (each does bounded work: redis_codec.py's
# SCRIPT_CHUNK, tens of ms) and above Redis's own busy-reply-threshold (5 s by
# default), after which Redis answers BUSY, retried by the ServiceHealth. At
# redis-py's 5 s default, a script slower than that was cut off and sent again
# while Redis was still running it: run twice, and BUSY for everyone meanwhile.
SOCKET_TIMEOUT_S = 30.0
# A cluster client has a pool per node that raises when full instead of
# blocking: room for every task of a worker (one per request in flight).
CLUSTER_MAX_CONNECTIONS = 1024


def connect_redis(
    url: str, max_connections: int = MAX_CONNECTIONS, socket_timeout_s: float = SOCKET_TIMEOUT_S
) -> Redis:
    """A client that reconnects through a Redis restart (AOF brings the state back).

    The pool blocks when all its connections are busy: redis-py's default pool
    raises MaxConnectionsError instead, and a worker's tasks (one per request in
    flight) all call Redis at once when a wave of responses comes in. Its own
    retries only replace connections a restart broke, never a call that timed
    out (Redis may still be running it); a longer outage, a timeout and BUSY
    are the ``ServiceHealth``'s to ride out (and to log once).
    """
    retry = Retry(ExponentialBackoff(cap=0.25, base=0.05), 3)
    if is_cluster_url(url):
        return connect_cluster(url, retry, socket_timeout_s)
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=60, retry=retry,
        retry_on_error=[RedisConnectionError], socket_timeout=socket_timeout_s,
    )  # fmt: skip
    return Redis(connection_pool=pool)


def connect_cluster(url: str, retry: Retry, socket_timeout_s: float) -> Redis:
    """A Redis Cluster client from ``redis+cluster://[:password@]host:port``, any one
    node: the others are found from it. Typed as a Redis: the frontier uses the
    commands both have (scripts, single-key commands, pipelines without MULTI)."""
    parts = urlsplit(url)
    plain = urlunsplit(("redis", parts.netloc, "", "", ""))
    client = RedisCluster.from_url(
        plain, max_connections=CLUSTER_MAX_CONNECTIONS, retry=retry,
        socket_timeout=socket_timeout_s,
    )  # fmt: skip
    return cast(Redis, client)


def transient_redis_error(exc: BaseException) -> bool:
    """Worth trying again later: Redis unreachable, restarting, slow, or BUSY.

    BUSY means another client's script is running long; Redis did not run our
    command, so any command may be sent again. BusyLoadingError (Redis reading
    its AOF after a restart) is a ConnectionError.
    """
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return True
    # a cluster whose shard is down or failing over, or a slot moving
    if isinstance(exc, ClusterDownError | TryAgainError | MasterDownError):
        return True
    if _torn_connection(exc):
        return True
    message = str(exc)  # in a pipeline: "Command # 1 (...) of pipeline caused error: ('BUSY..."
    return isinstance(exc, ResponseError) and (message.startswith("BUSY") or "('BUSY " in message)


def _torn_connection(exc: BaseException) -> bool:
    """redis-py's cluster client closes a node's connections when it reads the
    cluster's layout again (a shard restarting) under the calls using them: the
    write finds no socket (an AttributeError on None, seen in a kill -9 of a shard)
    before anything is sent, so the call may be sent again."""
    if not isinstance(exc, AttributeError):
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.endswith("redis/asyncio/connection.py")


@dataclass(slots=True)
class RedisClock:
    """Redis time minus local monotonic time, as measured, and how far off it may be.

    A measurement from a round trip of ``rtt`` seconds is off by at most ``rtt / 2``
    (Redis read its clock somewhere inside the trip). Conversions lean to the late
    side of that error, so a host time handed from one worker to another through
    Redis is never reached early: under load a round trip can take tens of ms, more
    than the slack the server's log allows.
    """

    offset_s: float = 0.0
    error_s: float = 0.0  # the offset's bound: half the round trip it came from
    synced_at: float = -math.inf  # monotonic time of the last measurement

    def stale(self, now: float) -> bool:
        """True when the offset is due to be measured again (clocks drift)."""
        return now - self.synced_at >= CLOCK_SYNC_S

    async def measure(self, redis: Redis) -> None:
        """The offset from the best of 3 round trips (the shortest bounds the error)."""
        best_rtt = math.inf
        for _ in range(3):
            sent = time.monotonic()
            seconds, micros = await redis.time()
            received = time.monotonic()
            if received - sent < best_rtt:
                best_rtt = received - sent
                self.offset_s = seconds + micros / 1e6 - (sent + received) / 2
        self.error_s = best_rtt / 2
        self.synced_at = time.monotonic()

    def to_local(self, redis_ms: float) -> float:
        """A Redis time (ms) as the latest local monotonic time it may be; 0 stays 0."""
        return redis_ms / 1000 - self.offset_s + self.error_s if redis_ms else 0.0

    def to_redis(self, monotonic_s: float) -> int:
        """The latest Redis time (ms, rounded up) a local time may be: a host is never
        let go early."""
        if not monotonic_s:
            return 0
        return math.ceil((monotonic_s + self.offset_s + self.error_s) * 1000)
