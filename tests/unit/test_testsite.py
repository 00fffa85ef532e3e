"""The generated test web: pure Site properties, and the real server over loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import aiohttp
import pytest
from aiohttp import web

from trawler.sitegen import Site, SiteSpec
from trawler.testsite import TestSite

# Never a proxy: everything here is loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def _normalise(url: str) -> str:
    """Just enough normalisation to check the site's stated link targets."""
    parts = urlsplit(url)
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.startswith("utm_") and k != "fbclid"
    )
    path = parts.path or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, urlencode(query), ""))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], Path]]:
    """``python -m trawler.testsite`` as its own process, on a free port."""
    log = tmp_path_factory.mktemp("testsite") / "access.jsonl"
    args = ["--hosts", "3", "--pages", "10", "--port", "0", "--access-log", str(log)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "trawler.testsite", *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    seeds = []
    for line in proc.stdout:  # ends at EOF if the server dies; the test timeout bounds it
        if line.strip() == "ready":
            break
        seeds.append(line.strip())
    try:
        assert len(seeds) == 3, "server did not start"
        yield seeds, log
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def _site_for(seeds: list[str]) -> Site:
    port = int(urlsplit(seeds[0]).port or 0)
    return Site(SiteSpec(hosts=3, pages=10, port=port))


def test_server_prints_one_seed_per_host_address(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    hosts = [urlsplit(s).hostname for s in seeds]
    assert hosts == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
    assert all(s.endswith("/") for s in seeds)


def test_robots_txt_per_host(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    for seed in seeds:
        status, content_type, body = _get(seed + "robots.txt")
        text = body.decode()
        assert status == 200 and content_type.startswith("text/plain")
        assert "User-agent: *\nDisallow: /private/" in text
        assert f"Sitemap: {seed}sitemap.xml" in text
        assert "Crawl-delay" not in text  # off by default: tests stay fast


def test_sitemap_lists_pages_that_are_served(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    status, content_type, body = _get(seeds[1] + "sitemap.xml")
    assert status == 200 and content_type == "application/xml"
    locs = [
        line.split("<loc>")[1].split("</loc>")[0]
        for line in body.decode().splitlines()
        if "<loc>" in line
    ]
    assert seeds[1] in locs and f"{seeds[1]}p/9.html" in locs
    assert all(loc.startswith(seeds[1]) for loc in locs)
    assert _get(f"{seeds[1]}p/9.html")[0] == 200


def test_served_bytes_equal_the_pure_site(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    site = _site_for(seeds)
    for path in ["/", "/p/3.html", "/list.html?page=2&sort=asc", "/files/0.pdf", "/files/1.jpg"]:
        expected = site.page(2, path)
        assert expected is not None
        assert _get(seeds[2].rstrip("/") + path) == tuple(expected)
    assert _get(seeds[0] + "files/0.pdf")[1] == "application/pdf"
    assert _get(seeds[0] + "files/1.jpg")[1] == "image/jpeg"


def test_unknown_paths_are_404(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    for path in ["nothing", "p/10.html", "p/03.html", "list.html", "list/1.html", "files/0.jpg"]:
        assert _get(seeds[0] + path)[0] == 404, path


def test_host_comes_from_the_socket_not_the_host_header(server: tuple[list[str], Path]) -> None:
    seeds, _ = server
    netloc0 = urlsplit(seeds[0]).netloc
    _, _, body = _get(seeds[1] + "robots.txt", headers={"Host": netloc0})
    assert f"Sitemap: {seeds[1]}sitemap.xml" in body.decode()


def test_access_log_records_each_request_at_arrival(server: tuple[list[str], Path]) -> None:
    seeds, log = server
    before = time.time()
    _get(seeds[2] + "p/1.html?utm_source=x", headers={"User-Agent": "LogProbe/1"})
    _get(seeds[2] + "missing", headers={"User-Agent": "LogProbe/1"})
    after = time.time()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [e for e in entries if e["ua"] == "LogProbe/1"]
    assert [(e["path"], e["status"]) for e in mine] == [
        ("/p/1.html?utm_source=x", 200),
        ("/missing", 404),
    ]
    assert all(e["host"] == urlsplit(seeds[2]).netloc for e in mine)
    assert all(before <= e["t"] <= after for e in mine)
    assert mine[0]["t"] <= mine[1]["t"]


async def test_in_process_server_with_a_special_path(tmp_path: Path) -> None:
    async def slow(request: web.Request, host: int) -> web.StreamResponse:
        return web.Response(text=f"special on host {host}")

    test_site = TestSite(SiteSpec(hosts=2, pages=3, port=0), tmp_path / "log", {"/slow": slow})
    async with test_site as site, aiohttp.ClientSession() as session:
        async with session.get(site.seeds()[1] + "slow") as response:
            assert await response.text() == "special on host 1"
        async with session.get(site.seeds()[0] + "p/2.html") as response:
            assert response.status == 200
            assert "<title>Host 0 p 2:" in await response.text()
    assert len((tmp_path / "log").read_text().splitlines()) == 2


def test_same_seed_same_web_other_seed_other_text() -> None:
    spec = SiteSpec(hosts=4, pages=15, seed=7)
    a, b, other = Site(spec), Site(spec), Site(SiteSpec(hosts=4, pages=15, seed=8))
    for i in range(4):
        for path in a.paths(i):
            assert a.page(i, path) == b.page(i, path)
    assert a.page(1, "/p/5.html") != other.page(1, "/p/5.html")


def test_every_href_resolves_to_its_stated_target() -> None:
    site = Site(SiteSpec(hosts=4, pages=30, disallow_fraction=0.5))
    kinds = set()
    for i in range(4):
        for path in site.paths(i):
            for link in site.links(i, path):
                if link.target is None:
                    assert link.href.split(":")[0] in {"mailto", "javascript", "tel"}
                    continue
                assert _normalise(urljoin(site.base(i) + path, link.href)) == link.target
                assert site.page(*_host_path(site, link.target)) is not None, link.target
                kinds.add(link.href.split("/")[0])
    assert {"", "HTTP:", "..", "."} <= kinds  # root-relative, absolute, dot forms


def _host_path(site: Site, url: str) -> tuple[int, str]:
    parts = urlsplit(url)
    i = site.host_index(parts.netloc)
    assert i is not None
    return i, parts.path + ("?" + parts.query if parts.query else "")


def test_reachable_has_no_forbidden_url_and_several_depths() -> None:
    site = Site(SiteSpec(hosts=5, pages=20))
    reach = site.reachable(site.seeds(1))
    assert not set(reach) & site.forbidden()
    assert not any(site.is_forbidden(url) for url in reach)
    assert set(reach.values()) == {0, 1, 2, 3, 4}
    base = site.base(0)
    assert reach[base + "/"] == 0 and reach[base + "/p/0.html"] == 1
    assert reach[base + "/p/18.html"] == 4  # heap depth floor(log2(18 + 2))
    assert reach[base + "/list.html?page=3&sort=asc"] == 3
    assert base + "/files/1.jpg" in reach
    assert all(url.startswith(base) for url in reach)  # scope "host"


def test_reachable_respects_depth_scope_and_robots() -> None:
    site = Site(SiteSpec(hosts=5, pages=20, disallow_fraction=0.8))
    open_hosts = [i for i in range(5) if not site.disallows_private(i)]
    assert open_hosts == [4]
    shallow = site.reachable(site.seeds(1), max_depth=1)
    assert max(shallow.values()) == 1 and len(shallow) < len(site.reachable(site.seeds(1)))
    anywhere = site.reachable(site.seeds(1), scope="any")
    assert {site.host_index(urlsplit(u).netloc) for u in anywhere} == set(range(5))
    assert site.base(4) + "/private/0.html" in anywhere  # host 4's robots allow it
    assert not set(anywhere) & site.forbidden()
    assert site.is_forbidden(site.base(0) + "/private/1.html?utm_source=x")
    assert site.is_forbidden(site.base(3) + "/nofollow/0.html#x")
    assert not site.is_forbidden(site.base(4) + "/private/1.html")


def test_crawl_delay_is_a_spec_option() -> None:
    site = Site(SiteSpec(hosts=3, crawl_delay_hosts=1, crawl_delay_s=0.5))
    assert "Crawl-delay: 0.5" in site.robots(0)
    assert "Crawl-delay" not in site.robots(1)


def test_host_addresses_skip_zero_and_broadcast_octets() -> None:
    site = Site(SiteSpec(hosts=600, pages=1))
    addresses = [site.address(i) for i in range(600)]
    assert len(set(addresses)) == 600
    assert addresses[0] == "127.0.1.1" and addresses[250] == "127.0.2.1"
    assert all(a.rsplit(".", 1)[1] not in {"0", "255"} for a in addresses)
