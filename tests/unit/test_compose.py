"""compose.yaml (docker compose; no docker here): every trawler command in it, and
each `docker compose run` line of its comments and of the README, is a real
command whose options the CLI accepts, with the environment the service gives it;
the URLs point at the compose services; only loopback ports are published."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
import yaml

from trawler.cli import app

ROOT = Path(__file__).resolve().parents[2]
TRAWLER_SERVICES = ("worker", "serve")
# ${NAME}, ${NAME:-default}, ${NAME:?error} (the compose specification's interpolation)
VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")
RUN_LINE = re.compile(r"docker compose run --rm (\w+) (trawler .*)$")


def interpolated(value: Any) -> Any:
    """The file as compose reads it with no variables set: defaults used, and a
    stand-in for each required one (which must say what to set)."""
    if isinstance(value, dict):
        return {key: interpolated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolated(item) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, kind, word = match.groups()
        if kind == "?":
            assert word, f"${{{name}:?}} without a message"
            return f"stand-in-{name.lower()}"
        assert kind == "-", f"${{{name}}} has no default"
        return word

    return VARIABLE.sub(substitute, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    return interpolated(yaml.safe_load((ROOT / "compose.yaml").read_text()))


def parsed(argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The click context of ``argv`` (``trawler …``) as the CLI would parse it in a
    process with ``env``: unknown options, bad values and missing required options
    (--redis from TRAWLER_REDIS, say) raise click's errors (Typer's vendored click:
    ``typer.TyperException``)."""
    assert argv[0] == "trawler", argv
    for name in ("TRAWLER_REDIS", "TRAWLER_POSTGRES", "TRAWLER_TOKEN", "TRAWLER_DATA"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    command = typer.main.get_command(app)
    args = list(argv[1:])
    while hasattr(command, "commands"):  # a group: `trawler services up`, say
        name = args.pop(0)
        assert name in command.commands, f"no command trawler … {name}"
        command = command.commands[name]
    # Resilient parsing off, callbacks run: check_redis_url and the like judge the URLs.
    return command.make_context(" ".join(argv[:2]), args)


def test_every_trawler_service_runs_a_real_command(
    compose: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = compose["services"]
    assert set(services) == {"redis", "postgres", *TRAWLER_SERVICES}
    for name in TRAWLER_SERVICES:
        service = services[name]
        assert service["build"] == "." and (ROOT / "Dockerfile").is_file()
        ctx = parsed(service["command"], service["environment"], monkeypatch)
        assert ctx.params["redis"] and ctx.params["postgres"], name  # the distributed mode
    worker = parsed(services["worker"]["command"], services["worker"]["environment"], monkeypatch)
    assert worker.params["warc_dir"] == Path("/data/warc")
    assert any(v.endswith(":/data/warc") for v in services["worker"]["volumes"])
    assert int(services["worker"]["deploy"]["replicas"]) >= 2


def test_the_checker_rejects_a_wrong_command(
    compose: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: a misspelt option, a missing URL, a bad URL."""
    env = compose["services"]["worker"]["environment"]

    def rejected(argv: list[str], env: dict[str, str]) -> str:
        with pytest.raises(typer.TyperException) as caught:
            parsed(argv, env, monkeypatch)
        return caught.value.format_message()

    assert "No such option: --warc-dirr" in rejected(
        ["trawler", "worker", "--warc-dirr", "/data/warc"], env
    )
    assert "Missing option '--redis'" in rejected(["trawler", "worker"], {})
    assert "is not a Redis URL" in rejected(
        ["trawler", "worker"], {**env, "TRAWLER_REDIS": "http://redis/"}
    )
    with pytest.raises(AssertionError, match="no command"):
        parsed(["trawler", "wroker"], env, monkeypatch)


def test_serve_listens_for_the_published_port_with_a_token(
    compose: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve = compose["services"]["serve"]
    ctx = parsed(serve["command"], serve["environment"], monkeypatch)
    # `trawler serve` refuses a non-loopback address without a token (cli_serve.py).
    assert ctx.params["host"] == "0.0.0.0" and len(ctx.params["token"]) >= 8
    raw = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert ":?" in raw["services"]["serve"]["environment"]["TRAWLER_TOKEN"]  # never a default
    assert serve["ports"] == [f"127.0.0.1:8080:{ctx.params['port']}"]


def test_urls_name_the_compose_servers(compose: dict) -> None:
    services = compose["services"]
    for name in TRAWLER_SERVICES:
        env = services[name]["environment"]
        redis, postgres = urlsplit(env["TRAWLER_REDIS"]), urlsplit(env["TRAWLER_POSTGRES"])
        assert (redis.hostname, redis.port) == ("redis", 6379)
        pg_env = services["postgres"]["environment"]
        assert (postgres.hostname, postgres.port) == ("postgres", 5432)
        assert (postgres.username, postgres.password, postgres.path) == (
            pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], f"/{pg_env['POSTGRES_DB']}"
        )  # fmt: skip
        for server in ("redis", "postgres"):  # started, and answering, before the workers
            assert services[name]["depends_on"][server] == {"condition": "service_healthy"}
            assert services[server]["healthcheck"]["test"][0] == "CMD"
    assert "--appendonly" in services["redis"]["command"]


def test_only_loopback_ports_are_published(compose: dict) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
    assert "ports" not in compose["services"]["redis"]
    assert "ports" not in compose["services"]["postgres"]


def test_documented_run_lines_are_real_commands(
    compose: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        match for path in ("compose.yaml", "README.md")
        for line in (ROOT / path).read_text().splitlines()
        if (match := RUN_LINE.search(line.lstrip("# ")))
    ]  # fmt: skip
    assert len(lines) >= 2
    for match in lines:
        service = compose["services"][match[1]]
        parsed(shlex.split(match[2]), service["environment"], monkeypatch)


def test_the_dockerfile_copies_what_exists() -> None:
    text = (ROOT / "Dockerfile").read_text()
    copied = [word for line in text.splitlines() if line.startswith("COPY ")
              for word in line.split()[1:-1]]  # fmt: skip
    assert "pyproject.toml" in copied and "trawler" in copied
    assert all((ROOT / source).exists() for source in copied), copied
    assert "pip install" in text and "USER trawler" in text  # not root in the container
