"""End-to-end: `trawler crawl` through a hostile web, checked from the export and
the server's access log.

One crawl covers every host of tests/e2e/hostile_server.py at once (a module
fixture), so each test below is one question about that crawl: did it end in
bounded time, did each hostile URL get a clear recorded error or the right
handling, and was every ordinary ("canary") page still fetched and stored
exactly once. Small caps and waits (``--timeout``, ``--max-bytes``,
``--robots-retry-wait``) keep the whole crawl to a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import hostile_server as hs
from tests.e2e.backends import BACKENDS, CrawlBackend, close_backend, open_backend
from trawler.parse import parse_html
from trawler.urls import Normaliser

TIMEOUT_S = 2.0  # --timeout: trickle and stall must end as "timeout" this fast
MAX_BYTES = 2_000_000  # --max-bytes: the 100,000-link page (1.7 MB) fits, 3 MB does not
MAX_LINKS = 100  # --max-links-per-page
MAX_ATTEMPTS = 2  # --max-attempts: timeouts, closed connections and 5xx are tried twice
ROBOTS_RETRY_WAITS_S = (0.5, 1.0, 1.5)  # --robots-retry-wait: short, but the real schedule
CRAWL_BUDGET_S = 45.0  # the slowest host needs ~5 s; the rest is headroom for a busy box
UNAVAILABLE_ROBOTS = ("robots-5xx", "robots-timeout")  # hosts whose pages are never fetched
# Retried up to MAX_ATTEMPTS times by the engine; every other URL is asked for once.
TRANSIENT = {"/trickle", "/stall", "/http-500", "/close-mid-body", "/close-mid-chunk",
             "/close-before-headers"}  # fmt: skip

# Hostile URL → (status, error) as exported. status None: no response at all.
EXPECTED_ERRORS = {
    ("pages", "/too-large"): (200, "too_large"),
    ("pages", "/endless"): (200, "too_large"),
    ("pages", "/gzip-bomb"): (200, "too_large"),
    ("pages", "/br-bomb"): (200, "too_large"),
    ("pages", "/deflate-bomb"): (200, "too_large"),
    ("pages", "/trickle"): (200, "timeout"),
    ("pages", "/stall"): (None, "timeout"),
    ("pages", "/wrong-type"): (200, "not_html"),
    ("pages", "/http-500"): (500, "http_500"),
    ("redirects", "/loop/a"): (302, "redirect_loop"),
    ("redirects", "/self"): (301, "redirect_loop"),
    ("redirects", "/to-empty"): (302, "redirect_loop"),
    ("redirects", "/chain7/7"): (302, "too_many_redirects"),
    ("redirects", "/to-ftp"): (302, "bad_redirect"),
    ("redirects", "/to-javascript"): (302, "bad_redirect"),
    ("redirects", "/to-mailto"): (302, "bad_redirect"),
    # Another loopback address, not a seed: refused by scope before any connection.
    ("redirects", "/to-unserved-loopback"): (302, "out_of_scope"),
    ("redirects", "/no-location"): (302, "http_302"),
    ("http10", "/close-mid-body"): (200, "connection_closed"),
    ("http10", "/close-mid-chunk"): (200, "connection_closed"),
    ("http10", "/close-before-headers"): (None, "connection_closed"),
    ("http10", "/garbage-status"): (None, "http_error"),
}

# Pages that must be stored with no error and this title.
EXPECTED_TITLES = {
    ("pages", "/malformed"): "Broken page",
    ("pages", "/gzip-ok"): "gzipped",
    ("http10", "/no-content-type"): "no type",  # sniffed as HTML (WHATWG MIME Sniffing §7.1)
    # A wrong transport charset wins, as in browsers: replacement characters or mojibake.
    ("charset", "/header-utf8-body-cp1252"): "Caf\ufffd cr\ufffdme",
    ("charset", "/header-latin1-body-utf8"): "CafÃ© crÃ¨me",
    # An unknown label is ignored and the body is sniffed.
    ("charset", "/unknown-charset-utf8"): "Café crème",
    ("charset", "/unknown-charset-cp1252"): "Café crème",
    ("charset", "/mixed-encodings"): "Café crème",
    ("charset", "/meta-shift-jis"): "日本語のページ",
    ("charset", "/utf16-bom"): "Café crème",
    ("links", "/many"): "many links",
    ("redirects", "/chain5/5"): "end of chain",
}

# Ordinary pages reached through hostile ones: they must all be fetched too.
EXTRA_CANARIES = {
    "pages": ["/canary/from-malformed-1", "/canary/from-malformed-2"],
    "links": [
        "/canary/dotdot",  # "../../../../canary/dotdot" from /odd/deep/: ".." stops at the root
        "/canary/with%20space",
        "/canary/%C3%BCn%C3%AFc%C3%B6d%C3%A9?q=%C3%BC",
        "/canary/~tilde",  # %7E is an unreserved character: decoded (RFC 3986 §6.2.2.2)
        *(f"/m/{i}" for i in range(MAX_LINKS)),
    ],
    "http10": ["/canary/sniffed"],
}
IDN_LINKS = {  # on /odd/deep/links: other hosts, so out of scope (and no DNS here)
    "http://bücher.example/": "http://xn--bcher-kva.example/",
    "http://xn--caf-dma.example/x": "http://xn--caf-dma.example/x",
    "http://☃.example/snow": "http://xn--n3h.example/snow",
}


@dataclass
class Hostile:
    bases: dict[str, str]  # role → "http://127.0.77.n:port"
    log_path: Path
    process: subprocess.Popen[str]

    def url(self, role: str, path: str) -> str:
        return self.bases[role] + path

    def requests(self) -> Counter[str]:
        """How often each URL was asked for, by the server's own log."""
        lines = self.log_path.read_text().splitlines()
        return Counter(f"http://{e['host']}{e['path']}" for e in map(json.loads, lines))

    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]


