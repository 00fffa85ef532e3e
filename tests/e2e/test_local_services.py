"""`trawler services up|status|down`: the real command starts a redis-server and a
PostgreSQL cluster in a directory, a distributed crawl runs on the URLs it prints,
and the data outlives `down` and a killed server."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import start_testsite
from tests.e2e.test_distributed import TRAWLER, assert_complete_once, exported, submit
from tests.servers import ServerUnavailable, unavailable
from trawler.localservers import ensure_postgres, ensure_redis_server, process_running


def services(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*TRAWLER, "services", *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def printed_urls(stdout: str) -> tuple[str, str]:
    """The URLs of `up`'s ``export TRAWLER_REDIS=…`` and ``…POSTGRES=…`` lines."""
    exports = dict(
        shlex.split(line)[1].split("=", 1) for line in stdout.splitlines()
        if line.startswith("export ")
    )  # fmt: skip
    return exports["TRAWLER_REDIS"], exports["TRAWLER_POSTGRES"]


def status(root: Path) -> dict[str, dict]:
    listed = json.loads(services("status", "--dir", str(root), "--json").stdout)
    return {s["name"]: s for s in listed["services"]}


@pytest.fixture
def services_dir() -> Iterator[Path]:
    """Outside pytest's 0700 tmp dirs: as root, PostgreSQL runs as the postgres user,
    who must be able to enter the directory."""
    try:
        ensure_redis_server(), ensure_postgres()
    except ServerUnavailable as exc:
        unavailable("redis-server or PostgreSQL", exc)
    base = Path(tempfile.mkdtemp(prefix="trawler-services-"))
    base.chmod(0o711)  # mkdtemp makes 0700
    root = base / "svc"  # made by `up`
    yield root
    services("down", "--dir", str(root), ok=False)  # whatever the test left running
    shutil.rmtree(base, ignore_errors=True)


def test_up_crawl_down_up_keeps_the_job(tmp_path: Path, services_dir: Path) -> None:
    root = str(services_dir)
    started = services("up", "--dir", root)
    redis_url, postgres_url = printed_urls(started.stdout)
    running = status(services_dir)
    assert started.stderr.splitlines() == [
        f"{name}: started on 127.0.0.1:{running[name]['port']} (pid {running[name]['pid']})"
        for name in ("redis", "postgres")
    ]
    assert f"trawler worker --redis {redis_url} --postgres {postgres_url}" in started.stdout
    assert [running[n]["state"] for n in ("redis", "postgres")] == ["running", "running"]
    assert running["redis"]["reachable"] and running["postgres"]["reachable"]
    assert (running["redis"]["url"], running["postgres"]["url"]) == (redis_url, postgres_url)
    _assert_loopback_only(redis_url, postgres_url)

    served = start_testsite(tmp_path, hosts=2, pages=10)
    try:
        job = submit(served, redis_url, postgres_url, "--delay", "0.05")
        worker = subprocess.run(
            [*TRAWLER, "worker", "--redis", redis_url, "--postgres", postgres_url,
             "--warc-dir", str(tmp_path / "warc"), "--exit-when-idle", "-q"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
    finally:
        served.process.terminate()
    assert_complete_once(served, postgres_url, job)
    pages = exported(postgres_url, job)

    again = services("up", "--dir", root)  # idempotent: nothing new starts
    assert again.stderr.splitlines() == ["redis: already running", "postgres: already running"]
    assert printed_urls(again.stdout) == (redis_url, postgres_url)

    stopped = services("down", "--dir", root)
    pids = {n: running[n]["pid"] for n in ("redis", "postgres")}
    assert stopped.stdout.splitlines() == [
        f"redis: stopped (pid {pids['redis']})",
        f"postgres: stopped (pid {pids['postgres']})",
    ]
    assert not process_running(pids["redis"], "redis-server")
    assert not process_running(pids["postgres"], "postgres")
    after = status(services_dir)
    assert [(s["state"], s["reachable"]) for s in after.values()] == [("stopped", False)] * 2

    back = services("up", "--dir", root)  # the same cluster, ports and password
    assert printed_urls(back.stdout) == (redis_url, postgres_url)
    assert exported(postgres_url, job) == pages  # the job is still there
    assert redis.Redis.from_url(redis_url).dbsize() > 0  # and its frontier (the AOF)


def _assert_loopback_only(redis_url: str, postgres_url: str) -> None:
    assert redis.Redis.from_url(redis_url).config_get("bind")["bind"] == "127.0.0.1"
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    bad = postgres_url.replace(postgres_url.split(":")[2].split("@")[0], "wrong")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(bad).close()  # a password, not trust: other local users stay out


def test_a_killed_server_is_restarted_alone(services_dir: Path) -> None:
    root = str(services_dir)
    redis_url, postgres_url = printed_urls(services("up", "--dir", root).stdout)
    before = status(services_dir)
    os.kill(before["redis"]["pid"], signal.SIGKILL)  # the state file now names a dead pid
    stale = status(services_dir)
    assert (stale["redis"]["state"], stale["redis"]["pid"]) == ("stopped", None)
    assert stale["postgres"]["state"] == "running"

    again = services("up", "--dir", root)
    assert again.stderr.splitlines()[1] == "postgres: already running"
    assert again.stderr.startswith("redis: started on 127.0.0.1:")
    assert printed_urls(again.stdout) == (redis_url, postgres_url)
    now = status(services_dir)
    assert now["redis"]["reachable"] and now["postgres"]["pid"] == before["postgres"]["pid"]


def test_bad_options_and_a_taken_port(services_dir: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    for args in (["up", "--dir", str(a_file)], ["up", "--redis-port", "0"],
                 ["status", "--dir", str(a_file)], ["up", "--postgres-port", "x"]):  # fmt: skip
        assert_one_line_error(services(*args, ok=False), 2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = services("up", "--dir", str(services_dir), "--redis-port", port, ok=False)
    line = assert_one_line_error(done, 1)
    assert line == f"trawler: error: redis: port {port} on 127.0.0.1 is in use"
    never = status(services_dir)  # nothing was left half-started
    assert [s["state"] for s in never.values()] == ["stopped", "stopped"]
    (services_dir / "services.json").write_text("[]")  # not ours, or damaged
    line = assert_one_line_error(services("status", "--dir", str(services_dir), ok=False), 1)
    assert line.endswith("services.json is not a trawler services state file")


def test_a_lost_state_file_with_a_cluster_left_is_a_clear_error(services_dir: Path) -> None:
    """services.json holds the password the PostgreSQL cluster was made with; without
    it a new password would be refused by that cluster. `up` says so and starts
    nothing; the kept password, put back, works again."""
    root = str(services_dir)
    services("up", "--dir", root)
    services("down", "--dir", root)
    state = services_dir / "services.json"
    saved = state.read_text()
    state.unlink()
    line = assert_one_line_error(services("up", "--dir", root, ok=False), 1)
    assert "services.json" in line and "password" in line, line
    assert [s["state"] for s in status(services_dir).values()] == ["stopped", "stopped"]
    state.write_text(saved)
    again = services("up", "--dir", root)
    assert [s["state"] for s in status(services_dir).values()] == ["running", "running"]
    assert again.stderr.startswith("redis: started on 127.0.0.1:")
