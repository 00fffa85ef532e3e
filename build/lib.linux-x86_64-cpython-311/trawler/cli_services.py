"""`trawler services up|down|status --dir DIR`: a local redis-server and PostgreSQL
for trying the distributed mode on one machine (localstack.py does the work).

`up` prints the servers' URLs and the `trawler submit/worker/serve` lines that
use them; it is idempotent. Exit codes: 1 when a server cannot be installed,
started or stopped (one line saying why), 2 for bad options.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from trawler.cli_common import EXIT_FAILED, fail

services_app = typer.Typer(
    name="services", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
    help="Start, stop and check a local Redis and PostgreSQL for the distributed mode.",
)  # fmt: skip


def _check_dir(value: Path) -> Path:
    if value.exists() and not value.is_dir():
        raise typer.BadParameter(f"{value} is not a directory")
    return value


DirOpt = Annotated[
    Path,
    typer.Option("--dir", envvar="TRAWLER_SERVICES_DIR", callback=_check_dir,
                 help="Directory of the servers' data, logs and state."),
]  # fmt: skip
DEFAULT_DIR = Path("trawler-services")


def register(app: typer.Typer) -> None:
    app.add_typer(services_app)


@services_app.command()
def up(
    dir: DirOpt = DEFAULT_DIR,
    redis_port: Annotated[int | None, typer.Option(min=1, max=65535, help="Redis port on 127.0.0.1 [the last one if free, else any free one].", show_default=False)] = None,
    postgres_port: Annotated[int | None, typer.Option(min=1, max=65535, help="PostgreSQL port on 127.0.0.1 [the last one if free, else any free one].", show_default=False)] = None,
) -> None:  # fmt: skip
    """Start redis-server and PostgreSQL on 127.0.0.1 with their data in DIR (installed
    with apt-get when missing, as root); print their URLs."""
    from trawler.localstack import ServicesError, load
    from trawler.localstack import up as start

    try:
        for line in start(dir, redis_port, postgres_port):
            typer.echo(line, err=True)
        stack = load(dir)
    except (ServicesError, OSError) as exc:
        fail(str(exc), EXIT_FAILED)
    redis, postgres = (shlex.quote(s.url or "") for s in stack.services())
    warc = shlex.quote(str(dir.resolve() / "warc"))
    typer.echo(
        f"export TRAWLER_REDIS={redis}\nexport TRAWLER_POSTGRES={postgres}\n"
        f"trawler submit https://example.com/ --redis {redis} --postgres {postgres}\n"
        f"trawler worker --redis {redis} --postgres {postgres} --warc-dir {warc}\n"
        f"trawler serve --redis {redis} --postgres {postgres}"
    )


@services_app.command()
def down(dir: DirOpt = DEFAULT_DIR) -> None:
    """Stop both servers (Redis: SIGTERM; PostgreSQL: its fast shutdown), keeping the data."""
    from trawler.localstack import ServicesError
    from trawler.localstack import down as stop

    try:
        for line in stop(dir):
            typer.echo(line)
    except (ServicesError, OSError) as exc:
        fail(str(exc), EXIT_FAILED)


@services_app.command()
def status(
    dir: DirOpt = DEFAULT_DIR,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Each server: running or stopped, pid, URL, and whether it answers."""
    from trawler.localstack import ServicesError, load

    try:
        stack = load(dir) if dir.is_dir() else None
    except ServicesError as exc:
        fail(str(exc), EXIT_FAILED)
    if stack is None:  # nothing was ever started there
        states = [{"name": name, "state": "stopped", "pid": None, "port": None, "url": None,
                   "reachable": False} for name in ("redis", "postgres")]  # fmt: skip
    else:
        states = [_described(asdict(state)) for state in stack.services()]
    if as_json:
        typer.echo(json.dumps({"dir": str(dir.resolve()), "services": states}))
        return
    for s in states:
        where = f"  pid {s['pid']}  {'reachable' if s['reachable'] else 'NOT answering'}"
        typer.echo(f"{s['name']:<9} {s['state']:<7}{where if s['pid'] else ''}  {s['url'] or ''}")


def _described(state: dict) -> dict:
    running = state.pop("running")
    return {"name": state.pop("name"), "state": "running" if running else "stopped", **state}
