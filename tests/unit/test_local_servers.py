"""trawler/localservers.py's process checks: a pid from an old state file may be a
zombie, gone, or another program's by now; none of those is the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from trawler.localservers import port_free, process_running, stop_process


def test_a_live_process_is_known_by_its_program_and_directory(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"], cwd=tmp_path)
    try:
        assert process_running(sleeper.pid, "sleep")
        assert not process_running(sleeper.pid, "redis-server")  # a reused pid
        assert process_running(sleeper.pid, "sleep", tmp_path)
        assert not process_running(sleeper.pid, "sleep", tmp_path.parent)  # another one's
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not process_running(sleeper.pid, "sleep")  # gone


def test_a_zombie_is_not_running() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    os.kill(sleeper.pid, signal.SIGKILL)
    os.waitid(os.P_PID, sleeper.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
    assert os.path.exists(f"/proc/{sleeper.pid}")  # the premise: still in the table
    assert not process_running(sleeper.pid, "sleep")
    sleeper.wait()


def test_stop_process_waits_for_the_end() -> None:
    """A process that ignores SIGTERM is reported still running; SIGKILL ends it."""
    ignore_term = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    stubborn = subprocess.Popen(
        [sys.executable, "-c", f"{ignore_term} print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
        name = Path(f"/proc/{stubborn.pid}/comm").read_text().strip()
        assert not stop_process(stubborn.pid, name, None, signal.SIGTERM, timeout_s=0.3)
        assert stop_process(stubborn.pid, name, None, signal.SIGKILL, timeout_s=5)
    finally:
        stubborn.kill()
        stubborn.wait()


def test_port_free_sees_a_listener() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not port_free(port)
    assert port_free(port)
