"""A development stand-in for the dashboard's server side, until `trawler serve`
serves it itself: a loopback proxy that answers ``/`` and ``/static/`` from
trawler/api/static, fakes ``/api/v1/events`` by polling the real API, and passes
every other request to a real `trawler serve`. Used only when TRAWLER_DASH_DEV=1.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tests.servers import free_port

STATIC = Path(__file__).resolve().parents[2] / "trawler" / "api" / "static"
CSP = (  # the policy `trawler serve` sends with the page
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


async def _snapshot(client: httpx.AsyncClient) -> dict:
    stats, series, jobs, workers = await asyncio.gather(
        client.get("/api/v1/admin/stats"), client.get("/api/v1/admin/stats/timeseries"),
        client.get("/api/v1/jobs"), client.get("/api/v1/admin/workers"))  # fmt: skip
    job_list = jobs.json()["jobs"]
    errors: list[dict] = []
    for job in job_list[:3]:
        answer = await client.get(f"/api/v1/jobs/{job['id']}/errors")
        if answer.status_code == 200:
            errors += [{**row, "job": job["id"]} for row in answer.json()["errors"]]
    return {"at": time.time(), "stats": stats.json(), "series": series.json(),
            "jobs": job_list, "workers": workers.json(), "errors": errors}  # fmt: skip


def build(upstream: str) -> Starlette:
    async def index(_request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": CSP})

    async def events(request: Request) -> Response:
        headers = {"Authorization": request.headers.get("authorization", "")}
        client = httpx.AsyncClient(base_url=upstream, headers=headers, timeout=30)
        if (await client.get("/api/v1/jobs")).status_code == 401:
            await client.aclose()
            return Response('{"detail": "no or wrong token"}', 401)

        async def stream() -> AsyncIterator[str]:
            try:
                while not await request.is_disconnected():
                    yield f"event: snapshot\ndata: {json.dumps(await _snapshot(client))}\n\n"
                    await asyncio.sleep(0.5)
            finally:
                await client.aclose()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def proxy(request: Request) -> Response:
        async with httpx.AsyncClient(base_url=upstream, timeout=60) as client:
            headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
            answer = await client.request(request.method, request.url.path,
                                          params=request.query_params, headers=headers,
                                          content=await request.body())  # fmt: skip
        keep = {k: v for k, v in answer.headers.items()
                if k.lower() in ("content-type", "www-authenticate")}  # fmt: skip
        return Response(answer.content, answer.status_code, headers=keep)

    methods = ["GET", "POST", "PUT", "DELETE"]
    return Starlette(routes=[
        Route("/", index), Route("/api/v1/events", events),
        Mount("/static", StaticFiles(directory=STATIC)),
        Route("/{path:path}", proxy, methods=methods),
    ])  # fmt: skip


def start(upstream: str) -> str:
    """Serves the stand-in on a free loopback port in a daemon thread; its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build(upstream), host="127.0.0.1", port=port,
                                           log_level="warning"))  # fmt: skip
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"
