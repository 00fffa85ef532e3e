"""The uvicorn server of `trawler serve`, which ends the dashboard's live streams
as it stops: uvicorn waits for every answer in progress to end before it stops,
and an event stream never ends by itself (SIGTERM would wait for ever while a
dashboard is open)."""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from trawler.api.live import LiveEvents


class ApiServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.live: LiveEvents = app.state.live

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.live.close()
        await super().shutdown(sockets)
