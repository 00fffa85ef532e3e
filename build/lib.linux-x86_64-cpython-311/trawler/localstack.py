"""`trawler services`: a redis-server and a PostgreSQL cluster kept in a directory
of the user's choosing, for trying the distributed mode on one machine.

DIR holds everything: ``services.json`` (each server's pid, port and URL, and
the password both use; mode 0600), ``redis/`` (its config, AOF and log),
``postgres/`` (the cluster) and ``postgres.log``. The servers listen on
127.0.0.1 only, with a password made up on the first `up`: any local user can
reach a loopback port. They run in their own session and outlive `up`; `down`
stops them and keeps the data, so the next `up` serves the same jobs on the
same ports (when those are still free).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trawler import localservers as ls

STATE_NAME = "services.json"
DATABASE = "trawler"
STOP_TIMEOUT_S = 30.0
START_TIMEOUT_S = 60.0
NAMES = ("redis", "postgres")
PROGRAMS = {"redis": "redis-server", "postgres": "postgres"}
# Each server's working directory (redis: its `dir`; postgres moves into its cluster):
# with the program's name, what tells our process from another behind a reused pid.
HOMES = {"redis": "redis", "postgres": "postgres"}


class ServicesError(RuntimeError):
    """A server cannot be started or stopped; the message is one line."""


@dataclass(slots=True)
class ServiceState:
    """One server as last started from DIR, and what a check found now."""

    name: str
    port: int | None = None
    pid: int | None = None
    url: str | None = None
    running: bool = False
    reachable: bool = False


@dataclass(slots=True)
class StackState:
    password: str
    redis: ServiceState
    postgres: ServiceState

    def services(self) -> tuple[ServiceState, ServiceState]:
        return self.redis, self.postgres


def load(root: Path) -> StackState:
    """DIR's state file with each server checked (a killed server shows stopped)."""
    try:
        saved = json.loads((root / STATE_NAME).read_text())
    except FileNotFoundError:
        saved = {}
    except (OSError, ValueError) as exc:
        raise ServicesError(f"cannot read {root / STATE_NAME}: {exc}") from None
    if not isinstance(saved, dict) or not all(isinstance(saved.get(n, {}), dict) for n in NAMES):
        raise ServicesError(f"{root / STATE_NAME} is not a trawler services state file")
    return StackState(
        saved.get("password") or secrets.token_hex(16),
        *(_checked(root, name, saved.get(name) or {}, saved.get("password")) for name in NAMES),
    )


def _checked(root: Path, name: str, saved: dict, password: str | None) -> ServiceState:
    state = ServiceState(name, saved.get("port"), saved.get("pid"), saved.get("url"))
    state.running = state.pid is not None and ls.process_running(
        state.pid, PROGRAMS[name], root / HOMES[name]
    )
    if not state.running:
        state.pid = None  # stale: the process is gone (or the pid is someone else's)
    elif state.port is not None and state.url is not None:
        state.reachable = (
            ls.redis_ping(state.port, password) if name == "redis"
            else ls.postgres_accepts(state.url)
        )  # fmt: skip
    return state


