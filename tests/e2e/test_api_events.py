"""GET /api/v1/events, the dashboard's live stream, served by `trawler serve`'s own
uvicorn server in this process over a real data directory: the format, the first
event at once and the next within a second, one producer for every listener that
stops when the last one leaves, a store outage as `problem` events, and a server
that stops while a dashboard listens."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
from fastapi import FastAPI

from tests.e2e.sse import TOKEN, InProcess, serve_in_process, stream
from trawler.api.app import create_app
from trawler.api.datadir import DataDirJobs
from trawler.api.deps import ApiSettings
from trawler.api.live import LiveEvents
from trawler.jobs.layout import REGISTRY_NAME

SNAPSHOT_KEYS = {"at", "stats", "series", "jobs", "workers", "errors"}


@contextmanager
def served_client(app: FastAPI) -> Iterator[tuple[InProcess, httpx2.Client]]:
    with serve_in_process(app) as served, served.client() as client:
        yield served, client


def wait_for(check, timeout_s: float = 10) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_snapshots_come_at_once_then_twice_a_second(tmp_path: Path) -> None:
    app = create_app(DataDirJobs(tmp_path), ApiSettings(TOKEN))
    with serve_in_process(app) as served, served.client() as client:
        asked = time.monotonic()
        with stream(client) as events:
            assert events.response.status_code == 200
            assert events.response.headers["content-type"].startswith("text/event-stream")
            assert events.response.headers["cache-control"] == "no-cache"
            first, second, third = events.take(3)
        assert first.arrived - asked < 2.0, "the first snapshot comes at once"
        assert 0.2 < second.arrived - first.arrived < 1.5 and third.arrived - second.arrived < 1.5
        assert {first.name, second.name} == {"snapshot"}
        assert set(first.data) == SNAPSHOT_KEYS and second.data["at"] > first.data["at"]
        # The same shapes as the routes: an empty directory has nothing in them.
        stats = client.get("/api/v1/admin/stats", headers={"Authorization": f"Bearer {TOKEN}"})
        assert first.data["stats"] == stats.json()
        assert len(first.data["series"]["pages"]) == 600 and first.data["jobs"] == []
        assert client.get("/api/v1/events").status_code == 401


def test_one_producer_for_every_listener_and_none_when_nobody_listens(tmp_path: Path) -> None:
    app = create_app(DataDirJobs(tmp_path), ApiSettings(TOKEN))
    live: LiveEvents = app.state.live
    with serve_in_process(app) as served, served.client() as one, served.client() as two:
        assert not live.producing
        with stream(one) as first:
            first.take(1)
            with stream(two) as second:
                seen_two = [event.data["at"] for event in second.take(3)]
                seen_one = [event.data["at"] for event in first.take(6)]
                assert live.listeners == 2 and live.producing
        # One producer: both listeners were sent the very same snapshots.
        assert set(seen_two[1:]) <= set(seen_one), (seen_one, seen_two)
        assert wait_for(lambda: live.listeners == 0 and not live.producing, 5), (
            "the producer stops when the last listener leaves"
        )
        with stream(one) as again:  # and starts again for the next
            assert again.take(1)[0].name == "snapshot"


def test_a_store_outage_is_a_problem_event_and_the_stream_goes_on(tmp_path: Path) -> None:
    app = create_app(DataDirJobs(tmp_path), ApiSettings(TOKEN))
    registry = tmp_path / REGISTRY_NAME
    with serve_in_process(app) as served, served.client() as client, stream(client) as events:
        assert events.take(1)[0].name == "snapshot"
        registry.write_bytes(b"this is not a database" * 100)
        seen = events.take(4)
        problems = [event for event in seen if event.name == "problem"]
        assert len(problems) >= 2, seen
        assert "not a database" in problems[-1].data["detail"]
        assert "\n" not in problems[-1].data["detail"]
        registry.unlink()
        recovered = events.take(3)
        assert recovered[-1].name == "snapshot", recovered


def test_the_server_stops_while_a_dashboard_listens(tmp_path: Path) -> None:
    """uvicorn waits for every answer in progress before it stops: an endless stream
    would hold SIGTERM off for ever, unless the server ends the streams first."""
    app = create_app(DataDirJobs(tmp_path), ApiSettings(TOKEN))
    with served_client(app) as (served, client), stream(client) as events:
        events.take(1)
        reading = threading.Thread(target=events.drain, daemon=True)  # as a dashboard does
        reading.start()
        served.server.should_exit = True  # what SIGTERM does
        served.thread.join(10)
        assert not served.thread.is_alive(), "the server still waits for the stream"
        reading.join(10)
        assert not reading.is_alive(), "the stream ended"
