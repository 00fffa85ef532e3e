"""Provenance (issue 18): `trawler why URL` and the API's URL view say why each URL
of a small loopback site was fetched or left out, one case per reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.api_server import start_serve
from tests.e2e.backends import CrawlBackend, DistributedCrawls
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.e2e.serve_dist import start_dist_serve

HOME, ELSEWHERE, BLOCKED = 0, 1, 2  # host indexes of the scripted site
ROBOTS = "User-agent: *\n# the private part\nDisallow: /private/\n"
XML = {"Content-Type": "application/xml"}


def html(body: str, head: str = "") -> str:
    return f"<html><head><title>t</title>{head}</head><body>{body}</body></html>"


@pytest.fixture
def site(tmp_path: Path):
    home = html(
        '<a href="/about">About us</a> <a href="/private/p">Our secret</a>'
        ' <a href="http://127.0.9.2:{port}/away">Elsewhere</a>'
        ' <a href="/a/b/a/b/a/b/a/b/a/b">Loop</a> <a href="/moved">Old page</a>'
        ' <a href="/deep1">Deeper</a> <a href="http://127.0.9.3:{port}/x">Blocked one</a>'
    )
    script = {
        str(HOME): {
            "/robots.txt": page(
                ROBOTS + "Sitemap: http://127.0.9.1:{port}/sitemap.xml\n",
                **{"Content-Type": "text/plain"},
            ),  # fmt: skip
            "/": page(home),
            "/about": page(html("", '<link rel="canonical" href="/about-us">')),
            "/about-us": page(html("")),
            "/moved": page("", 301, Location="/target"),
            "/target": page(html("")),
            "/deep1": page(html('<a href="/deep2">Two</a>')),
            "/deep2": page(html('<a href="/deep3">Three</a>')),
            "/sitemap.xml": page(
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                "<url><loc>http://127.0.9.1:{port}/from-sitemap</loc></url></urlset>",
                **XML,
            ),
            "/from-sitemap": page(html("")),
        },
        str(ELSEWHERE): {"/away": page(html(""))},
        str(BLOCKED): {"/": page(html("")), "/x": page(html(""))},
    }
    server = start_scripted(tmp_path, script)
    yield server
    server.stop()


def why(source: list[str], url: str) -> dict:
    out = run_trawler("why", url, *source, "--json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def said(source: list[str], url: str, **expected: object) -> None:
    """`trawler why --json` has these values."""
    report = why(source, url)
    assert {name: report[name] for name in expected} == expected, url


def why_text(source: list[str], url: str) -> list[str]:
    out = run_trawler("why", url, *source)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def block(data: Path, domain: str) -> None:
    from trawler.jobs.embedded_controls import EmbeddedControlStore

    asyncio.run(EmbeddedControlStore(data).block(domain, "test"))


def test_why_tells_each_reason(site: Scripted, tmp_path: Path) -> None:
    base, blocked = site.bases[HOME], site.bases[BLOCKED]
    data = tmp_path / "data"
    block(data, "127.0.9.3")
    out = run_trawler("crawl", base + "/", blocked + "/", base + "/private/seed", "--data",
                      str(data), "--allow-private", "--delay", "0", "--max-depth", "2")  # fmt: skip
    assert out.returncode == 0, out.stderr
    source = ["--data", str(data)]
    fetched = set(site.paths(HOME))

    assert why_text(source, base + "/") == [
        f"{base}/: fetched (HTTP 200)", "found: it is a seed of the crawl", "depth: 0"]  # fmt: skip
    said(source, base + "/about", decision="fetched", found_via="link", parent_url=base + "/",
         anchor="About us")  # fmt: skip
    assert why_text(source, base + "/about")[1] == f'found: a link "About us" on {base}/'

    assert "/private/p" not in fetched
    rule = f'"Disallow: /private/" at line 3 of {base}/robots.txt (*)'
    said(source, base + "/private/p", decision="skipped", reason="robots", anchor="Our secret",
         detail=rule)  # fmt: skip
    assert why_text(source, base + "/private/p")[2] == f"reason: disallowed by robots.txt: {rule}"
    # A seed: robots.txt decided when its turn came.
    said(source, base + "/private/seed", decision="skipped", found_via="seed", reason="robots",
         detail=rule)  # fmt: skip

    away = site.bases[ELSEWHERE].removeprefix("http://")
    said(source, f"http://{away}/away", decision="skipped", reason="out_of_scope",
         anchor="Elsewhere", detail=f"host {away} is not a seed host (--scope host)")  # fmt: skip
    said(source, base + "/a/b/a/b/a/b/a/b/a/b", decision="skipped", reason="repeated_segments",
         detail="a path segment repeated more than 3 times in a row")  # fmt: skip

    said(source, base + "/target", decision="fetched", found_via="redirect",
         parent_url=base + "/moved")  # fmt: skip
    assert why_text(source, base + "/target")[1] == f"found: {base}/moved redirected to it"
    said(source, base + "/about-us", found_via="canonical", parent_url=base + "/about")
    said(source, base + "/from-sitemap", decision="fetched", found_via="sitemap",
         parent_url=base + "/sitemap.xml")  # fmt: skip

    assert "/deep3" not in fetched and "/deep2" in fetched
    said(source, base + "/deep3", decision="skipped", reason="max_depth", detail="--max-depth 2",
         anchor="Three")  # fmt: skip

    assert site.paths(BLOCKED) == []
    for url, via in ((blocked + "/", "seed"), (blocked + "/x", "link")):
        said(source, url, decision="skipped", found_via=via, reason="blocklist",
             detail=f"host {blocked.removeprefix('http://')} is blocked")  # fmt: skip

    never = run_trawler("why", base + "/never", *source)
    assert never.returncode == 1 and never.stdout == ""
    assert never.stderr.strip() == f"{base}/never: never seen by this crawl (no page linked to it)"
    assert_one_line_error(run_trawler("why", "mailto:x@example.com", *source), 2)
    _check_api(
        data,
        tmp_path,
        source,
        [base + "/private/p", base + "/about", base + "/target", blocked + "/x"],
    )


def _check_api(data: Path, tmp_path: Path, source: list[str], urls: list[str]) -> None:
    """The API's URL view has the same provenance as `trawler why --json`."""
    served = start_serve(data, tmp_path / "serve.log")
    try:
        with served.client() as client:
            for url in urls:
                report = client.get("/api/v1/urls", params={"url": url}).json()
                assert report["provenance"] == why(source, url), url
            unseen = client.get("/api/v1/urls", params={"url": urls[0] + "/never"}).json()
            assert unseen["provenance"] is None
    finally:
        served.stop()


