"""Seed URLs, streamed: from arguments and a file (or stdin), checked and normalised
once, spooled to a temporary file, then handed to the frontier in chunks.

Seeds are never kept in the job's config: a million of them made a 65 MB config
row, normalised again on every resume and pickled to the parser processes with
every batch. What a job keeps of its seeds is in the frontier (each one is in
the seen set once inserted) and the set of their hosts, the scope
(``scope_hosts``), which grows with hosts, not seeds.

Every seed is checked before any is inserted: a bad one deep in a file of a
million is a one-line error naming its line, and nothing was written (the
spool is what makes one pass enough, stdin included).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

from trawler.safetext import safe_url
from trawler.urls import host_key

CHUNK = 10_000  # seeds per frontier insert: one commit, one bounded Redis script call
STDIN = Path("-")


class SeedError(ValueError):
    """A seed or the seeds file cannot be used; the message is one line, for the user."""


class SeedSpool:
    """Normalised seeds in a temporary file, their count and their hosts.

    ``hosts`` (host keys) is held in memory: it grows with hosts, not seeds.
    """

    def __init__(self) -> None:
        # Deleted by the system when closed or when the process ends, however it ends.
        self._file: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.count = 0
        self.hosts: set[str] = set()

    def add(self, url: str) -> None:
        self._file.write(url + "\n")
        self.count += 1
        self.hosts.add(host_key(url))

    def chunks(self, size: int = CHUNK) -> Iterator[list[str]]:
        """The normalised seeds, ``size`` at a time, in the order given."""
        self._file.flush()
        self._file.seek(0)
        chunk: list[str] = []
        for line in self._file:
            chunk.append(line.rstrip("\n"))
            if len(chunk) >= size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SeedSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spool_seeds(
    arguments: Iterable[str], seeds_file: Path | None, normalise: Callable[[str], str | None]
) -> SeedSpool:
    """Check and normalise every seed into a spool, or raise ``SeedError``."""
    spool = SeedSpool()
    try:
        for where, seed in _seed_lines(arguments, seeds_file):
            url = normalise(safe_url(seed))
            if url is None:
                raise SeedError(f"not an http(s) URL: {seed!r}{where}")
            spool.add(url)
    except BaseException:
        spool.close()
        raise
    return spool


def _seed_lines(arguments: Iterable[str], seeds_file: Path | None) -> Iterator[tuple[str, str]]:
    """(where, seed) pairs: arguments first, then the file's lines; ``where`` names the line."""
    for seed in arguments:
        yield "", seed
    if seeds_file is None:
        return
    if seeds_file == STDIN:
        yield from _file_lines(sys.stdin.buffer, "stdin")
        return
    try:
        with seeds_file.open("rb") as binary:
            yield from _file_lines(binary, str(seeds_file))
    except OSError as exc:
        raise SeedError(f"cannot read --seeds-file {seeds_file}: {exc.strerror}") from None


def _file_lines(binary: BinaryIO, name: str) -> Iterator[tuple[str, str]]:
    """Seeds of a file, a line at a time: blank lines and ``#`` comments left out."""
    for number, raw in enumerate(binary, start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise SeedError(
                f"--seeds-file {name} is not UTF-8 text (byte 0x{raw[exc.start]:02x}"
                f" on line {number})"
            ) from None
        if line and not line.startswith("#"):
            yield f" (--seeds-file line {number})", line
