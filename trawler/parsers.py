"""The parser processes of a process, shared by every job in it (Services).

Page analysis runs in worker processes (analysis.py says why); one set of them
serves every job, so a service crawling ten jobs on two cores still has one
parser per spare core, not ten. Each job hands its analysis setup (its config
and its scope hosts: the link filter depends on both) over once, as a small
file the processes read the first time a batch of that job reaches them;
batches carry only its key. The processes start with the first job, and leave
when the crawler process dies (kill -9 included).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PARENT_CHECK_S = 1.0
# A job's setup, as the processes find it: (key, path of the file that holds it).
SetupRef = tuple[str, str]


def default_processes() -> int:
    """One analysis process per spare core (the crawl loop keeps one), at most 4."""
    return max(0, min(4, (multiprocessing.cpu_count() or 1) - 1))


class ParserProcesses:
    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._dir: Path | None = None  # the jobs' setup files

    def start(self) -> None:
        """Start the processes (once): before a job's first page, not with it."""
        if self._pool is None:
            self._pool = new_pool(self.processes)

    @property
    def pool(self) -> ProcessPoolExecutor:
        self.start()
        assert self._pool is not None
        return self._pool

    def register(self, config_json: str, scope_hosts: list[str]) -> SetupRef:
        """Keep a job's analysis setup where the processes can read it; its reference."""
        text = json.dumps({"config": config_json, "scope_hosts": scope_hosts})
        key = hashlib.sha256(text.encode()).hexdigest()[:20]
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="trawler-parsers-"))
        path = self._dir / f"{key}.json"
        if not path.exists():
            temporary = path.with_suffix(".tmp")
            temporary.write_text(text, encoding="utf-8")
            temporary.replace(path)  # whole or absent, for a process reading it
        return key, str(path)

    def broken(self, pool: ProcessPoolExecutor) -> bool:
        """A batch found ``pool`` broken: start new processes unless done already
        (every batch on it breaks too). True when this call restarted them."""
        if pool is not self._pool:
            return False
        pool.shutdown(wait=False, cancel_futures=True)
        self._pool = new_pool(self.processes)
        return True

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def new_pool(processes: int) -> ProcessPoolExecutor:
    # spawn: a clean child (not a fork of a process with threads and a loop),
    # and a direct child, so it can tell when the crawler is gone.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        processes, mp_context=context, initializer=start_process, initargs=(os.getpid(),)
    )
    with _sigint_ignored():
        # Start every process now, SIGINT ignored: a child inherits that across
        # exec and Python then installs no KeyboardInterrupt handler, so a
        # Ctrl-C to the terminal's process group cannot interrupt a child even
        # while it starts (before the initializer runs). One task each: the pool
        # starts a process per task while none is idle.
        for _ in range(processes):
            pool.submit(os.getpid)
    return pool


def start_process(parent_pid: int) -> None:
    """Pool process start-up: leave when the crawler dies (kill -9 included), instead
    of waiting forever on a queue nobody will write to. Ctrl-C is the parent's to
    handle: it stops the crawl, which shuts the pool down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="trawler-parent-watch", daemon=True).start()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT in this process for the block (main thread only: elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
