"""A real `trawler serve` process on loopback, and a crawl for it to serve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.e2e.scripted import page, start_scripted

_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
_TOKEN = re.compile(r"API token \(shown once\): (\S+)")


@dataclass
class ServeProcess:
    process: subprocess.Popen[bytes]
    base: str
    token: str
    log_path: Path

    def client(self, token: str | None = "") -> httpx2.Client:
        """A client sending this server's token (``token=None``: none at all)."""
        given = self.token if token == "" else token
        headers = {"Authorization": f"Bearer {given}"} if given is not None else {}
        return httpx2.Client(base_url=self.base, headers=headers, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def serving(data: Path, tmp_path: Path, token: str) -> Iterator[ServeProcess]:
    """A fixture's body: `trawler serve --data DATA --allow-private` with ``token``,
    its log in ``tmp_path``, stopped after the test."""
    served = start_serve(data, tmp_path / "serve.log", "--allow-private", token=token)
    yield served
    served.stop()


def start_serve(
    data: Path, log_path: Path, *args: str, token: str | None = None, timeout_s: float = 30
) -> ServeProcess:
    """Start `trawler serve --port 0` and wait for its `listening on` line."""
    env = {k: v for k, v in os.environ.items() if k != "TRAWLER_TOKEN"}
    if token is not None:
        env["TRAWLER_TOKEN"] = token
    cmd = [sys.executable, "-m", "trawler", "serve", "--data", str(data), "--port", "0", *args]
    with log_path.open("wb") as log:
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        listening = _LISTENING.search(text)
        if listening:
            printed = _TOKEN.search(text)
            given = printed.group(1) if printed else token
            assert given is not None, text
            return ServeProcess(process, listening.group(1), given, log_path)
        if process.poll() is not None:
            raise RuntimeError(f"trawler serve exited {process.returncode}: {text}")
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"trawler serve did not start in {timeout_s} s: {log_path.read_text()}")


ROBOTS = "User-agent: *\nDisallow: /private\n"
HOME = '<a href="/a">a</a> <a href="/b">b</a> <a href="/private/x">p</a> <a href="/missing">m</a> <a href="/boom">x</a>'  # noqa: E501


def article(title: str, words: str) -> str:
    return f"<html><head><title>{title}</title></head><body><p>{words}</p></body></html>"


SCRIPT = {"0": {
    "/robots.txt": {"body": ROBOTS, "headers": {"Content-Type": "text/plain"}},
    "/": page(f"<html><head><title>Home</title></head><body>{HOME}</body></html>",
              **{"Content-Type": "text/html"}),
    "/a": page(article("Harbour pilot", "The harbour pilot boards the trawler at dawn."),
               **{"Content-Type": "text/html"}),
    "/b": page(article("Net mending", "Mending nets on the quay; the pilot waits."),
               **{"Content-Type": "text/html"}),
    "/boom": page("down", status=500),
}}  # fmt: skip


def crawl_scripted_site(tmp: Path) -> tuple[Path, str]:
    """A finished crawl of a small site with a robots.txt rule, a 404 and a 500:
    its data directory and the site's base URL (the server is stopped)."""
    server = start_scripted(tmp, SCRIPT)
    data = tmp / "data"
    try:
        out = subprocess.run(
            [sys.executable, "-m", "trawler", "crawl", server.bases[0] + "/", "--data", str(data),
             "--allow-private", "--delay", "0", "--max-attempts", "1", "--no-sitemaps", "-q"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    finally:
        server.stop()
    return data, server.bases[0]
