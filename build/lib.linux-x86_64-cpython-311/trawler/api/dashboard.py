"""The dashboard's files: ``GET /`` answers static/index.html and ``/static/...``
the rest of static/ (package data, shipped in the wheel).

Neither needs the token: the page asks the operator for it and sends it on each
API call. Neither is in the OpenAPI (they are not the API). Every answer carries
``Content-Security-Policy``: scripts, styles, images and connections only from
this server, nothing inline (the page has no inline script or style), no CDN.
``Cache-Control: no-cache``: a browser revalidates, so a new version shows at once.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none';"
    " form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}
# The system's mime.types may lack or misname these (a browser refuses an ES module
# served as text/plain under nosniff): ours, whatever the machine says.
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}


class DashboardFiles(StaticFiles):
    """StaticFiles with the dashboard's headers and media types."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        media = MEDIA_TYPES.get(Path(path).suffix.lower())
        if media is not None and response.status_code in (200, 304):
            response.headers["Content-Type"] = media
        return response


def mount_dashboard(app: FastAPI, static_dir: Path = STATIC_DIR) -> None:
    @app.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(static_dir / "index.html", media_type=MEDIA_TYPES[".html"],
                            headers=HEADERS)  # fmt: skip

    app.mount("/static", DashboardFiles(directory=static_dir), name="static")
