"""Reading the dashboard's event stream (text/event-stream) in tests, and an app
served in this process by `trawler serve`'s own uvicorn server on loopback."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from fastapi import FastAPI

from trawler.api.server import ApiServer
from trawler.cli_serve import uvicorn_config

TOKEN = "token-for-live-events"


@dataclass
class SseEvent:
    name: str
    data: Any  # the JSON of its data line
    arrived: float  # time.monotonic()


class Events:
    """The events of one streamed response, read as they come."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def take(self, count: int, timeout_s: float = 20) -> list[SseEvent]:
        """The next ``count`` events (bounded by ``timeout_s``, and by the client's
        read timeout should the stream fall silent)."""
        found: list[SseEvent] = []
        name, data = "message", ""
        deadline = time.monotonic() + timeout_s
        for line in self._lines:
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data += line.removeprefix("data: ")
            elif line == "" and data:
                found.append(SseEvent(name, json.loads(data), time.monotonic()))
                name, data = "message", ""
                if len(found) == count:
                    return found
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"{len(found)} events of {count} in {timeout_s} s: {found}")

    def drain(self) -> None:
        """Read until the stream ends (the server closed it, or the read timed out)."""
        with contextlib.suppress(httpx2.HTTPError):
            for _ in self._lines:
                pass


@contextmanager
def stream(client: httpx2.Client, token: str = TOKEN) -> Iterator[Events]:
    """GET /api/v1/events, streamed."""
    headers = {"Authorization": f"Bearer {token}"}
    with client.stream("GET", "/api/v1/events", headers=headers) as response:
        yield Events(response)


@dataclass
class InProcess:
    base: str
    app: FastAPI
    server: ApiServer
    thread: threading.Thread

    def client(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.base, timeout=httpx2.Timeout(10, read=5))


@contextmanager
def serve_in_process(app: FastAPI, stop_within_s: float = 10) -> Iterator[InProcess]:
    """``app`` on a free loopback port; stopped (and checked stopped) on exit."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = ApiServer(uvicorn_config(app), app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    assert server.started, "the server did not start"
    try:
        yield InProcess(f"http://127.0.0.1:{sock.getsockname()[1]}", app, server, thread)
    finally:
        server.should_exit = True
        thread.join(stop_within_s)
        sock.close()
    assert not thread.is_alive(), f"the server did not stop within {stop_within_s} s"
