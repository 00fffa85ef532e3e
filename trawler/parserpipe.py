"""One parser process and its two pipes, both ends in the crawl process served by
the event loop itself (parsers.py says what the processes are for).

Why not ``concurrent.futures.ProcessPoolExecutor``: each of its batches went
through two helper threads in the crawl process (the queue's feeder thread,
which pickled it, and the result handler, which read the answer), four thread
wake-ups and a ``call_soon_threadsafe``; all of that competes with the event
loop for the GIL, and the loop is the crawl's bottleneck (bench/bench_parsepool.py
measures what is left). Here the loop writes a batch to a non-blocking pipe
and reads the answer when the pipe is readable: no thread at all.

Messages are framed as ``multiprocessing.connection.Connection`` frames them (a
4-byte big-endian length; -1 and an 8-byte one past 2 GiB), so the process reads
and writes with a plain blocking ``Connection``. Batches are pickled (they name
the function to run); an answer is made of plain tuples, lists, strings and numbers
(analysis_codec.py), which ``marshal`` writes in half the time ``pickle`` takes
(13.5 against 6.9 µs a page of the benchmark's, bench/RESULTS.md) and reads a fifth
faster: it goes marshalled, tagged ``M``, or pickled, tagged ``P``, when it holds
anything else (an exception, a Counter). Both ends run the same interpreter (the
process is spawned from the crawl's), so marshal's format, which is the
interpreter's own, is the same at both. It answers the batches in the
order they came. When it dies (a crash, or SIGPROF past the CPU limit), the
pipe reads end of file: every batch it had not answered fails with
``ParserBroken``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import marshal
import multiprocessing
import os
import pickle
import struct
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

_SIZE = struct.Struct("!i")
_BIG_SIZE = struct.Struct("!Q")
# A read's size: os.read allocates that much first, then shrinks it to what came.
# 1 MiB cost ~30 µs a read (a fresh mapping each time, bench/RESULTS.md), 64 KiB
# ~2.4; a bigger answer takes a few reads, one wake-up.
_READ_BYTES = 1 << 16
PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size


def _widen(fd: int) -> None:
    """Let the pipe hold ``PIPE_BYTES`` (Linux: 64 KiB by default). A batch of pages
    is ~300 KiB: through a 64 KiB pipe the parser read a fifth of it, then waited for
    the loop to come round and write the next fifth, and its answers waited for the
    loop to read; on the 2,000-host benchmark it spent a fifth of its time waiting
    so while ~100 batches queued in the crawl process (bench/RESULTS.md)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or over pipe-max-size
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


class ParserBroken(Exception):
    """The parser process died with this batch unanswered (crash, CPU limit)."""


