"""`trawler serve --redis URL --postgres URL`: the API over the distributed backend.

Jobs live in PostgreSQL and are crawled by `trawler worker`s (api/distributed.py);
this process only answers. Both servers are reached before the first request:
one that cannot be is a one-line error (exit 1). The service's connections are
opened in uvicorn's own event loop and closed when it ends.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import typer

from trawler.cli_common import run_connected


def serve_distributed(
    redis_url: str, postgres_url: str, settings: Any, sock: socket.socket,
    uvicorn_config: Callable[[Any], Any], show_token: bool,
) -> None:  # fmt: skip
    run_connected(_serve(redis_url, postgres_url, settings, sock, uvicorn_config, show_token))


async def _serve(
    redis_url: str, postgres_url: str, settings: Any, sock: socket.socket,
    uvicorn_config: Callable[[Any], Any], show_token: bool,
) -> None:  # fmt: skip
    from trawler.api.app import create_app
    from trawler.api.distributed import DistributedJobs
    from trawler.api.operators import StoredControls
    from trawler.api.server import ApiServer
    from trawler.jobs.postgres_controls import PostgresControlStore

    service = await DistributedJobs.connect(redis_url, postgres_url)
    try:
        controls = StoredControls(PostgresControlStore(service.store))
        app = create_app(service, settings, controls)
        if show_token:
            typer.echo(f"API token (shown once): {settings.token}", err=True)
        host, port = sock.getsockname()[:2]
        where = f"[{host}]" if ":" in host else host
        typer.echo(f"listening on http://{where}:{port} (Redis + PostgreSQL)", err=True)
        await ApiServer(uvicorn_config(app), app).serve(sockets=[sock])
    finally:
        await service.close()
