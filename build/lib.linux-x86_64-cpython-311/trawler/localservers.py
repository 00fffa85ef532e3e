"""A redis-server and a PostgreSQL cluster on 127.0.0.1, for the distributed mode on
one machine (`trawler services`, cli_services.py) and for the tests' servers
(tests/servers.py builds its throw-away instances on these pieces).

Binaries come from PATH or /usr/lib/postgresql/<version>/bin; missing ones are
installed from Debian with apt-get when we are root, the packages' own services
kept from starting (policy-rc.d exit 101, as bench/nginx.sh does). initdb and
postgres refuse to run as root: as root they run as the ``postgres`` OS user.
``ServerUnavailable`` says, in one line, why a server cannot run here.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("trawler.localservers")

SBIN_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin")
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
APT_LOCK = Path(tempfile.gettempdir()) / "trawler-apt.lock"
PG_USER = "postgres"  # initdb and postgres refuse to run as root
LOOPBACK = "127.0.0.1"


class ServerUnavailable(RuntimeError):
    """The server's binaries are missing and cannot be installed here."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_free(port: int) -> bool:
    """True when a server could listen on 127.0.0.1:``port`` now. SO_REUSEADDR, as
    redis-server and postgres set it: the connections a server just stopped left in
    TIME_WAIT do not keep its port from it."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def which(name: str) -> Path | None:
    """``name`` on PATH or in the sbin directories a non-login root shell may lack."""
    found = shutil.which(name) or next(
        (f"{d}/{name}" for d in SBIN_DIRS if os.access(f"{d}/{name}", os.X_OK)), None
    )
    return Path(found) if found else None


def apt_install(*packages: str) -> None:
    """Install Debian packages without letting their services start."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ServerUnavailable(
            f"{' '.join(packages)} missing; install it (apt-get install {' '.join(packages)},"
            " as root) or put its binaries on PATH"
        )
    with APT_LOCK.open("w") as lock:  # parallel processes install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        made_policy = not POLICY_RC_D.exists()
        if made_policy:  # exit 101 = "action forbidden": no service starts on install
            POLICY_RC_D.write_text("#!/bin/sh\nexit 101\n")
            POLICY_RC_D.chmod(0o755)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        try:
            for cmd in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", *packages]):  # fmt: skip
                log.warning("installing: %s", " ".join(cmd))
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
                log.info("%s", done.stdout[-2000:])
                if done.returncode != 0:
                    tail = " ".join(done.stderr.split())[-300:]
                    raise ServerUnavailable(f"{' '.join(cmd)} failed: {tail}")
        finally:
            if made_policy:
                POLICY_RC_D.unlink(missing_ok=True)


def ensure_redis_server() -> Path:
    """Path of redis-server, installing the Debian package when it is missing."""
    found = which("redis-server")
    if found is None:
        apt_install("redis-server")
        found = which("redis-server")
    if found is None:
        raise ServerUnavailable("redis-server not found after installing it")
    return found


def pg_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin, or the one on PATH."""
    dirs = glob.glob("/usr/lib/postgresql/*/bin")
    dirs.sort(key=lambda d: [int(p) for p in Path(d).parent.name.split(".") if p.isdigit()])
    for candidate in reversed(dirs):
        if os.access(f"{candidate}/initdb", os.X_OK):
            return Path(candidate)
    initdb = which("initdb")
    return initdb.resolve().parent if initdb else None


def ensure_postgres() -> Path:
    """Directory holding initdb and postgres, installing Debian's package when missing."""
    bindir = pg_bindir()
    if bindir is None:
        apt_install("postgresql")
        bindir = pg_bindir()
    if bindir is None:
        raise ServerUnavailable("PostgreSQL binaries not found after installing them")
    return bindir


def pg_user_args() -> dict[str, Any]:
    """Popen arguments that drop root to the postgres OS user (none for anyone else)."""
    if os.geteuid() != 0:
        return {}
    try:
        import pwd

        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", PG_USER], check=True)
    return {"user": PG_USER, "group": PG_USER, "extra_groups": []}


def give_to_pg_user(path: Path) -> None:
    """As root, hand ``path`` to the postgres user, who runs the cluster."""
    user = pg_user_args()
    if user:
        shutil.chown(path, user["user"], user["group"])


def unreachable_parent(path: Path) -> Path | None:
    """As root, the first existing directory on the way to ``path`` that the postgres
    user cannot enter (pytest's tmp dirs and /root are 0700), else None."""
    if os.geteuid() != 0:
        return None
    for parent in reversed(path.absolute().parents):
        with contextlib.suppress(FileNotFoundError):  # made later, by us, searchable
            if not parent.stat().st_mode & 0o001:  # others may not search it
                return parent
    return None


def redis_ping(port: int, password: str | None = None) -> bool:
    """True when a redis-server on 127.0.0.1:``port`` answers PING (after AUTH)."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1) as sock:
            if password is not None:  # a hex token: safe in an inline command
                sock.sendall(f"AUTH {password}\r\n".encode())
                if not sock.recv(64).startswith(b"+OK"):
                    return False
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def postgres_accepts(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=1).close()
        return True
    except psycopg.OperationalError:
        return False


def wait_ready(
    ready: Callable[[], bool],
    process: subprocess.Popen,
    what: str,
    log_path: Path,
    timeout_s: float,
) -> None:
    """Poll ``ready`` until it holds; a server that exits or takes too long is
    killed and raises RuntimeError with its log's tail."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
            raise RuntimeError(f"{what} did not start (exit {process.returncode}):\n{tail}")
        time.sleep(0.02)


def process_running(pid: int, name: str, cwd: Path | None = None) -> bool:
    """True when ``pid`` is a live (not zombie) process of the program ``name`` (working
    in ``cwd``, if given): a pid from an old state file may since have gone, or been
    reused, after a reboot say, by another program or by the system's own server."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        where = os.readlink(f"/proc/{pid}/cwd") if cwd is not None else None
    except OSError:  # gone, or another user's: not one we started
        return False
    # "pid (comm) state …": comm (the program's name, at most 15 bytes) may hold spaces.
    # Not cmdline: redis-server and postgres rewrite theirs as a title.
    comm, state = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :][:1]
    ours = cwd is None or where == str(cwd.resolve())
    return state not in ("Z", "X") and comm == name[:15] and ours


def stop_process(pid: int, name: str, cwd: Path | None, sig: int, timeout_s: float) -> bool:
    """Send ``sig`` to a process we did not start in this run and wait for it to end;
    True when it has (it may be nobody's child, so this polls, not waitpid)."""
    if not process_running(pid, name, cwd):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it happens to be ours
        if not process_running(pid, name, cwd):
            return True
        time.sleep(0.05)
    return False


def spawn_detached(cmd: list[str], log_path: Path, cwd: Path, **popen: Any) -> subprocess.Popen:
    """Start a server that outlives this process: its own session (a Ctrl-C in the
    terminal does not reach it), output appended to ``log_path``."""
    with log_path.open("ab") as out:
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
            start_new_session=True, **popen,
        )  # fmt: skip
