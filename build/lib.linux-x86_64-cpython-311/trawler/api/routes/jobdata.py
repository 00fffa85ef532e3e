"""A job's stored rows: the export (streamed), a page's versions, pages (filtered,
paginated), errors."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from trawler.api.deps import JobReader, Service, unix
from trawler.api.jobspec import invalid_query
from trawler.api.routes.jobs import NOT_FOUND
from trawler.api.schemas import (
    ErrorList,
    ErrorRow,
    PageList,
    PageRow,
    PageVersion,
    Problem,
    Responses,
    VersionList,
)
from trawler.export import RowWriter
from trawler.jobs.model import UnknownJob
from trawler.store import sqlite_read
from trawler.store.kinds import DEFAULT_EXPORT_KINDS, parse_kinds
from trawler.urls import normalise

router = APIRouter(prefix="/jobs/{job_id}", tags=["job data"])
MEDIA_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv"}
CHUNK_CHARS = 64 * 1024  # what the stream sends at a time


class Format(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


class Order(StrEnum):
    asc = "asc"
    desc = "desc"


class Versions(StrEnum):
    latest = "latest"
    all = "all"


class Kind(StrEnum):
    page = "page"
    sitemap = "sitemap"
    robots = "robots"


EXPORTED: Responses = {
    200: {
        "description": "The rows of `trawler export`, streamed",
        "content": {media: {"schema": {"type": "string"}} for media in MEDIA_TYPES.values()},
    },
    **NOT_FOUND,
}
VERSIONS: Responses = {
    404: {"model": Problem, "description": "No job of that id, or no versions of that page"},
}


@router.get("/export", response_class=StreamingResponse, responses=EXPORTED)
def export(
    job_id: str,
    service: Service,
    format: Format = Format.jsonl,
    kind: Annotated[list[Kind] | None, Query(description="Kinds of rows [page, sitemap].")] = None,
    include_noindex: bool = False,
    versions: Annotated[
        Versions, Query(description="Of a revisited page: its latest version, or all (a row each).")
    ] = Versions.latest,
) -> StreamingResponse:
    """The job's rows as JSON lines or CSV: the same rows as `trawler export` (with a
    `version` column once a page has been revisited and changed)."""
    kinds = parse_kinds(",".join(kind)) if kind else DEFAULT_EXPORT_KINDS
    reader = service.reader(job_id)  # before the answer starts: a 404 stays a 404
    try:
        rows = reader.export_rows(include_noindex, kinds, versions.value)
        columns = reader.export_columns()
    except BaseException:
        reader.close()
        raise
    chunks = _export_chunks(reader, rows, format.value, columns)
    return StreamingResponse(chunks, media_type=MEDIA_TYPES[format.value])


def _export_chunks(
    reader: JobReader, rows: Iterator[dict], fmt: str, columns: tuple[str, ...]
) -> Iterator[str]:
    """The export in pieces of about CHUNK_CHARS; memory stays flat (Starlette runs a
    plain generator on a worker thread, so the reads do not block the loop)."""
    buffer = io.StringIO()
    writer = RowWriter(buffer, fmt, columns)
    try:
        for row in rows:
            writer.write(row)
            if buffer.tell() >= CHUNK_CHARS:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()
    finally:
        reader.close()


@router.get("/versions", response_model=VersionList, responses=VERSIONS)
def versions(
    job_id: str,
    service: Service,
    url: Annotated[str, Query(max_length=8192, description="The page, as given or normalised.")],
    text: Annotated[bool, Query(description="Include each version's text.")] = False,
) -> VersionList:
    """A page's versions, oldest first (`trawler versions URL`): 404 for a page not
    stored, or not revisited yet (its only version is then its export row)."""
    normalised = normalise(url)
    if normalised is None:
        raise invalid_query("url", f"not an http(s) URL: {url[:200]!r}")
    with service.reader(job_id) as reader:
        found = reader.versions(normalised, text)
    if not found:
        raise UnknownJob(f"no versions of {normalised} in job {job_id}"
                         " (not stored, or not revisited yet)")  # fmt: skip
    return VersionList(url=normalised, versions=[PageVersion(**row) for row in found])


@router.get("/pages", response_model=PageList, responses=NOT_FOUND)
def pages(
    job_id: str,
    service: Service,
    host: Annotated[str | None, Query(max_length=1000)] = None,
    status: Annotated[int | None, Query(ge=100, le=999)] = None,
    kind: Kind | None = None,
    failed: Annotated[bool | None, Query(description="true: fetch errors only.")] = None,
    since: datetime | None = None,
    until: datetime | None = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=sqlite_read.PAGE_ROWS_MAX)] = 100,
    order: Annotated[Order, Query(description="asc: commit order; desc: newest first.")] = (
        Order.asc
    ),
) -> PageList:
    """The job's stored pages in commit order (or newest first), as export rows."""
    wanted = sqlite_read.PageFilter(
        host, status, kind.value if kind else None, failed, unix(since), unix(until)
    )
    with service.reader(job_id) as reader:
        rows, total = reader.pages(wanted, offset, limit, order == Order.desc)
    return PageList(pages=[PageRow(**row) for row in rows], total=total, offset=offset, limit=limit)


@router.get("/errors", response_model=ErrorList, responses=NOT_FOUND)
def errors(
    job_id: str,
    service: Service,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    code: Annotated[str | None, Query(max_length=200, description="Only this error code.")] = (
        None
    ),
    host: Annotated[str | None, Query(max_length=1000, description="Only this host[:port].")] = (
        None
    ),
) -> ErrorList:
    """The latest failed fetches (of that code, that host), newest first; the count of
    each error code and the total stay over the whole job."""
    with service.reader(job_id) as reader:
        latest, by_code = reader.errors(limit, code, host)
    return ErrorList(
        errors=[ErrorRow(**row) for row in latest], by_code=by_code, total=sum(by_code.values())
    )
