"""``create_app``: the FastAPI application of `trawler serve`.

Everything under ``/api/v1`` needs the bearer token; ``/health``, ``/metrics``
and ``/openapi.json`` do not. Errors are JSON with a one-line ``detail``: 401
no or wrong token, 404 no such job (or URL, host), 409 a transition the job's
state forbids, 422 a bad request naming the field, 501 job control this server
lacks, 503 the store cannot be read. Nothing a client sends makes a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from trawler import __version__
from trawler.api.dashboard import mount_dashboard
from trawler.api.deps import (
    ApiSettings,
    JobControlUnavailable,
    JobService,
    NoRunner,
    OperatorControls,
    StoreUnavailable,
    require_token,
)
from trawler.api.routes import admin, analysis, controls, events, jobdata, jobs, search, system
from trawler.api.schemas import Invalid, Problem
from trawler.jobs.model import InvalidTransition, UnknownJob

log = logging.getLogger("trawler")
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
API_PREFIX = "/api/v1"
COMMON_ERRORS: dict[int | str, dict] = {
    401: {"model": Problem, "description": "No or wrong bearer token"},
    422: {"model": Invalid, "description": "A bad request: `error` names the field"},
    503: {"model": Problem, "description": "The job store cannot be read"},
}


def create_app(
    service: JobService,
    settings: ApiSettings,
    operations: OperatorControls | None = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """``lifespan``: opens and closes what the service runs (its job runner) on
    the server's event loop."""
    app = FastAPI(
        title="Trawler",
        version=__version__,
        summary="Crawl jobs, their data, and the crawler's health.",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.settings = settings
    app.state.operations = operations if operations is not None else NoRunner()
    app.state.live = events.live_events(service)  # the dashboard's stream: one producer
    v1 = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_token)],
                   responses=COMMON_ERRORS)  # fmt: skip
    for module in (jobs, jobdata, search, analysis, admin, controls):
        v1.include_router(module.router)
    app.include_router(v1)
    app.include_router(events.router, prefix=API_PREFIX, dependencies=[Depends(require_token)])
    app.include_router(system.router, responses={503: COMMON_ERRORS[503]})
    mount_dashboard(app)
    _add_error_handlers(app)
    return app


def _problem(status: int, detail: str, **headers: str) -> JSONResponse:
    return JSONResponse({"detail": " ".join(detail.split())}, status, headers=headers or None)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_field_error(error) for error in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"][1:] or first["loc"]) or "request"
        body = {"error": f"invalid {where}: {first['msg']}", "detail": errors}
        return JSONResponse(body, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:  # FastAPI's word for a body it cannot decode (not UTF-8)
            error = {"loc": ["body"], "msg": str(exc.detail), "type": "body_unreadable"}
            return JSONResponse({"error": f"invalid body: {exc.detail}", "detail": [error]}, 422)
        return await http_exception_handler(request, exc)

    @app.exception_handler(UnknownJob)
    async def unknown(_request: Request, exc: UnknownJob) -> JSONResponse:
        what = str(exc.args[0]) if exc.args else ""
        return _problem(404, what if " " in what else f"no job {what!r}")

    @app.exception_handler(InvalidTransition)
    async def conflict(_request: Request, exc: InvalidTransition) -> JSONResponse:
        return _problem(409, str(exc))

    @app.exception_handler(JobControlUnavailable)
    async def unsupported(_request: Request, exc: JobControlUnavailable) -> JSONResponse:
        return _problem(501, str(exc))

    @app.exception_handler(StoreUnavailable)
    async def unavailable(_request: Request, exc: StoreUnavailable) -> JSONResponse:
        log.warning("job store unavailable: %s", exc)
        return _problem(503, str(exc))


def _field_error(error: dict) -> dict:
    """A pydantic error as JSON: where, what, which kind (no input echoed back)."""
    loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
    return {"loc": loc, "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