def test_budgets(tmp_path: Path) -> None:
    """--max-pages-per-host leaves links out as they are found; --max-pages leaves
    queued URLs unfetched."""
    links = "".join(f'<a href="/p{i}">Page {i}</a>' for i in range(1, 6))
    server = start_scripted(tmp_path, {"0": {"/": page(html(links)), **{
        f"/p{i}": page(html("")) for i in range(1, 6)}}})  # fmt: skip
    try:
        base, data = server.bases[0], tmp_path / "data"
        out = run_trawler("crawl", base + "/", "--data", str(data), "--allow-private",
                          "--delay", "0", "--no-sitemaps", "--max-pages-per-host", "3",
                          "--max-pages", "2")  # fmt: skip
        assert out.returncode == 0, out.stderr
        source = ["--data", str(data)]
        reports = {i: why(source, f"{base}/p{i}") for i in range(1, 6)}
        assert [reports[i]["reason"] for i in (3, 4, 5)] == ["host_budget"] * 3
        assert {reports[i]["detail"] for i in (3, 4, 5)} == {"--max-pages-per-host 3"}
        assert reports[4]["anchor"] == "Page 4" and reports[4]["parent_url"] == base + "/"
        admitted = sorted((reports[i]["decision"], reports[i]["reason"]) for i in (1, 2))
        assert admitted == [("fetched", None), ("queued", "max_pages")]  # 2 pages: / and one
        assert len(server.paths()) == 3  # robots.txt, / and that one
        assert why_text(source, f"{base}/p5")[2] == (
            "reason: its host had reached its page budget: --max-pages-per-host 3"
        )
    finally:
        server.stop()


@pytest.mark.parametrize("crawl_backend", ["distributed"], indirect=True)
def test_distributed_why(crawl_backend: CrawlBackend, site: Scripted, tmp_path: Path) -> None:
    """The link, seed and robots cases from PostgreSQL, as `trawler why --postgres`."""
    base = site.bases[HOME]
    crawled = crawl_backend.crawl([base + "/", base + "/private/seed"], "--delay", "0",
                                  "--max-depth", "2")  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    source = crawled.source
    home = why(source, base + "/")
    assert (home["decision"], home["found_via"], home["depth"]) == ("fetched", "seed", 0)
    about = why(source, base + "/about")
    assert (about["found_via"], about["parent_url"], about["anchor"]) == (
        "link",
        base + "/",
        "About us",
    )
    private = why(source, base + "/private/p")
    assert (private["decision"], private["reason"]) == ("skipped", "robots")
    assert private["detail"] == f'"Disallow: /private/" at line 3 of {base}/robots.txt (*)'
    seed = why(source, base + "/private/seed")
    assert (seed["decision"], seed["found_via"], seed["reason"]) == ("skipped", "seed", "robots")
    never = run_trawler("why", base + "/never", *source)
    assert never.returncode == 1
    assert_one_line_error(run_trawler("why", base + "/", "--postgres", source[1]), 2)
    assert isinstance(crawl_backend, DistributedCrawls)
    served = start_dist_serve(tmp_path, crawl_backend.redis_url, crawl_backend.postgres_url)
    try:
        with served.client() as client:
            for url in (base + "/about", base + "/private/p", base + "/private/seed"):
                answer = client.get("/api/v1/urls", params={"url": url, "job": source[3]})
                assert answer.json()["provenance"] == why(source, url), url
    finally:
        served.stop()
