"""How ``next()`` finds a URL over a Redis Cluster's host buckets.

On one Redis there is one bucket, and NEXT runs on it. On a cluster
(``redis+cluster://``, redis_keys.py) the hosts are split into buckets, each with
its hash tag, and each script call runs in one bucket: next() polls the buckets
in turn, from a different one each call, and leaves alone for a while a bucket
that had nothing ready (``_known``; this worker's own changes to a bucket forget
that). The job is done when two sweeps in a row find every bucket empty with no
URL added in between (a URL's children are added before it is acknowledged, so
work moving from one bucket to another is seen by one of the sweeps).
--max-pages reserves a place in the job's own slot before the sweep
(redis_reserve.py), and gives it back when the sweep finds no URL.

``BucketSweep`` is a part of ``RedisFrontier`` (redis.py), which builds the state
declared below; its methods are the frontier's own, not a layer in front of them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trawler.frontier.redis_keys import KeySpace
    from trawler.frontier.redis_options import RedisFrontierOptions
    from trawler.frontier.redis_reserve import ClusterBudget


class BucketSweep:
    """NEXT over the buckets, and what this worker knows of each (module doc)."""

    # Built by RedisFrontier.__init__ (redis.py).
    options: RedisFrontierOptions
    keys: KeySpace
    budget: ClusterBudget | None
    _turn: int  # the bucket next() starts from
    _known: dict[int, tuple[float, bool]]  # bucket -> nothing ready until, done
    _run: Callable[..., Awaitable[Any]]  # RedisFrontier's script runner

    async def _next_reply(self, args: list[str | int]) -> tuple[Any, str | None]:
        """NEXT's reply, and the place reserved for its URL under --max-pages on a
        cluster (redis_reserve.py; given back when no URL came of it)."""
        if self.keys.buckets == 1:
            return await self._run("NEXT", args), None
        if self.budget is None:
            return await self._sweeps(args), None
        place = await self.budget.reserve()
        if isinstance(place, list):
            return place, None
        try:
            reply = await self._sweeps(args)
        except BaseException:
            self.budget.forget(place)  # not renewed: it expires (Redis may be down)
            raise
        if reply[0] != 2:
            await self.budget.give_back(place)
            return reply, None
        return reply, place

    async def _sweeps(self, args: list[str | int]) -> Any:
        """A sweep that skips the buckets known to have nothing ready (``_known``);
        when all look done, sweeps of every bucket until two in a row find them all
        done with the same URLs added (module doc)."""
        reply, _marks = await self._sweep(args, skip_known=True)
        marks: dict[int, Any] | None = None
        while reply[0] == 0:
            reply, done_marks = await self._sweep(args, skip_known=False)
            if reply[0] != 0 or done_marks == marks:
                return reply
            marks = done_marks
        return reply

    async def _sweep(self, args: list[str | int], skip_known: bool) -> tuple[Any, dict[int, Any]]:
        """NEXT on each bucket from the next in turn: the first URL handed out, else
        the shortest wait ({1, -1}: nothing ready), else {0} with each bucket's count
        of URLs added. A bucket that had nothing ready is left alone until its wait
        ends, at most ``max_wait_s`` (this worker's own changes to it forget that)."""
        n, now = self.keys.buckets, time.monotonic()
        start, self._turn = self._turn, (self._turn + 1) % n
        waits: list[float] = []
        marks: dict[int, Any] = {}
        for bucket in ((start + i) % n for i in range(n)):
            until, done = self._known.get(bucket, (0.0, False))
            if skip_known and until > now:
                if not done:
                    waits.append(until - now)
                continue
            reply = await self._run("NEXT", args, bucket)
            if reply[0] == 2:
                return reply, {}
            wait_s = self.options.max_wait_s if reply[0] == 0 or reply[1] < 0 else reply[1] / 1000
            self._known[bucket] = (time.monotonic() + min(wait_s, self.options.max_wait_s),
                                   reply[0] == 0)  # fmt: skip
            if reply[0] == 0:
                marks[bucket] = reply[1:]
            else:
                waits.append(-1 if reply[1] < 0 else reply[1] / 1000)
        if not waits:
            return [0], marks
        ready = [w for w in waits if w >= 0]
        return [1, round(min(ready) * 1000) if ready else -1], marks

    def _changed(self, host: str) -> None:
        """This worker changed the host's bucket: look at it on the next sweep."""
        self._known.pop(self.keys.bucket_of(host), None)