@dataclass
class Crawled:
    site: Hostile
    stderr: str  # of `trawler crawl`, or of submit and the workers
    elapsed_s: float
    exported: list[dict]  # `trawler export --format jsonl --include-noindex`
    stats: dict
    requests: Counter[str]

    @property
    def rows(self) -> dict[str, dict]:
        return {row["url"]: row for row in self.exported}

    def row(self, role: str, path: str) -> dict:
        url = self.site.url(role, path)
        assert url in self.rows, f"{url} was not stored"
        return self.rows[url]


def start_hostile(tmp: Path) -> Hostile:
    log_path = tmp / "access.jsonl"
    cmd = [sys.executable, "-m", "tests.e2e.hostile_server", "--port", "0",
           "--access-log", str(log_path)]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    bases = {}
    for line in process.stdout:  # the server builds its bombs first: a second or two
        if line.strip() == "ready":
            break
        role, base = line.split()
        bases[role] = base.rstrip("/")
    else:
        raise RuntimeError("hostile server did not start")
    return Hostile(bases, log_path, process)


def stop(site: Hostile) -> None:
    site.process.terminate()
    try:
        site.process.wait(10)
    except subprocess.TimeoutExpired:
        site.process.kill()
        site.process.wait()


def crawl(site: Hostile, backend: CrawlBackend, roles: list[str], timeout_s: float) -> Crawled:
    seeds = [site.url(role, "/") for role in roles]
    robots_waits = [
        arg for wait in ROBOTS_RETRY_WAITS_S for arg in ("--robots-retry-wait", str(wait))
    ]
    started = time.monotonic()
    done = backend.crawl(
        seeds, "--delay", "0", "--timeout", str(TIMEOUT_S), "--max-bytes", str(MAX_BYTES),
        "--max-links-per-page", str(MAX_LINKS), "--max-attempts", str(MAX_ATTEMPTS),
        *robots_waits, timeout_s=timeout_s,
    )  # fmt: skip
    elapsed_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    return Crawled(site, done.stderr, elapsed_s, done.export(), done.stats(), site.requests())


@pytest.fixture(scope="module", params=BACKENDS)
def crawled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Crawled]:
    """One crawl of every hostile host, by `trawler crawl` or by two workers."""
    tmp = tmp_path_factory.mktemp("hostile")
    site = start_hostile(tmp)
    backend = open_backend(request, request.param, tmp)
    try:
        yield crawl(site, backend, list(hs.ROLES), timeout_s=CRAWL_BUDGET_S + 30)
    finally:
        close_backend(backend)
        stop(site)


# --- the crawl as a whole ------------------------------------------------------------


def test_crawl_ends_in_bounded_time(crawled: Crawled) -> None:
    assert crawled.elapsed_s < CRAWL_BUDGET_S, crawled.elapsed_s
    assert crawled.stats["job"]["state"] == "finished"
    assert crawled.stats["urls_queued"] == 0
    assert "Traceback" not in crawled.stderr


