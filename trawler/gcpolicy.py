"""The interpreter's settings for a long-running crawl process: the garbage
collector, and how long a thread may keep the GIL from the event loop.

CPython's cyclic collector runs a full collection whenever the objects that
survived into the oldest generation have grown by a quarter since the last
one. A crawl keeps ~500,000 tracked objects alive (the commit batch's records,
the hosts' queue windows, the HTTP connections, the SimHash index) and
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
- a full collection at most every ``FULL_EVERY`` middle-generation
  collections (CPython's default is 10): about every 100 s at the benchmark's
  pace instead of every second, so the few cycles a crawl makes are still
  freed (1,000 of them while young collections came every 700 objects; 20 at
  ``YOUNG_EVERY``'s ~2 young collections a second at 1,800 pages/s);
- a young collection once ``YOUNG_EVERY`` more tracked objects are alive than
  at the last one (CPython: 700): a young collection walks every young object,
  and a crawl's live young objects are mostly its batch and pages in flight,
  which outlive many collections. In the crawl process (bench/bench_engine.py,
  150 hosts) that was 310 young collections and 28 of the middle generation,
  ~0.25 s per 7,425 pages (~30 µs a page); at 10,000: 6-8 young ones, ~0.03-0.1 s,
  the same peak RSS (114-116 MB). On the 2,000-host benchmark a young collection
  cost ~7 ms at 10,000 as at 50,000 (the young objects are mostly a few big
  containers, walked item by item each time), 6.0 s of the crawl process's CPU
  in all; at 100,000, 0.85 s, the same peak RSS (bench/RESULTS.md, session 33).
  A cycle that dies young waits for at most that many new objects (~0.3 s of a
  crawl at that pace); one that outlived a young collection waits for a middle
  one, ten young ones later, or longer. So what a crawl makes by the thousand
  must not die in cycles: closed HTTP connections did (their parser holds their
  callbacks), and on the 20,000-host benchmark 64,000 of them, ~150 MB, waited
  for the collector until http1.py cut the cycle (bench/RESULTS.md, session 34);
- ``sys.setswitchinterval(SWITCH_INTERVAL_S)``: the GIL convoy. The event
  loop gives up the GIL at every system call (send, recv, epoll: several a
  page), and the writer thread, busy in Python during a commit, then keeps it
  for up to the switch interval (CPython: 5 ms) before the loop gets it back.
  Every request to a ready host waited out such turns: on the 2,000-host
  benchmark the hosts' gaps were 1.7 s for a 1 s delay while the GIL was free
  a third of the time. At 0.5 ms: 1,147 → 1,558 pages/s and 1.29 → 0.95
  CPU-s per 1,000 pages (bench/RESULTS.md, "Issue 14: the GIL convoy");
- the soft limit on open descriptors raised to the hard one (as nginx's
  ``worker_rlimit_nofile``): a crawl keeps a connection per recently
  contacted host, and many systems start processes at a soft limit of 1,024.
  What the limit then allows bounds the idle connections (connectors.py).
"""

from __future__ import annotations

import gc
import resource
import sys

FULL_EVERY = 20  # middle-generation collections between full ones (CPython: 10)
# Net new tracked objects between young collections (CPython: 700).
YOUNG_EVERY = 100_000
MAX_DESCRIPTORS = 65_536  # the soft limit asked for under an unlimited hard one
SWITCH_INTERVAL_S = 0.0005  # 0.2 ms measured the same; 1 ms 4 % slower; 5 ms (CPython's) 26 %

_tuned = False


def tune_for_crawling() -> None:
    """Freeze start-up objects, make full collections rare and hand the GIL
    back to the event loop sooner (idempotent)."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gen0, gen1, _ = gc.get_threshold()
    gc.collect()  # free start-up garbage before freezing what is left
    gc.freeze()
    gc.set_threshold(max(gen0, YOUNG_EVERY), gen1, FULL_EVERY)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    raise_descriptor_limit()


def raise_descriptor_limit() -> int:
    """The soft limit on open descriptors raised to the hard one; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_DESCRIPTORS if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):  # a hard limit the kernel will not grant
            pass
    return soft