def save(root: Path, stack: StackState) -> None:
    """Written whole to a temporary file, then renamed: never half a state file."""
    saved: dict[str, Any] = {"password": stack.password}
    for state in stack.services():
        saved[state.name] = {"port": state.port, "pid": state.pid, "url": state.url}
    temp = root / f".{STATE_NAME}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(saved, out, indent=2)
    temp.replace(root / STATE_NAME)


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """One `up` or `down` at a time per directory."""
    with (root / "services.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prepare_dir(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise ServicesError(f"{root} is not a directory")
    if (parent := ls.unreachable_parent(root)) is not None:
        raise ServicesError(
            f"the postgres user cannot enter {parent} (mode {parent.stat().st_mode & 0o777:o});"
            " choose a directory it can reach (e.g. under /var/tmp)"
        )
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # postgres runs as another user: it must enter DIR (not list it)
        root.chmod(root.stat().st_mode | 0o001)


def up(root: Path, redis_port: int | None, postgres_port: int | None) -> list[str]:
    """Start whichever server is not running; returns what was done, one line each."""
    prepare_dir(root)
    done = []
    with locked(root):
        stack = load(root)
        _check_password_kept(root)
        for state, asked in ((stack.redis, redis_port), (stack.postgres, postgres_port)):
            if state.running:
                moved = asked not in (None, state.port)
                note = f" (on port {state.port}, not {asked})" if moved else ""
                done.append(f"{state.name}: already running{note}")
                continue
            state.port = _pick_port(state, asked)
            start = _start_redis if state.name == "redis" else _start_postgres
            state.pid, state.url = start(root, state.port, stack.password)
            state.running = state.reachable = True
            save(root, stack)  # at once: a failing second server leaves the first known
            done.append(f"{state.name}: started on {ls.LOOPBACK}:{state.port} (pid {state.pid})")
    return done


def _check_password_kept(root: Path) -> None:
    """A cluster made by an earlier `up` accepts only the password of its state file:
    with that file gone, a new password would be refused after a long wait."""
    cluster_made = (root / "postgres" / "PG_VERSION").exists()
    if cluster_made and not (root / STATE_NAME).exists():
        raise ServicesError(
            f"{root / STATE_NAME} is gone but {root / 'postgres'} was made with the password"
            f" it held; put the file back, or remove {root / 'postgres'} (its data is lost)"
        )


def _pick_port(state: ServiceState, asked: int | None) -> int:
    """The port asked for; else the last one (the URLs users pasted stay right), when
    it is still free; else any free one."""
    if asked is not None:
        if not ls.port_free(asked):
            raise ServicesError(f"{state.name}: port {asked} on 127.0.0.1 is in use")
        return asked
    if state.port is not None and ls.port_free(state.port):
        return state.port
    return ls.free_port()


def _start_redis(root: Path, port: int, password: str) -> tuple[int, str]:
    binary = _binary(ls.ensure_redis_server)
    home = root / "redis"
    home.mkdir(exist_ok=True)
    conf = home / "redis.conf"
    # The password lives in a 0600 file, not on the command line that `ps` shows.
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(
            f'bind {ls.LOOPBACK}\nprotected-mode yes\nport {port}\ndir "{home}"\n'
            f'appendonly yes\nappendfsync everysec\nsave ""\ndaemonize no\n'
            f'logfile "{home / "redis.log"}"\nrequirepass {password}\n'
        )
    process = ls.spawn_detached([str(binary), str(conf)], home / "redis.log", home)
    _ready(lambda: ls.redis_ping(port, password), process, "redis-server", home / "redis.log")
    return process.pid, f"redis://:{password}@{ls.LOOPBACK}:{port}/0"


def _start_postgres(root: Path, port: int, password: str) -> tuple[int, str]:
    bindir = _binary(ls.ensure_postgres)
    cluster, log_path = root / "postgres", root / "postgres.log"
    if not (cluster / "PG_VERSION").exists():
        _initdb(bindir, cluster, password)
    cmd = [str(bindir / "postgres"), "-D", str(cluster), "-p", str(port),
           "-c", f"listen_addresses={ls.LOOPBACK}", "-c", "unix_socket_directories=",
           "-c", "max_connections=200"]  # fmt: skip
    process = ls.spawn_detached(cmd, log_path, root, **ls.pg_user_args())
    admin = f"postgresql://postgres:{password}@{ls.LOOPBACK}:{port}/postgres"
    _ready(lambda: ls.postgres_accepts(admin), process, "postgres", log_path)
    _create_database(admin)
    return process.pid, f"postgresql://postgres:{password}@{ls.LOOPBACK}:{port}/{DATABASE}"


def _initdb(bindir: Path, cluster: Path, password: str) -> None:
    cluster.mkdir(mode=0o700, exist_ok=True)
    ls.give_to_pg_user(cluster)
    pwfile = cluster.parent / ".pgpass-initdb"  # read by initdb (the postgres user), removed
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    ls.give_to_pg_user(pwfile)
    cmd = [str(bindir / "initdb"), "-D", str(cluster), "-U", "postgres", "-E", "UTF8",
           "--locale=C", "--auth=scram-sha-256", f"--pwfile={pwfile}"]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=cluster.parent,
                              **ls.pg_user_args())  # fmt: skip
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        raise ServicesError(f"initdb failed: {lines[-1]}")


def _create_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
        if found.fetchone() is None:
            conn.execute(f"CREATE DATABASE {DATABASE}")


def _binary(find: Callable[[], Path]) -> Path:
    try:
        return find()
    except ls.ServerUnavailable as exc:
        raise ServicesError(str(exc)) from None


def _ready(ready: Callable[[], bool], process: subprocess.Popen, what: str, log_path: Path) -> None:
    try:
        ls.wait_ready(ready, process, what, log_path, START_TIMEOUT_S)
    except RuntimeError as exc:
        last = [line for line in str(exc).splitlines()[1:] if line.strip()]
        why = last[-1].strip() if last else "no output"
        raise ServicesError(f"{what} did not start: {why} (log: {log_path})") from None


# redis-server saves and syncs its AOF on SIGTERM. PostgreSQL's SIGTERM is a "smart"
# shutdown that waits for every client (a worker) to leave; SIGINT is its fast one:
# sessions end, the data is checkpointed, nothing committed is lost.
STOP_SIGNALS = {"redis": signal.SIGTERM, "postgres": signal.SIGINT}


def down(root: Path) -> list[str]:
    """Stop both servers, keeping their data; returns one line per server."""
    if not (root / STATE_NAME).exists():
        return [f"{name}: not running (nothing started in {root})" for name in NAMES]
    report, stuck = [], []
    with locked(root):
        stack = load(root)
        for state in stack.services():
            if not state.running or state.pid is None:
                report.append(f"{state.name}: not running")
                continue
            pid = state.pid
            name, home = PROGRAMS[state.name], root / HOMES[state.name]
            if ls.stop_process(pid, name, home, STOP_SIGNALS[state.name], STOP_TIMEOUT_S):
                state.pid, state.running = None, False
                report.append(f"{state.name}: stopped (pid {pid})")
            else:
                stuck.append(f"{state.name} (pid {pid})")
        save(root, stack)
    if stuck:
        raise ServicesError(f"still running after {STOP_TIMEOUT_S:.0f} s: {', '.join(stuck)}")
    return report
