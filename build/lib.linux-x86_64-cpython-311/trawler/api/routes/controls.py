"""Operators' live controls over every job: the domain blocklist and politeness."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path
from fastapi.exceptions import RequestValidationError

from trawler.api.deps import Operations
from trawler.api.schemas import BlockedDomain, BlockRequest, PolitenessSettings, Problem, Responses

router = APIRouter(prefix="/admin", tags=["admin"])
NO_RUNNER: Responses = {501: {"model": Problem, "description": "This server has no job runner"}}


@router.get("/blocklist", response_model=list[BlockedDomain], responses=NO_RUNNER)
async def blocklist(operations: Operations) -> list[BlockedDomain]:
    return [BlockedDomain(**entry) for entry in await operations.blocklist()]


@router.post("/blocklist", status_code=201, response_model=BlockedDomain, responses=NO_RUNNER)
async def block(body: BlockRequest, operations: Operations) -> BlockedDomain:
    """No job sends another request to the domain or its subdomains: its queued URLs
    and new links are skipped (reason `blocklist`)."""
    try:
        return BlockedDomain(**await operations.block(body.domain, body.reason))
    except ValueError as exc:
        error = {"loc": ("body", "domain"), "msg": str(exc), "type": "value_error"}
        raise RequestValidationError([error]) from None


@router.delete(
    "/blocklist/{domain}",
    status_code=204,
    responses={**NO_RUNNER, 404: {"model": Problem, "description": "Not blocked"}},
)
async def unblock(domain: Annotated[str, Path(max_length=300)], operations: Operations) -> None:
    try:
        found = await operations.unblock(domain)
    except ValueError:  # not a domain name: it cannot be blocked
        found = False
    if not found:
        raise HTTPException(404, f"{domain[:300]!r} is not blocked")


@router.get("/settings/politeness", response_model=PolitenessSettings, responses=NO_RUNNER)
async def politeness(operations: Operations) -> PolitenessSettings:
    return PolitenessSettings(**await operations.politeness())


@router.put("/settings/politeness", response_model=PolitenessSettings, responses=NO_RUNNER)
async def set_politeness(body: PolitenessSettings, operations: Operations) -> PolitenessSettings:
    """Applied at once to every running job, without restarting it."""
    applied = await operations.set_politeness(body.delay, body.max_crawl_delay, body.concurrency)
    return PolitenessSettings(**applied)
