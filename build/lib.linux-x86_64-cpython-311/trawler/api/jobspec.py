"""A ``POST /api/v1/jobs`` body → a checked ``CrawlConfig`` and normalised seeds.

Options keep their `trawler crawl` names (``delay``, not ``delay_s``), so an error
names the field the client sent: a 422 with ``loc = ["body", <name>]``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from trawler.api.schemas import JobRequest
from trawler.cli import cli_settings
from trawler.config import CrawlConfig
from trawler.netguard import PrivateAddressError, check_literal_host
from trawler.urls import Normaliser

OPTION_NAMES = tuple(name for name in JobRequest.model_fields if name != "seeds")
# CrawlConfig field → the option name it came from (the CLI's own mapping, inverted).
_OPTION_OF = {field: name for name in OPTION_NAMES for field, value in
              cli_settings({name: name}).items() if value == name}  # fmt: skip


def invalid(loc: tuple, message: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", *loc), "msg": message, "type": kind}])


def invalid_query(name: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("query", name), "msg": message, "type": "value_error"}])


def job_config(
    body: JobRequest, server_allows_private: bool, renders_here: bool = False
) -> CrawlConfig:
    """The job's config from the options given (defaults for the rest). ``renders_here``:
    the job would render in this process, which must have Playwright and chromium."""
    if body.allow_private and not server_allows_private:
        raise invalid(("allow_private",), "this server was not started with --allow-private")
    if renders_here and body.render not in (None, "never"):
        _check_render_available()
    given = body.model_dump(exclude={"seeds"}, exclude_none=True)
    settings = {k: v for k, v in cli_settings(given).items() if v is not None}
    try:
        return CrawlConfig.model_validate(settings)
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False, include_context=False, include_input=False):
            field = str(error["loc"][0]) if error["loc"] else ""
            loc = (_OPTION_OF.get(field, field), *error["loc"][1:])
            msg = error["msg"].removeprefix("Value error, ")
            errors.append({"loc": ("body", *loc), "msg": msg, "type": error["type"]})
        raise RequestValidationError(errors) from None


def _check_render_available() -> None:
    from trawler.render.browser import RenderUnavailable, check_available

    try:
        check_available()
    except RenderUnavailable as exc:
        raise invalid(("render",), str(exc)) from None


def job_seeds(body: JobRequest, config: CrawlConfig) -> list[str]:
    """The seeds normalised; an invalid one (or a private address the job may not
    fetch) is a 422 naming its index."""
    normalise = Normaliser(config.tracking_params)
    seeds: list[str] = []
    for index, seed in enumerate(body.seeds):
        url = normalise(seed.strip())
        if url is None:
            raise invalid(("seeds", index), f"{seed[:200]!r} is not an http(s) URL")
        if not config.allow_private:
            _check_public(url, index)
        seeds.append(url)
    return list(dict.fromkeys(seeds))


def _check_public(url: str, index: int) -> None:
    host = urlsplit(url).hostname or ""
    try:
        check_literal_host(host)
    except PrivateAddressError as exc:
        raise invalid(("seeds", index), f"{exc}: refused (allow_private)") from None
    except ValueError:
        raise invalid(("seeds", index), f"{host!r} is not a valid address") from None


def as_options(config: dict[str, Any]) -> dict[str, Any]:
    """A job's config (CrawlConfig fields) by the option names a job is created with."""
    return {_OPTION_OF.get(k, k): v for k, v in config.items()}
