"""One typed settings object for a crawl, from CLI, TOML file and environment.

Precedence, highest first: command-line options, ``TRAWLER_*`` environment
variables, the TOML file given with ``--config``, the defaults below.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from trawler import __version__
from trawler.robotsagent import PRODUCT_TOKEN, user_agent_token

DEFAULT_USER_AGENT = f"Trawler/{__version__} (+https://github.com/trawler-crawler/trawler)"

# Always stripped during normalisation (see urls.py); --strip-param adds more.
DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "fbclid",
    "gclid",
    "dclid",
    "msclkid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "yclid",
)


class ConfigError(ValueError):
    """A setting is invalid; the message is one line, fit for the user."""


class CrawlConfig(BaseModel):
    """Everything that defines one crawl job. Stored with the job.

    Seeds are not part of it: they go into the frontier as a stream (seeds.py),
    and the job keeps their hosts as its scope.
    """

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)

    max_depth: int | None = Field(default=None, ge=0)
    max_pages: int | None = Field(default=None, ge=1)
    max_pages_per_host: int | None = Field(default=None, ge=1)
    scope: Literal["host", "domain", "any"] = "host"
    include: list[str] = Field(default_factory=list)  # URL regexes; empty = all
    exclude: list[str] = Field(default_factory=list)
    delay_s: float = Field(default=1.0, ge=0.0)
    max_crawl_delay_s: float = Field(default=60.0, ge=0.0)  # ceiling for robots Crawl-delay
    user_agent: str = DEFAULT_USER_AGENT
    # The robots.txt product token (RFC 9309 §2.2.1); None: from user_agent (robots_token).
    robots_agent: str | None = None
    concurrency: int = Field(default=256, ge=1, le=100_000)
    allow_private: bool = False
    connect_timeout_s: float = Field(default=10.0, gt=0)
    timeout_s: float = Field(default=30.0, gt=0)
    # Connect + response headers; below timeout_s, so a host that never answers
    # gives its slot back sooner (and is paused: retry.py).
    first_byte_timeout_s: float = Field(default=10.0, gt=0)
    max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    max_redirects: int = Field(default=5, ge=0, le=20)
    max_links_per_page: int = Field(default=5000, ge=1)
    # SimHashIndex k: candidates within 2k+1 bits, confirmed by MinHash (dedup.py).
    near_duplicate_bits: int = Field(default=3, ge=0, le=15)
    # Processes that parse pages next to the crawl loop; None = one per spare core.
    parse_processes: int | None = Field(default=None, ge=0, le=64)
    # CPU seconds one page may take there; past it: parse_too_complex (analysis.py).
    parse_time_limit_s: float = Field(default=10.0, gt=0)
    sitemaps: bool = True  # read robots.txt Sitemap: lines and /sitemap.xml of seed hosts
    sitemap_depth: int = Field(default=1, ge=0)  # the depth sitemap URLs enter the frontier at
    # Read each origin's /.well-known/tdmrep.json (TDMRep, tdmgate.py): one request more
    # per origin, so asked for; without it pages still get their own headers' and meta's
    # reservations, and their host's robots.txt AI crawlers' groups.
    tdmrep: bool = False
    # Fetch attempts per URL for connect errors, timeouts, 5xx, 429 and 503.
    max_attempts: int = Field(default=3, ge=1, le=20)
    # robots.txt answering 5xx/429/network error: wait, retry; after the last, give up.
    robots_retry_waits_s: list[float] = Field(default_factory=lambda: [5.0, 30.0, 120.0])
    strip_params: list[str] = Field(default_factory=list)  # extra tracking params
    warc_max_bytes: int = Field(default=1024**3, ge=1024)
    # A continuous job (issue 15, `crawl --recrawl`): stored pages are revisited as they
    # come due, beside new URLs, until the job is stopped; a resume goes on doing so.
    recrawl: bool = False
    revisit_min_s: float = Field(default=3600.0, gt=0)  # recrawl.DEFAULT_REVISIT_MIN_S
    revisit_max_s: float = Field(default=30 * 86400.0, gt=0)  # recrawl.DEFAULT_REVISIT_MAX_S
    # revisit_policy.py: intervals for the freshest copies at the fetches the
    # proportional schedule (1/rate) would make, or that proportional schedule.
    revisit_policy: Literal["optimal", "proportional"] = "optimal"
    # The order of each host's queue and of new hosts' first visits (issue 18):
    # depth (shallowest first) or importance (OPIC cash first: frontier/importance.py).
    priority: Literal["depth", "importance"] = "depth"
    # JavaScript rendering (issue 16, render/): never, auto (application shells, learnt
    # per host: render/shell.py) or always; whose subresources a rendered page loads.
    render: Literal["never", "auto", "always"] = "never"
    render_resources: Literal["same-host", "all", "none"] = "same-host"
    render_concurrency: int = Field(default=2, ge=1, le=64)  # browser contexts at a time
    render_timeout_s: float = Field(default=20.0, gt=0)  # per page, load to settled DOM
    render_restart_pages: int = Field(default=100, ge=1)  # a fresh browser every N pages
    render_max_memory_mb: int = Field(default=1024, ge=64)  # browser PSS ceiling: restart
    # auto: a host whose renders added no link and no text this many times in a row
    # is rendered no more.
    render_host_misses: int = Field(default=5, ge=1)

    @field_validator("include", "exclude")
    @classmethod
    def _regexes_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad regex {pattern!r}: {exc}") from None
        return patterns

    @model_validator(mode="after")
    def _revisit_window_holds(self) -> CrawlConfig:
        if not self.revisit_min_s <= self.revisit_max_s < float("inf"):
            raise ValueError(
                f"revisit_max_s ({self.revisit_max_s:g}) must be finite and not below"
                f" revisit_min_s ({self.revisit_min_s:g})"
            )
        return self

    @field_validator("robots_agent")
    @classmethod
    def _robots_agent_is_a_token(cls, token: str | None) -> str | None:
        if token is not None and PRODUCT_TOKEN.fullmatch(token) is None:
            raise ValueError(
                f"{token!r} is not a robots.txt product token (RFC 9309: letters, '_' and '-')"
            )
        return token

    @property
    def robots_token(self) -> str:
        """The token robots.txt groups, meta robots and X-Robots-Tag are matched on."""
        if self.robots_agent is not None:
            return self.robots_agent.lower()
        return user_agent_token(self.user_agent)

    @property
    def tracking_params(self) -> tuple[str, ...]:
        return DEFAULT_TRACKING_PARAMS + tuple(self.strip_params)


def stored_config(data: str | bytes | dict[str, Any]) -> tuple[CrawlConfig, list[str]]:
    """A job's stored config, and the seeds a config of an older Trawler still holds
    (their hosts become the job's scope once; the seeds themselves are in its frontier)."""
    raw = dict(data) if isinstance(data, dict) else json.loads(data)
    legacy_seeds = raw.pop("seeds", None) or []
    return CrawlConfig.model_validate(raw), [str(seed) for seed in legacy_seeds]


# CLI option name -> config field, where they differ.
_FIELD_ALIASES = {
    "delay": "delay_s",
    "max_crawl_delay": "max_crawl_delay_s",
    "timeout": "timeout_s",
    "connect_timeout": "connect_timeout_s",
    "first_byte_timeout": "first_byte_timeout_s",
    "parse_time_limit": "parse_time_limit_s",
    "robots_retry_waits": "robots_retry_waits_s",
    "render_timeout": "render_timeout_s",
}


def _env_settings(environ: dict[str, str]) -> dict[str, Any]:
    """``TRAWLER_MAX_DEPTH=3`` → ``{"max_depth": "3"}``; lists are comma-separated."""
    settings: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith("TRAWLER_"):
            continue
        name = key[len("TRAWLER_") :].lower()
        name = _FIELD_ALIASES.get(name, name)
        if name not in CrawlConfig.model_fields:
            continue
        annotation = str(CrawlConfig.model_fields[name].annotation)
        if annotation.startswith("list"):
            settings[name] = [part.strip() for part in value.split(",") if part.strip()]
        else:
            settings[name] = value
    return settings


def _toml_settings(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    data = data.get("crawl", data)  # accept a [crawl] table or top-level keys
    return {
        _FIELD_ALIASES.get(k.replace("-", "_"), k.replace("-", "_")): v for k, v in data.items()
    }


def build_config(
    cli: dict[str, Any],
    config_file: Path | None = None,
    environ: dict[str, str] | None = None,
    base: CrawlConfig | None = None,
) -> CrawlConfig:
    """Merge the layers into a validated CrawlConfig, or raise ConfigError.

    ``cli`` holds only the options the user actually gave (None = not given).
    ``base`` (a stored job's config) sits below everything else when resuming.
    """
    merged: dict[str, Any] = base.model_dump() if base else {}
    if config_file is not None:
        merged.update(_toml_settings(config_file))
    merged.update(_env_settings(dict(os.environ) if environ is None else environ))
    merged.update({k: v for k, v in cli.items() if v is not None and v != [] and v != ()})
    try:
        return CrawlConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    option = "--" + where.removesuffix("_s").replace("_", "-")
    message = err["msg"].removeprefix("Value error, ")  # pydantic's wrapping of our ValueErrors
    return f"invalid {option}: {message}"
