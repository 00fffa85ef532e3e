"""The robots.txt product token, seen from the server: the group a crawl obeys is the
one naming the product in its User-Agent (or --robots-agent), embedded and distributed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.backends import CrawlBackend
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from tests.e2e.scripted import Scripted, page, start_scripted

MOZILLA_UA = "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.org/bot)"
OTHER_UA = "Mozilla/5.0 (compatible; OtherBot/1.0; +https://example.org/other)"
ROBOTS = page("User-agent: MyBot\nDisallow: /\n", **{"Content-Type": "text/plain"})
HOME = '<html><body><a href="/a">a</a> <a href="/b">b</a></body></html>'


@pytest.fixture
def mybot_site(tmp_path: Path) -> Iterator[Scripted]:
    script = {"0": {"/robots.txt": ROBOTS, "/": page(HOME), "/a": page("a"), "/b": page("b")}}
    server = start_scripted(tmp_path, script)
    yield server
    server.stop()


def crawl(backend: CrawlBackend, server: Scripted, *args: str) -> None:
    crawled = backend.crawl([server.bases[0] + "/"], "--delay", "0", "--no-sitemaps", *args)
    assert crawled.returncode == 0, crawled.stderr


def test_compatible_product_in_mozilla_ua_obeys_its_group(
    crawl_backend: CrawlBackend, mybot_site: Scripted
) -> None:
    crawl(crawl_backend, mybot_site, "--user-agent", MOZILLA_UA)
    assert mybot_site.paths() == ["/robots.txt"]
    assert {e["ua"] for e in mybot_site.log()} == {MOZILLA_UA}  # the header is unchanged
    # The same site crawled as another product is fetched: the check above can fail.
    crawl(crawl_backend, mybot_site, "--user-agent", OTHER_UA)
    assert {"/", "/a", "/b"} <= set(mybot_site.paths())


def test_robots_agent_option_sets_the_token(
    crawl_backend: CrawlBackend, mybot_site: Scripted
) -> None:
    crawl(crawl_backend, mybot_site, "--user-agent", OTHER_UA, "--robots-agent", "MyBot")
    assert mybot_site.paths() == ["/robots.txt"]
    assert {e["ua"] for e in mybot_site.log()} == {OTHER_UA}


# Embedded only: a job resumed from its data directory (`trawler crawl --data`).
def test_robots_agent_kept_for_a_resumed_job(mybot_site: Scripted, tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = run_trawler("crawl", mybot_site.bases[0] + "/", "--data", str(data), "--allow-private",
                      "--delay", "0", "-q", "--no-sitemaps", "--user-agent", OTHER_UA,
                      "--robots-agent", "mybot")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert mybot_site.paths() == ["/robots.txt"]
    # The token goes into the stored job, used again on resume.
    out = run_trawler("jobs", "list", "--data", str(data), "--json")
    assert json.loads(out.stdout)["jobs"][0]["options"]["robots_agent"] == "mybot"
    again = run_trawler("crawl", "--data", str(data), "--user-agent", OTHER_UA)
    assert again.returncode == 0 and "already finished" in again.stdout
    assert mybot_site.paths() == ["/robots.txt"]


# Not crawls: `trawler robots` and the option checks.
def test_robots_command_shows_the_token(mybot_site: Scripted) -> None:
    url = mybot_site.bases[0] + "/a"
    out = run_trawler("robots", url, "--allow-private", "--agent", MOZILLA_UA, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["robots_token"] == "mybot" and report["allowed"] is False
    assert report["group"] == "MyBot"
    out = run_trawler("robots", url, "--allow-private", "--robots-agent", "OtherBot")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ALLOWED")
    assert "robots token: otherbot (--robots-agent)" in out.stdout.splitlines()
    text = run_trawler("robots", url, "--allow-private", "--agent", MOZILLA_UA).stdout
    assert "robots token: mybot (from the User-Agent)" in text.splitlines()


@pytest.mark.parametrize("token", ["My Bot", "MyBot/1.0", "bot2", "", "ツbot"])
def test_bad_robots_agent_is_a_bad_option(token: str, tmp_path: Path) -> None:
    seed = "http://127.0.0.1:9/"
    for args in (
        ("crawl", seed, "--data", str(tmp_path / "d"), "--robots-agent", token),
        ("robots", seed, "--robots-agent", token),
        ("submit", seed, "--redis", "redis://127.0.0.1:9/0", "--postgres",
         "postgresql://127.0.0.1:9/x", "--robots-agent", token),
    ):  # fmt: skip
        line = assert_one_line_error(run_trawler(*args), 2)
        assert "invalid --robots-agent" in line and "product token" in line, line


def test_bad_robots_agent_from_environment(tmp_path: Path) -> None:
    env = {"TRAWLER_ROBOTS_AGENT": "not a token", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "trawler", "robots", "http://127.0.0.1:9/"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert "invalid --robots-agent" in assert_one_line_error(out, 2)
