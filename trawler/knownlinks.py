"""Links the crawl loop has taken already, told to the parser processes, which then
leave them out of their answers.

Every page of a site links the same URLs: on the 2,000-host benchmark ~12 of a
page's ~13 followable links lead to URLs the job has queued already. Each crossed
from the parser process to the loop as a request (pickled, unpickled, made a
``CrawlRequest``), had its robots.txt verdict asked and its fingerprint looked up
in the seen set, to be dropped there without a trace: no counter, no provenance
row. So the loop tells the job's parser processes, with its next batch, the
fingerprints of the page links that reached the seen set (new or not) with the
robots.txt verdict "allowed" while no domain was blocked; a parser process leaves
links with those fingerprints out of a page's requests (``LinkFilter.requests_for``).

The loop then does what it did, exactly: such a link would pass the same checks
and be dropped as seen, until one of these changes, and then the set is not used:
- the seen set forgets: never, within the life of an embedded frontier
  (frontier/seen.py); the set belongs to one AnalysisPool, i.e. one run of one
  job (a new run: a new token). A distributed frontier's seen set lives in Redis,
  added to when a page's commit lands, not when ``filter_new`` answers: not told
  (``seen_lasts``);
- a verdict: an origin's robots.txt replaced (``RobotsGate.generation``) or the
  blocklist changed (``Blocklist.generation``): the loop starts a new epoch, and
  the parser process starts the job's set again. Answers already on their way
  were made with the old set: the counters of their links to URLs queued already
  (``rejected.robots``, ``rejected.blocklist``) can miss those links; no URL is
  lost, all of them are in the seen set;
- ``--priority importance``: a page's cash goes to all its links, repeats too: not told.

Bounded: ``KNOWN_MAX`` fingerprints in a parser process (~8 MB), shared evenly
by the runs it holds (at least ``KNOWN_MIN`` each); a run's set past its share
starts over and fills again with the links that keep coming. A run's set is
dropped when the run ends (``forget``). With several parser processes, each
learns every fingerprint told, with the next batch it is sent (a page's links
go to whichever process is least busy, not to the one its site's news went
to): the loop keeps what some process has not been sent yet, at most
``KNOWN_MAX`` to ``2 * KNOWN_MAX`` of the epoch's latest, and sends a process at
most the newest ``KNOWN_MAX``: one sent no batch for that long (a tie goes to the
first process, so under a light load the others wait) misses the oldest. A process
that misses news only answers with more links, as before this module: nothing it
leaves out is unknown to the loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Container, Iterable

KNOWN_MAX = 1 << 17
KNOWN_MIN = 1 << 12  # a run's share at least: a site's navigation links
_RUNS_KEPT = 32  # sets a parser process keeps; the oldest run's goes first
# What goes with a batch: (the run's token, its epoch, fingerprints told since).
News = tuple[str, int, list[int]]
Stamp = tuple[int, int]  # (robots.txt generation, blocklist generation)


class KnownNews:
    """The loop's side, one a run: what to tell each parser process next."""

    __slots__ = ("token", "epoch", "_stamp", "_fps", "_base", "_sent")

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.epoch = 0
        self._stamp: Stamp | None = None
        # The epoch's fingerprints from the ``_base``-th told on: those some process
        # has not been sent yet. ``_sent``: how many of the epoch's each process
        # (by its slot, parsers.py) has been sent.
        self._fps: list[int] = []
        self._base = 0
        self._sent: dict[int, int] = {}

    def tell(self, fps: Iterable[int], stamp: Stamp) -> None:
        """``fps`` reached the seen set under the verdicts of ``stamp``; a new stamp
        starts a new epoch (what was told before is void), an older one is void
        itself (a page whose verdicts were taken before another page's)."""
        if stamp != self._stamp:
            old = self._stamp
            if old is not None and (stamp[0] < old[0] or stamp[1] < old[1]):
                return
            self._stamp = stamp
            self.epoch += 1
            self._fps, self._base, self._sent = [], 0, {}
        self._fps.extend(fps)
        if len(self._fps) > 2 * KNOWN_MAX:  # a process long without a batch misses the
            over = len(self._fps) - KNOWN_MAX  # oldest: cut now and then, not each time
            self._fps = self._fps[over:]
            self._base += over

    def take(self, process: int = 0, processes: int = 1) -> News:
        """What to send parser process ``process`` (of ``processes``) with its next
        batch: what it has not been sent of this epoch."""
        fps, base = self._fps, self._base
        end = base + len(fps)
        # Behind: at most the newest KNOWN_MAX (what a process's set may hold).
        start = max(self._sent.get(process, 0) - base, len(fps) - KNOWN_MAX, 0)
        self._sent[process] = end
        # What every process has been sent is kept no longer.
        low = min(self._sent.get(each, 0) for each in range(processes))
        if low == end:  # all sent: the list itself goes (one process: every time)
            self._fps, self._base = [], end
            return self.token, self.epoch, fps[start:] if start else fps
        if low > base:
            self._fps, self._base = fps[low - base :], low
        return self.token, self.epoch, fps[start:]  # a copy: the kept list grows


# A parser process's sets: token -> (epoch, fingerprints).
_PROCESS_KNOWN: dict[str, tuple[int, set[int]]] = {}


def known_of(news: News | None) -> Container[int]:
    """In a parser process: the run's known fingerprints, with ``news`` added."""
    if news is None:
        return ()
    token, epoch, fps = news
    held = _PROCESS_KNOWN.get(token)
    if held is None or held[0] != epoch:
        if held is None and len(_PROCESS_KNOWN) >= _RUNS_KEPT:
            del _PROCESS_KNOWN[next(iter(_PROCESS_KNOWN))]
        held = _PROCESS_KNOWN[token] = (epoch, set())
    known = held[1]
    if len(known) + len(fps) > max(KNOWN_MAX // len(_PROCESS_KNOWN), KNOWN_MIN):
        known.clear()
    known.update(fps)
    return known


def forget(token: str) -> None:
    """In a parser process: the run has ended."""
    _PROCESS_KNOWN.pop(token, None)
