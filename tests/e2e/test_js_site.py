"""The render tests' server (tests/e2e/js_site.py) logs when a request reached it,
not when a thread of it got round to reading it: its log is what the politeness
checks of tests/e2e/test_render_crawl.py read."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.e2e.test_render_crawl import start_js_site

HELD_S = 0.3  # how long the server is kept from reading


def request(conn: socket.socket, path: str) -> None:
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())


def stop(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until each of its threads is stopped: the signal is
    delivered after kill() returns, and a server still running would answer at once."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while not all(state(stat) == "T" for stat in Path(f"/proc/{pid}/task").glob("*/stat")):
        assert time.monotonic() < deadline, "the server did not stop"
        time.sleep(0.001)


def state(stat: Path) -> str:
    """A thread's state letter (proc(5)), "" for one that has just ended."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def read_answer(conn: socket.socket) -> bytes:
    data = b""
    while b"User-agent" not in data:  # robots.txt's body, the end of the answer
        chunk = conn.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_a_request_is_stamped_when_it_arrived_though_read_late(tmp_path: Path) -> None:
    site = start_js_site(tmp_path)
    port = urlsplit(site.seed).port
    assert port is not None
    sent: list[tuple[float, float]] = []  # (just before, just after) each request left
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            for _ in range(2):  # a new connection's first request, then a kept one's
                stop(site.process.pid)  # a server starved of CPU
                try:
                    before = time.time()
                    request(conn, "/robots.txt")
                    sent.append((before, time.time()))
                    time.sleep(HELD_S)
                finally:
                    os.kill(site.process.pid, signal.SIGCONT)
                assert read_answer(conn).startswith(b"HTTP/1.1 200")
    finally:
        site.process.terminate()
        site.process.wait(10)
    answered = [entry for entry in site.log() if "end" in entry]
    assert len(answered) == 2
    for entry, (before, after) in zip(answered, sent, strict=True):
        assert entry["end"] - after >= HELD_S  # it was read late...
        assert before - 0.002 <= entry["start"] <= after + 0.002, (entry, before, after)