class ParserPipe:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        start: Callable[[Connection, Connection], multiprocessing.process.BaseProcess],
        on_break: Callable[[ParserPipe], None],
    ) -> None:
        """``start(inbox, outbox)`` starts the process that reads batches from
        ``inbox`` and writes answers to ``outbox``; ``on_break`` hears of its death."""
        to_child, to_parent = multiprocessing.Pipe(duplex=False), multiprocessing.Pipe(False)
        for pipe_end in (to_child[1], to_parent[0]):
            _widen(pipe_end.fileno())
        self.process = start(to_child[0], to_parent[1])
        to_child[0].close()  # the child's ends: EOF reaches us when it dies
        to_parent[1].close()
        self._writer, self._reader = to_child[1], to_parent[0]
        os.set_blocking(self._writer.fileno(), False)
        os.set_blocking(self._reader.fileno(), False)
        self._loop, self._on_break = loop, on_break
        self._unsent = bytearray()
        self._received = bytearray()
        self.waiting: deque[asyncio.Future[Any]] = deque()  # answers due, in order
        self.open = True
        loop.add_reader(self._reader.fileno(), self._readable)

    def submit(self, message: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Send ``(function, *args)``; the future gets what ``function(*args)`` returned."""
        future = self._loop.create_future()
        if not self.open:
            future.set_exception(ParserBroken())
            return future
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        size = len(payload)
        header = _SIZE.pack(size) if size <= 0x7FFFFFFF else _SIZE.pack(-1) + _BIG_SIZE.pack(size)
        self.waiting.append(future)
        if self._unsent:
            self._unsent += header + payload
        else:
            self._write(header + payload)
        return future

    def _write(self, data: bytes | bytearray) -> None:
        try:
            written = os.write(self._writer.fileno(), data)
        except BlockingIOError:
            written = 0
        except OSError:  # EPIPE: the process is gone; the reader sees EOF too
            self.close(broken=True)
            return
        if written == len(data):
            if self._unsent:
                self._unsent.clear()
                self._loop.remove_writer(self._writer.fileno())
            return
        if not self._unsent:
            self._loop.add_writer(self._writer.fileno(), self._writable)
            self._unsent += memoryview(data)[written:]
        else:
            del self._unsent[:written]

    def _writable(self) -> None:
        self._write(self._unsent)

    def _readable(self) -> None:
        fd, ended = self._reader.fileno(), False
        while True:
            try:
                data = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                ended = True  # the process is gone: what it sent first is still answered
                break
            self._received += data
            if len(data) < _READ_BYTES:
                break  # the pipe is empty
        while (answer := self._next_answer()) is not None:
            self._deliver(loads_answer(answer))
        if ended:
            self.close(broken=True)

    def _next_answer(self) -> bytes | None:
        received = self._received
        if len(received) < _SIZE.size:
            return None
        (size,) = _SIZE.unpack_from(received)
        start = _SIZE.size
        if size == -1:
            if len(received) < start + _BIG_SIZE.size:
                return None
            (size,) = _BIG_SIZE.unpack_from(received, start)
            start += _BIG_SIZE.size
        if len(received) < start + size:
            return None
        answer = bytes(received[start : start + size])
        del received[: start + size]
        return answer

    def _deliver(self, answer: tuple[bool, Any]) -> None:
        future = self.waiting.popleft()
        if future.cancelled():
            return
        ok, value = answer
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def close(self, broken: bool = False) -> None:
        """Close the pipes (the process reads EOF and leaves); ``broken``: it died,
        its unanswered batches fail with ParserBroken and ``on_break`` is told."""
        if not self.open:
            return
        self.open = False
        if not self._loop.is_closed():
            self._loop.remove_reader(self._reader.fileno())
            self._loop.remove_writer(self._writer.fileno())
        self._reader.close()
        self._writer.close()
        if self.process.is_alive():
            self.process.terminate()
        waiting, self.waiting = self.waiting, deque()
        for future in waiting:
            if not future.done():
                future.set_exception(ParserBroken())
        if broken:
            self._on_break(self)


def serve(inbox: Connection, outbox: Connection) -> None:
    """In the parser process: answer each ``(function, *args)`` with ``(True, result)``,
    or ``(False, exception)`` for a bug, until the crawl process closes the pipe."""
    while True:
        try:
            message = inbox.recv_bytes()
        except EOFError:
            return
        function, *args = pickle.loads(message)
        try:
            answer: tuple[bool, Any] = (True, function(*args))
        except Exception as exc:  # noqa: BLE001 - a bug: delivered to the pages' tasks
            answer = (False, exc)
        outbox.send_bytes(dumps_answer(answer))


_MARSHALLED, _PICKLED = b"M", b"P"


def dumps_answer(answer: tuple[bool, Any]) -> bytes:
    """An answer's bytes: marshalled when it can be (values of the exact built-in
    types), else pickled. A bytearray or memoryview comes back as bytes."""
    try:
        return _MARSHALLED + marshal.dumps(answer)
    except ValueError:  # an object marshal does not write: an exception, a Counter
        pass
    try:
        return _PICKLED + pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an exception that does not pickle
        return _PICKLED + pickle.dumps((False, RuntimeError(repr(exc))))


def loads_answer(data: bytes) -> tuple[bool, Any]:
    body = memoryview(data)[1:]
    if data[:1] == _MARSHALLED:
        return marshal.loads(body)
    return pickle.loads(body)
