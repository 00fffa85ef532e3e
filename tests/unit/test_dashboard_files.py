"""The dashboard's files: served at / and /static without a token, with the
Content-Security-Policy and no-cache headers, outside the OpenAPI; and shipped in
the wheel (built offline from a copy of the tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from trawler.api.app import create_app
from trawler.api.dashboard import STATIC_DIR, mount_dashboard
from trawler.api.datadir import DataDirJobs
from trawler.api.deps import ApiSettings

ROOT = Path(__file__).resolve().parents[2]


def client(tmp_path: Path) -> TestClient:
    return TestClient(create_app(DataDirJobs(tmp_path), ApiSettings("token-123")))


def test_the_page_is_served_without_a_token_under_a_strict_policy(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        page = api.get("/")
        assert page.status_code == 200, page.text
        assert page.headers["content-type"].startswith("text/html")
        assert page.content == (STATIC_DIR / "index.html").read_bytes()
        policy = page.headers["content-security-policy"]
        assert policy.startswith("default-src 'self';") and "unsafe-inline" not in policy
        assert page.headers["cache-control"] == "no-cache"
        assert api.get("/api/v1/jobs").status_code == 401  # the API still wants its token


def test_static_files_have_their_media_types(tmp_path: Path) -> None:
    """Over a copy of the directory with a file of each kind the page uses."""
    static = tmp_path / "static"
    shutil.copytree(STATIC_DIR, static)
    for name, body in (("probe.js", "export {};\n"), ("probe.css", "p {}\n"),
                       ("probe.svg", '<svg xmlns="http://www.w3.org/2000/svg"/>\n')):  # fmt: skip
        (static / name).write_text(body)
    (tmp_path / "secret.txt").write_text("outside")
    app = FastAPI()
    mount_dashboard(app, static)
    with TestClient(app) as api:
        answers = {name: api.get(f"/static/{name}") for name in
                   ("probe.js", "probe.css", "probe.svg", "index.html")}  # fmt: skip
        missing = api.get("/static/nothing-here.js")
        escape = api.get("/static/%2e%2e/secret.txt")
    media = {name: answer.headers["content-type"].split(";")[0] for name, answer in answers.items()}
    assert media == {"probe.js": "text/javascript", "probe.css": "text/css",
                     "probe.svg": "image/svg+xml", "index.html": "text/html"}  # fmt: skip
    assert all(answer.headers["cache-control"] == "no-cache" for answer in answers.values())
    assert answers["probe.js"].text == "export {};\n"
    assert missing.status_code == 404 and escape.status_code == 404


def test_neither_is_in_the_openapi(tmp_path: Path) -> None:
    paths = create_app(DataDirJobs(tmp_path), ApiSettings("token-123")).openapi()["paths"]
    assert "/" not in paths and not any(path.startswith("/static") for path in paths)
    assert "/api/v1/jobs" in paths  # the check reads the real schema


def test_the_wheel_ships_the_static_files(tmp_path: Path) -> None:
    """Built offline (no build isolation) from a copy: the tree is left as it was."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "trawler", tree / "trawler",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("trawler-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"trawler/api/static/{path.relative_to(STATIC_DIR).as_posix()}"
               for path in STATIC_DIR.rglob("*") if path.is_file()}  # fmt: skip
    assert "trawler/api/static/index.html" in shipped
    assert shipped <= names, sorted(shipped - names)