def test_every_canary_fetched_and_stored_exactly_once(crawled: Crawled) -> None:
    roles = [role for role in hs.ROLES if role not in UNAVAILABLE_ROBOTS]
    expected = [crawled.site.url(role, "/") for role in roles]
    for role in roles:
        paths = [*hs.CANARIES, *EXTRA_CANARIES.get(role, [])]
        expected += [crawled.site.url(role, path) for path in paths]
    missing = [url for url in expected if url not in crawled.rows]
    assert not missing
    for url in expected:
        row = crawled.rows[url]
        assert (row["status"], row["error"]) == (200, None), row
        assert crawled.requests[url] == 1, url


def test_each_url_requested_once_or_retried_after_a_pause(crawled: Crawled) -> None:
    """No hidden client retries (aiohttp resends on a closed connection unless told
    not to): only the engine's, after its back-off."""
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for entry in crawled.site.log():
        times[entry["host"], entry["path"]].append(entry["t"])
    unavailable = {crawled.site.bases[role].removeprefix("http://") for role in UNAVAILABLE_ROBOTS}
    for (host, path), ts in times.items():
        if path == "/robots.txt" and host in unavailable:
            continue  # retried on its own schedule: see the robots.txt tests
        if path in TRANSIENT:
            assert len(ts) == MAX_ATTEMPTS and ts[1] - ts[0] > 0.5, (host, path, ts)
        else:
            assert len(ts) == 1, (host, path, ts)


def test_every_url_stored_once(crawled: Crawled) -> None:
    urls = [row["url"] for row in crawled.exported]
    assert len(urls) == len(set(urls)) == crawled.stats["pages_stored"]


# --- hostile URLs: a clear recorded error ------------------------------------------


@pytest.mark.parametrize(("role", "path"), sorted(EXPECTED_ERRORS))
def test_hostile_url_recorded_with_error(crawled: Crawled, role: str, path: str) -> None:
    row = crawled.row(role, path)
    assert (row["status"], row["error"]) == EXPECTED_ERRORS[role, path], row


def test_slow_and_endless_bodies_cost_bounded_time(crawled: Crawled) -> None:
    for path in ("/trickle", "/stall", "/endless", "/gzip-bomb", "/br-bomb", "/too-large"):
        duration = crawled.row("pages", path)["fetch_duration_s"]
        assert duration < TIMEOUT_S + 1.0, (path, duration)


def test_too_many_redirects_stops_after_five_hops(crawled: Crawled) -> None:
    row = crawled.row("redirects", "/chain7/7")
    assert row["final_url"] == crawled.site.url("redirects", "/chain7/2")  # 5 hops followed
    hops = [u for u in crawled.requests if "/chain7/" in u]
    assert len(hops) == 6  # /chain7/7 .. /chain7/2; the sixth redirect is not followed


# --- hostile URLs: handled correctly ------------------------------------------------


@pytest.mark.parametrize(("role", "path"), sorted(EXPECTED_TITLES))
def test_page_stored_with_title(crawled: Crawled, role: str, path: str) -> None:
    row = crawled.row(role, path)
    assert (row["status"], row["error"]) == (200, None), row
    assert row["title"] == EXPECTED_TITLES[role, path]


def test_malformed_html_still_yields_links(crawled: Crawled) -> None:
    assert crawled.row("pages", "/malformed")["links_count"] == 2


def test_links_per_page_capped(crawled: Crawled) -> None:
    assert crawled.row("links", "/many")["links_count"] == MAX_LINKS
    fetched = {u for u in crawled.requests if u.startswith(crawled.site.url("links", "/m/"))}
    assert fetched == {crawled.site.url("links", f"/m/{i}") for i in range(MAX_LINKS)}


def test_redirect_chain_of_five_is_followed(crawled: Crawled) -> None:
    row = crawled.row("redirects", "/chain5/5")
    assert row["final_url"] == crawled.site.url("redirects", "/chain5/0")


def test_cross_host_redirect_loop_ends(crawled: Crawled) -> None:
    there, back = (
        crawled.site.url("redirects2", "/cross-back"),
        crawled.site.url("redirects", "/cross"),
    )
    first, second = crawled.rows[back], crawled.rows[there]
    assert (first["status"], first["final_url"], first["error"]) == (302, there, None)
    assert (second["status"], second["final_url"], second["error"]) == (302, back, None)


