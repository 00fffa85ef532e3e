"""The browser: Playwright driving Debian's chromium, as a pool of contexts.

Chromium comes from the system (``apt-get install chromium``), never downloaded
at run time. Each page gets a fresh context (no cookies, storage or cache shared
between pages), ``concurrency`` of them at a time. The browser is started again
every ``restart_every_pages`` pages, when its processes use more than
``max_rss_bytes``, and when it has died: a crash or a hang costs the pages being
rendered, never the crawl (session.py turns their failure into a static page).

The browser is kept off the network: every request is intercepted and answered by
the crawler (session.py); as a second fence, chromium is pointed at a proxy that
does not exist and resolves no host name, so a request that escaped interception
(a WebSocket, a background update check) fails instead of leaving the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Playwright

log = logging.getLogger("trawler")

CHROMIUM = Path("/usr/bin/chromium")
# Port 9 (discard) on loopback: nothing listens, so a proxied request fails at once.
_ARGS = [
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",  # loopback too goes to the dead proxy
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-pings",
    "--disable-dev-shm-usage",  # containers have a small /dev/shm
]
_CLOSE_WAIT_S = 5.0  # a context a hung renderer keeps from closing: restart the browser


class RenderUnavailable(RuntimeError):
    """Rendering was asked for and cannot be done; the message says why, in one line."""


@dataclass(slots=True, frozen=True)
class BrowserOptions:
    concurrency: int = 2  # contexts (pages) at a time
    restart_every_pages: int = 100
    max_rss_bytes: int = 1024 * 1024 * 1024
    executable: Path = CHROMIUM
    user_agent: str | None = None


def check_available(executable: Path | None = None) -> None:
    """Raise ``RenderUnavailable`` when Playwright or chromium [CHROMIUM] is missing."""
    executable = CHROMIUM if executable is None else executable
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        raise RenderUnavailable(
            "--render needs Playwright: pip install 'trawler[render]'"
        ) from None
    if not executable.exists():
        raise RenderUnavailable(
            f"--render needs chromium at {executable}: apt-get install chromium"
        )


class BrowserPool:
    """One chromium for a process, lent out one context per page (to any of its jobs)."""

    def __init__(self, options: BrowserOptions) -> None:
        self.options = options
        self._driver: Playwright | None = None
        self._driver_cm: Any = None
        self._browser: Browser | None = None
        self._slots = asyncio.Semaphore(options.concurrency)
        self._in_use = 0
        self._idle = asyncio.Event()  # no context in use: the browser may restart
        self._idle.set()
        self._pages_since_start = 0
        self._restart_due = False
        self._lock = asyncio.Lock()  # one start or restart at a time
        self.restarts = 0

    async def start(self) -> None:
        check_available(self.options.executable)
        from playwright.async_api import async_playwright

        try:
            self._driver_cm = async_playwright()
            self._driver = await self._driver_cm.__aenter__()
            await self._launch()
        except Exception as exc:  # a broken install: said in one line, before any page
            await self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RenderUnavailable(f"cannot start chromium for --render: {first}") from None

    async def _launch(self) -> None:
        assert self._driver is not None
        args = list(_ARGS)
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # chromium's sandbox refuses to run as root
        self._browser = await self._driver.chromium.launch(
            executable_path=str(self.options.executable), args=args
        )
        self._pages_since_start = 0
        self._restart_due = False

    @contextlib.asynccontextmanager
    async def context(self, user_agent: str | None = None) -> AsyncIterator[BrowserContext]:
        """A fresh context for one page, closed afterwards whatever happened; its
        ``user_agent`` is the job's (a pool may serve many jobs), else the pool's."""
        async with self._slots:
            await self._ready()
            assert self._browser is not None
            self._in_use += 1
            self._idle.clear()
            browser = self._browser
            try:
                ctx = await browser.new_context(
                    service_workers="block",  # their requests would escape interception
                    user_agent=user_agent or self.options.user_agent,
                    java_script_enabled=True,
                )
                try:
                    yield ctx
                finally:
                    await self._close(ctx)
            finally:
                self._done_with_page()

    async def _ready(self) -> None:
        """Restart the browser first when it is due (dead, old, too big); a restart
        waits for the pages still being rendered on the old one."""
        async with self._lock:
            browser = self._browser
            if browser is not None and browser.is_connected() and not self._restart_due:
                return
            await self._idle.wait()
            await self._restart()

    async def _restart(self) -> None:
        old, self._browser = self._browser, None
        if old is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await old.close()
            self.restarts += 1
            log.info("render: browser restarted (%d so far)", self.restarts)
        await self._launch()

    async def _close(self, ctx: BrowserContext) -> None:
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await ctx.close()
        except Exception:  # hung or crashed: the next page gets a new browser
            self._restart_due = True

    def _done_with_page(self) -> None:
        self._in_use -= 1
        self._pages_since_start += 1
        if self._pages_since_start >= self.options.restart_every_pages:
            self._restart_due = True
        elif browser_rss_bytes() > self.options.max_rss_bytes:
            log.info("render: browser over its memory ceiling; restarting it")
            self._restart_due = True
        if self._in_use == 0:
            self._idle.set()

    async def close(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await browser.close()
        if self._driver_cm is not None:
            with contextlib.suppress(Exception):
                await self._driver_cm.__aexit__(None, None, None)
            self._driver_cm = self._driver = None


class SharedBrowser:
    """The process's browser (services.py), started when the first job that renders
    needs it and shared by every job after: one chromium, not one per job.

    The pool takes the restart and memory options of the job that started it; its
    contexts at a time are ``max_contexts`` (None: that job's --render-concurrency).
    Each job still renders at most its own --render-concurrency pages at a time
    (renderflow.py). A browser that would not start is tried again by the next job.
    """

    def __init__(self, max_contexts: int | None = None) -> None:
        self.max_contexts = max_contexts
        self.pool: BrowserPool | None = None
        self._lock = asyncio.Lock()

    async def get(self, options: BrowserOptions) -> BrowserPool:
        """The started pool (``RenderUnavailable`` when it cannot start)."""
        async with self._lock:
            if self.pool is None:
                if self.max_contexts is not None:
                    options = replace(options, concurrency=self.max_contexts)
                pool = BrowserPool(options)
                await pool.start()
                self.pool = pool
            return self.pool

    async def close(self) -> None:
        """After every job using it has ended."""
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()


def browser_rss_bytes() -> int:
    """Memory of this process's chromium processes (Linux /proc; 0 elsewhere), as
    their proportional share (PSS): chromium runs as many processes (browser,
    renderers, GPU) sharing most of their pages, so summed RSS counts those twice."""
    return sum(_pss_bytes(pid) for pid in browser_pids())


def browser_pids() -> list[int]:
    """The chromium processes descending from this process."""
    children: dict[int, list[int]] = {}
    comms: dict[int, str] = {}
    for pid, comm, ppid in _proc_entries():
        children.setdefault(ppid, []).append(pid)
        comms[pid] = comm
    found, stack = [], [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            if "chrom" in comms[child]:
                found.append(child)
    return found


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass  # gone meanwhile, or not readable
    return 0


def _proc_entries() -> list[tuple[int, str, int]]:
    """(pid, comm, ppid) of every process /proc shows."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as file:
                    stat = file.read()
            except OSError:
                continue  # gone meanwhile
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            found.append((int(name), comm, int(stat[stat.rindex(")") + 2 :].split()[1])))
    return found
