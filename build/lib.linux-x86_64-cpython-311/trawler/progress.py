"""What the user sees: a live progress line on a terminal, log lines otherwise,
and the `trawler stats` report."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from trawler.records import Progress

log = logging.getLogger("trawler")
LOG_EVERY_S = 10.0  # plain log lines when stderr is not a terminal


def progress_line(p: Progress) -> str:
    return (
        f"{p.pages:,} pages | {p.pages_per_s:,.0f} pages/s | queue {p.queued:,} | "
        f"{p.active_hosts:,} hosts active | {p.not_html:,} not HTML | {p.errors:,} errors | "
        f"{p.elapsed_s:,.0f}s"
    )


@contextmanager
def progress_reporter(quiet: bool) -> Iterator[Callable[[Progress], None] | None]:
    """Yield the crawler's progress callback: a Rich live line on a TTY, else log lines."""
    if quiet:
        yield None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        last = [0.0]

        def log_line(p: Progress) -> None:
            if time.monotonic() - last[0] >= LOG_EVERY_S:
                last[0] = time.monotonic()
                log.info(progress_line(p))

        yield log_line
        return
    with Live(Text("starting…"), console=console, refresh_per_second=4, transient=False) as live:
        yield lambda p: live.update(Text(progress_line(p)))


class _StdoutConsole(Console):
    """Rich exits 1 when stdout's reader leaves; every command ends the same way
    instead (quietly, exit 0: see cli.main)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def print_stats(stats: dict[str, Any]) -> None:
    console = _StdoutConsole(file=sys.stdout)
    job = stats.get("job") or {}
    summary = Table(
        title=f"job {job.get('id', '-')} ({job.get('state', 'no job')})", show_header=False
    )
    for key in ("pages_stored", "pages_ok", "not_html", "urls_discovered", "urls_queued",
                "hosts", "bytes_downloaded", "pages_per_s"):  # fmt: skip
        if key in stats:
            value = stats[key]  # None: not known without the job's frontier (--redis)
            summary.add_row(key.replace("_", " "), "-" if value is None else f"{value:,}")
    console.print(summary)
    for title in ("kinds", "status", "errors", "skipped", "counters"):
        if stats.get(title):
            table = Table(title=title, show_header=False)
            for name, value in stats[title].items():
                table.add_row(str(name), f"{value:,}")
            console.print(table)


def print_hits(hits: list) -> None:  # list[SearchHit]
    """Search results as a table; matched terms in bold."""
    from trawler.store.search import split_highlights

    console = _StdoutConsole(file=sys.stdout)
    if not hits:
        console.print("no matches")
        return
    table = Table(show_lines=True)
    for column in ("score", "page", "snippet"):
        table.add_column(column)
    for hit in hits:
        snippet = Text()
        for piece, bold in split_highlights(hit.snippet):
            snippet.append(piece, style="bold" if bold else None)
        page = Text(hit.title or "(no title)", style="bold")
        page.append("\n" + hit.url, style="dim")
        table.add_row(f"{hit.score:.3g}", page, snippet)
    console.print(table)
