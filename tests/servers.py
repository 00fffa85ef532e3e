"""Real redis-server and PostgreSQL processes on loopback, for the distributed tests.

Importable without pytest (tests/conftest.py wraps these in session fixtures;
benchmarks and scripts may use them directly). Each server gets its own
directory and a free port on 127.0.0.1 and never touches the system's own
instances. Finding and installing the binaries, dropping root for PostgreSQL
and the readiness checks are trawler/localservers.py's, shared with `trawler
services`; these are the throw-away, test-speed (fsync off) instances that die
with the test process. ``ServerUnavailable`` says why a server cannot run.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from trawler.localservers import (
    ServerUnavailable,
    apt_install,
    ensure_postgres,
    ensure_redis_server,
    free_port,
    pg_user_args,
    redis_ping,
    wait_ready,
)

log = logging.getLogger("tests.servers")

__all__ = [  # ServerUnavailable, apt_install and free_port: re-exported for the tests
    "PostgresServer", "RedisServer", "ServerUnavailable", "apt_install", "free_port",
    "prioritise", "start_postgres", "start_redis", "unavailable",
]  # fmt: skip


def unavailable(what: str, exc: Exception) -> NoReturn:
    """Skip the tests needing ``what`` on a developer's machine that cannot have it;
    in CI (``CI`` set) fail them instead: a suite that skips its distributed or
    browser tests there would pass without testing them."""
    reason = f"{what} unavailable: {exc}"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _die_with_parent(sig: int) -> Callable[[], None]:
    """A preexec_fn: the server gets ``sig`` when the test process dies, even by
    SIGKILL, so no server outlives its test run (Linux; elsewhere a no-op)."""

    def set_parent_death_signal() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, sig)  # 1 = PR_SET_PDEATHSIG

    return set_parent_death_signal


def prioritise(process: subprocess.Popen) -> None:
    """Schedule a test web server ahead of the load around it.

    Politeness checks read the server's arrival times. A server starved of CPU on
    a loaded machine logs some requests tens of ms late, most often the first on
    a new connection (accept and protocol set-up come before the log line), and
    the next request on the kept connection on time: a gap shorter at the server
    than the client left it (seen: robots.txt then the first page, 0.453 s for
    --delay 0.5, the client's send times 0.5 s apart). Root may raise priority;
    elsewhere the server keeps the default.
    """
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, process.pid, -10)


def _stop(process: subprocess.Popen | None, sig: int, timeout_s: float = 30) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- Redis ----------------------------------------------------------------------------


@dataclass
class RedisServer:
    """One redis-server on 127.0.0.1; restart() keeps port and dir, so the AOF reloads."""

    binary: Path
    dir: Path
    port: int
    appendonly: bool = True
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.dir / "redis.log"

    def start(self) -> RedisServer:
        cmd = [str(self.binary), "--bind", "127.0.0.1", "--port", str(self.port),
               "--dir", str(self.dir), "--appendonly", "yes" if self.appendonly else "no",
               "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
               "--logfile", str(self.log_path)]  # fmt: skip
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent(signal.SIGTERM)
        )
        wait_ready(lambda: redis_ping(self.port), self.process, "redis-server", self.log_path, 20)
        return self

    def stop(self) -> None:
        """Graceful shutdown: SIGTERM makes redis fsync the AOF before it exits."""
        _stop(self.process, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the last second of writes may be lost (appendfsync everysec)."""
        _stop(self.process, signal.SIGKILL)

    def restart(self, *, kill: bool = False) -> RedisServer:
        self.kill() if kill else self.stop()
        return self.start()


def start_redis(
    tmpdir: Path | str, port: int | None = None, appendonly: bool = True
) -> RedisServer:
    binary = ensure_redis_server()
    tmp = Path(tmpdir)
    tmp.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):  # a free port can be taken between free_port() and bind
        server = RedisServer(binary, tmp, port or free_port(), appendonly)
        try:
            started = time.monotonic()
            server.start()
            log.info("redis-server on %s in %.2fs", server.url, time.monotonic() - started)
            return server
        except RuntimeError:
            if port is not None or attempt == 2:
                raise
    raise AssertionError("unreachable")


# -- PostgreSQL -----------------------------------------------------------------------


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in its own temp dir; trust auth on loopback."""

    bindir: Path
    dir: Path
    port: int
    database: str = "trawler_test"
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def log_path(self) -> Path:
        return self.dir / "postgres.log"

    def _accepts(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url_for("postgres"), connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def initdb(self) -> None:
        cmd = [str(self.bindir / "initdb"), "-D", str(self.dir / "data"), "-A", "trust",
               "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.dir, **pg_user_args())
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr[-1500:]}")

    def start(self) -> PostgresServer:
        # fsync/full_page_writes/synchronous_commit off: test speed, never production.
        cmd = [str(self.bindir / "postgres"), "-D", str(self.dir / "data"), "-p", str(self.port),
               "-h", "127.0.0.1", "-k", str(self.dir), "-c", "fsync=off",
               "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
               "-c", "max_connections=200"]  # fmt: skip
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.dir, preexec_fn=_die_with_parent(signal.SIGQUIT), **pg_user_args(),
            )  # fmt: skip
        wait_ready(self._accepts, self.process, "postgres", self.log_path, 30)
        return self

    def create_database(self, name: str) -> str:
        """Create an empty database (if new) and return its URL."""
        import psycopg

        with psycopg.connect(self.url_for("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if exists.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def halt(self) -> None:
        """Fast shutdown (SIGINT: clients get AdminShutdown), keeping the data: start() again."""
        _stop(self.process, signal.SIGINT)

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then remove the cluster's directory."""
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_postgres(tmpdir: Path | str | None = None, port: int | None = None) -> PostgresServer:
    """initdb a fresh cluster, start it, create the database.

    The cluster lives in a new directory owned by the postgres user (inside
    ``tmpdir`` if given; pytest's tmp_path is 0700 root, so by default a
    ``tempfile.mkdtemp()``); stop() removes it.
    """
    bindir = ensure_postgres()
    base = Path(tempfile.mkdtemp(prefix="trawler-pg-", dir=tmpdir))
    base.chmod(0o755)  # parents must be traversable by postgres; mkdtemp makes 0700
    user = pg_user_args()
    if user:
        shutil.chown(base, user["user"], user["group"])
    started = time.monotonic()
    server = PostgresServer(bindir, base, port or free_port())
    try:
        server.initdb()
        server.start()
        server.create_database(server.database)
    except BaseException:
        server.stop()
        raise
    log.info("postgres on %s in %.2fs", server.url, time.monotonic() - started)
    return server
