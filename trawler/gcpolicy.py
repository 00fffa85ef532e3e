"""The garbage collector's settings for a long-running crawl process.

CPython's cyclic collector runs a full collection whenever the objects that
survived into the oldest generation have grown by a quarter since the last
one. A crawl keeps ~500,000 tracked objects alive (the commit batch's records,
the hosts' queue windows, aiohttp's connections, the SimHash index) and
promotes thousands more every second that die soon after (requests waiting out
their host's delay): on the 2,000-host benchmark that meant a full collection
every second, 0.36 s each with every thread stopped, 32 s of a 100 s crawl
(bench/RESULTS.md, "Issue 11: the garbage collector"), while the collector
found 1,837 unreachable objects in the whole crawl. Young collections, which
stay cheap, are left as they are.

So, once per process before the crawl starts:

- ``gc.freeze()``: the objects made at start-up (modules, classes, the
  configuration; ~66,000) move to the permanent generation, which no
  collection walks again;
- a full collection at most every ``FULL_EVERY`` young-generation-1
  collections (CPython's default is 10): about every 100 s at the benchmark's
  pace instead of every second, so the few cycles a crawl makes are still
  freed.
"""

from __future__ import annotations

import gc

FULL_EVERY = 1000  # gen-1 collections between full collections (CPython: 10)

_tuned = False


def tune_for_crawling() -> None:
    """Freeze start-up objects and make full collections rare (idempotent)."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gen0, gen1, _ = gc.get_threshold()
    gc.collect()  # free start-up garbage before freezing what is left
    gc.freeze()
    gc.set_threshold(gen0, gen1, FULL_EVERY)
