"""The parser processes of a process, shared by every job in it (Services).

Page analysis runs in worker processes (analysis.py says why); one set of them
serves every job, so a service crawling ten jobs on two cores still has one
parser per spare core, not ten. Each job hands its analysis setup (its config
and its scope hosts: the link filter depends on both) over once, as a small
file the processes read the first time a batch of that job reaches them;
batches carry only its key. The processes start with the first job, and leave
when the crawler process dies (kill -9 included). Each is a ``ParserPipe``
(parserpipe.py): the event loop writes its batches and reads its answers, no
helper thread in between. A process that dies is replaced at once; the batches
it had not answered fail with ``ParserBroken`` (analysis.py analyses their pages
again one at a time, to pin the break on one page).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from trawler.heap import keep_heap_top
from trawler.parserpipe import ParserPipe, serve

log = logging.getLogger("trawler")

PARENT_CHECK_S = 1.0
# A job's setup, as the processes find it: (key, path of the file that holds it).
SetupRef = tuple[str, str]


def default_processes() -> int:
    """One analysis process per spare core (the crawl loop keeps one), at most 4.

    Two on two cores were tried (issue 14): no faster overall on the 2,000-host
    benchmark (1,520-1,624 against ~1,558 pages/s), and with the server on the
    same cores, nginx starved into logging bursts late (47-85 gaps of 0.987 s
    at --delay 1, against none): bench/RESULTS.md.
    """
    return max(0, min(4, (multiprocessing.cpu_count() or 1) - 1))


class ParserProcesses:
    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pipes: list[ParserPipe] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop serving the pipes
        self._dir: Path | None = None  # the jobs' setup files

    def start(self) -> None:
        """Start the processes (once, in the running event loop): before a job's
        first page, not with it."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop (another asyncio.run): new pipes
            self._close_pipes()
            self._loop = loop
        while len(self._pipes) < self.processes:
            self._pipes.append(ParserPipe(loop, start_parser_process, self._broken))

    def submit(self, *message: Any) -> asyncio.Future[Any]:
        """``(function, *args)`` to the least busy process; the future gets its result,
        or ParserBroken if the process died first."""
        return self.submit_to(self.least_busy(), *message)

    def least_busy(self) -> int:
        """The slot of the process with the fewest messages waiting: 0 to
        ``processes`` - 1 (a process that died is replaced in its slot)."""
        self.start()
        pipes = self._pipes
        return min(range(len(pipes)), key=lambda slot: len(pipes[slot].waiting))

    def submit_to(self, slot: int, *message: Any) -> asyncio.Future[Any]:
        """``(function, *args)`` to the process in ``slot``, as ``submit``."""
        self.start()
        return self._pipes[slot].submit(message)

    def submit_to_each(self, *message: Any) -> list[asyncio.Future[Any]]:
        """``(function, *args)`` to every process (a job's warm-up: analysis.py)."""
        self.start()
        return [pipe.submit(message) for pipe in self._pipes]

    def tell_each(self, *message: Any) -> None:
        """``(function, *args)`` to every process running, answer unused (a job's
        end); none when called off their loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self._loop:
            for pipe in self._pipes:
                pipe.submit(message).add_done_callback(answer_unused)

    def _broken(self, pipe: ParserPipe) -> None:
        """A process died: a new one takes its place (batches already failed)."""
        log.error("page analysis crashed in a parser process; restarted it")
        if pipe in self._pipes:
            slot = self._pipes.index(pipe)
            if self._loop is not None and not self._loop.is_closed():
                self._pipes[slot] = ParserPipe(self._loop, start_parser_process, self._broken)
            else:
                del self._pipes[slot]

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

    def close(self) -> None:
        self._close_pipes()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _close_pipes(self) -> None:
        pipes, self._pipes = self._pipes, []
        for pipe in pipes:
            pipe.close()


def answer_unused(done: asyncio.Future[Any]) -> None:
    """A done callback for an answer not waited for (a warm-up, a job's end): a
    process that broke on it is replaced all the same (``_broken``)."""
    if not done.cancelled():
        done.exception()  # retrieved: asyncio logs no "never retrieved"


def start_parser_process(inbox: Connection, outbox: Connection) -> BaseProcess:
    # spawn: a clean child (not a fork of a process with threads and a loop), and a
    # direct child, so it can tell when the crawler is gone. SIGINT ignored while it
    # starts: a child inherits that across exec and Python then installs no
    # KeyboardInterrupt handler, so a Ctrl-C to the terminal's process group cannot
    # interrupt it even before start_process runs.
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=_serve, args=(os.getpid(), inbox, outbox),
                              name="trawler-parser", daemon=True)  # fmt: skip
    with _sigint_ignored(), _main_module_hidden():
        process.start()
    return process


def _serve(parent_pid: int, inbox: Connection, outbox: Connection) -> None:
    start_process(parent_pid)
    serve(inbox, outbox)


def exit_code(process: BaseProcess, wait_s: float = 5.0) -> int | None:
    """How a process that closed its pipes ended (blocking, off the loop): its exit
    code, minus the signal's number when a signal ended it; None if it is still
    running after ``wait_s``."""
    process.join(wait_s)
    return process.exitcode


def start_process(parent_pid: int) -> None:
    """Parser process start-up: leave when the crawler dies (kill -9 included), instead
    of waiting forever on a pipe nobody will write to. Ctrl-C is the parent's to
    handle: it stops the crawl, which shuts the pool down. And the C heap's top kept
    (heap.py): the pages' parse trees come and go there."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_heap_top()

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


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start processes in the block without the parent's main module.

    A spawned child first runs the parent's ``__main__`` again (multiprocessing's
    rule, for targets defined there): for ``trawler crawl`` that is the console
    script, so every parser process imported the CLI (Typer, Rich, the commands'
    modules) that it never uses: ~0.05 CPU-s a start (bench/RESULTS.md; the
    analysis imports most of the rest anyway). The targets here live in importable modules, so the
    child is shown an empty ``__main__`` while it starts. Start-up runs in the loop's
    thread; no other thread reads ``__main__``.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main