def test_redirect_loop_between_linked_urls_ends(crawled: Crawled) -> None:
    # Both ends are known URLs, so neither redirect is followed inline: each is
    # stored with its 3xx and the other as final_url, and the crawl moves on.
    a, b = crawled.row("redirects", "/loop2/a"), crawled.row("redirects", "/loop2/b")
    assert (a["status"], a["final_url"], a["error"]) == (302, b["url"], None)
    assert (b["status"], b["final_url"], b["error"]) == (302, a["url"], None)


def test_empty_200_stored_with_length_0(crawled: Crawled) -> None:
    row = crawled.row("pages", "/empty")
    assert (row["status"], row["error"], row["content_length"]) == (200, None, 0)


def test_binary_labelled_html_stored_without_error(crawled: Crawled) -> None:
    row = crawled.row("pages", "/binary-as-html")
    assert (row["status"], row["error"], row["links_count"]) == (200, None, 0)
    assert row["content_length"] > 20_000


def test_http10_without_keep_alive(crawled: Crawled) -> None:
    home = crawled.row("http10", "/")
    assert (home["status"], home["error"], home["title"]) == (200, None, "home of http10")


# --- odd links -----------------------------------------------------------------------


def test_idn_links_normalised_to_punycode_and_left_out_of_scope(crawled: Crawled) -> None:
    normalise = Normaliser()
    body = hs.page("odd links", *IDN_LINKS)
    links = parse_html(body, crawled.site.url("links", "/odd/deep/links")).links
    assert [normalise(link.url) for link in links] == list(IDN_LINKS.values())
    assert crawled.stats["counters"]["rejected.out_of_scope"] == len(IDN_LINKS)
    assert not [u for u in crawled.requests if "xn--" in u]


# --- robots.txt ----------------------------------------------------------------------


def test_huge_robots_txt_first_512_kib_obeyed(crawled: Crawled) -> None:
    # RFC 9309 §2.5: at least the first 500 KiB are parsed. The file is ~600 KiB:
    # "Disallow: /early/" is at the start, "Disallow: /late/" past the cut.
    assert crawled.site.url("robots-huge", "/early/secret") not in crawled.requests
    assert crawled.site.url("robots-huge", "/early/secret") not in crawled.rows
    assert crawled.requests[crawled.site.url("robots-huge", "/robots.txt")] == 1


def test_binary_robots_txt_rules_between_the_noise_obeyed(crawled: Crawled) -> None:
    assert crawled.site.url("robots-binary", "/bin-secret") not in crawled.requests
    assert crawled.requests[crawled.site.url("robots-binary", "/robots.txt")] == 1


@pytest.mark.parametrize("role", ["robots-loop", "robots-chain"])
def test_robots_txt_redirect_trouble_means_allow_all(crawled: Crawled, role: str) -> None:
    # RFC 9309 §2.3.1.2: past five redirects (or in a loop) robots.txt MAY be
    # taken as unavailable, i.e. no restrictions: the host's pages are crawled.
    for path in ("/", *hs.CANARIES):
        assert crawled.row(role, path)["error"] is None


@pytest.mark.parametrize("role", UNAVAILABLE_ROBOTS)
def test_unavailable_robots_txt_disallows_the_host(crawled: Crawled, role: str) -> None:
    # RFC 9309 §2.3.1.4: 5xx or no answer means complete disallow. robots.txt is
    # tried again after each --robots-retry-wait, then the host's URLs are given up.
    host = crawled.site.bases[role].removeprefix("http://")
    entries = [e for e in crawled.site.log() if e["host"] == host]
    assert [e["path"] for e in entries] == ["/robots.txt"] * (1 + len(ROBOTS_RETRY_WAITS_S))
    gaps = [b["t"] - a["t"] for a, b in zip(entries, entries[1:], strict=False)]
    assert all(gap >= wait for gap, wait in zip(gaps, ROBOTS_RETRY_WAITS_S, strict=True)), gaps
    assert crawled.site.url(role, "/") not in crawled.rows
    # Each such host's home page (and its /sitemap.xml, if sitemaps are read) is skipped.
    assert crawled.stats["skipped"]["robots_unavailable"] >= len(UNAVAILABLE_ROBOTS)
