"""Link-resolution benchmark: the link-extraction hot path, href → normalised URL.

    .venv/bin/python bench/bench_links.py [--pages 300] [--rev main] [--markdown]

For every page of two corpora, a resolver is built for the page URL and each
of its hrefs is resolved and normalised (what ``parse_html`` + ``LinkFilter``
do per link, without the HTML parse). Per-link µs, best of 7 rounds:

- ``docs``: the hrefs of real pages, the Python documentation that Debian's
  ``python3.11-doc`` package installs (/usr/share/doc/python3.11-doc/html),
  extracted with lexbor; mostly ``../library/x.html#anchor``. Skipped if absent.
- ``web``: generated pages shaped like crawled web pages: root-relative and
  relative links, absolute links to the same and other hosts, tracking
  parameters, fragments, ``mailto:``/``javascript:``, a few ``../``,
  scheme-relative, IDN and backslash hrefs (seeded, reproducible).

Strategies measured on this tree:

- ``shipped``: ``resolve.Resolver`` + ``urls.Normaliser`` as committed
  (concatenation and a plain-URL fast path; ada for the rest);
- ``ada-only``: every href joined by ada, every URL parsed by ada, then
  Trawler's normalisations;

and with ``--rev REV`` the same run on that git revision's tree (extracted
to a temporary directory), e.g. the code before this change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

DOCS = Path("/usr/share/doc/python3.11-doc/html")
DOCS_URL = "https://docs.python.org/3.11/"
Corpus = list[tuple[str, list[str]]]  # (page URL, hrefs)
Pipeline = Callable[[str], Callable[[str], object]]  # page URL → (href → URL or None)


def docs_corpus(pages: int) -> Corpus:
    from selectolax.lexbor import LexborHTMLParser

    corpus: Corpus = []
    for path in sorted(DOCS.rglob("*.html"))[:pages]:
        tree = LexborHTMLParser(path.read_bytes())
        hrefs = [node.attributes.get("href") or "" for node in tree.css("a[href]")]
        corpus.append((DOCS_URL + path.relative_to(DOCS).as_posix(), hrefs))
    return corpus


def _web_href(rng: random.Random, host: str) -> str:
    slug = "-".join(rng.choices(["news", "blog", "post", "item", "shop", "about"], k=2))
    roll = rng.random()
    if roll < 0.35:
        return f"/{slug}/{rng.randint(1, 9999)}"
    if roll < 0.50:
        return f"{slug}-{rng.randint(1, 99)}.html"
    if roll < 0.62:
        return f"https://{host}/{slug}?id={rng.randint(1, 999)}&utm_source=feed"
    if roll < 0.72:
        return f"https://cdn{rng.randint(1, 9)}.example.net/{slug}/"
    if roll < 0.78:
        return f"#{slug}"
    if roll < 0.82:
        return rng.choice(["mailto:info@example.com", "javascript:void(0)", "tel:+4412345"])
    if roll < 0.88:
        return f"../{slug}/index.html"
    if roll < 0.92:
        return f"//static.example.org/{slug}.css"
    if roll < 0.95:
        return f"?page={rng.randint(2, 40)}&sort=date"
    if roll < 0.97:
        return f"https://bücher.example/{slug}"
    if roll < 0.99:
        return f"\\{slug}\\{rng.randint(1, 99)}.html"
    return f"HTTP://WWW.{host.upper()}:80/{slug}/./x"


def web_corpus(pages: int, links_per_page: int = 60, seed: int = 10) -> Corpus:
    rng = random.Random(seed)
    corpus: Corpus = []
    for i in range(pages):
        host = f"www.site{i % 40}.example.com"
        page = f"https://{host}/section/{i}/article.html"
        corpus.append((page, [_web_href(rng, host) for _ in range(links_per_page)]))
    return corpus


def _pipelines() -> dict[str, Pipeline]:
    """The strategies this tree offers (the old tree has only the first)."""
    from trawler.urls import Normaliser

    normalise = Normaliser()
    try:
        from trawler.resolve import Resolver
    except ImportError:  # before this change the resolver lived in parse.py
        from trawler.parse import _Resolver as Resolver  # type: ignore[attr-defined,no-redef]

    def shipped(page: str) -> Callable[[str], object]:
        resolve = Resolver(page).resolve
        return lambda href: (url := resolve(href)) and normalise(url)

    pipelines: dict[str, Pipeline] = {"shipped": shipped}
    try:
        from trawler.resolve import whatwg_href
        from trawler.urls import _whatwg_parts
    except ImportError:  # the tree before this change
        return pipelines
    pipelines["ada-only"] = _ada_only(normalise, whatwg_href, _whatwg_parts)
    return pipelines


def _ada_only(normalise: object, whatwg_href: Callable[..., object], parts: Callable) -> Pipeline:
    """Every href through ada (no concatenation), every URL through ada."""

    def parse_everything(url: str) -> object:
        try:
            parsed = parts(url)
        except ValueError:  # a host that is no DNS name
            return None
        return parsed and normalise._finish(parsed)  # type: ignore[attr-defined]

    def pipeline(page: str) -> Callable[[str], object]:
        def one(href: str) -> object:
            if not href or href.lstrip().startswith("#"):
                return None
            joined = whatwg_href(href, page)
            return joined and parse_everything(joined)

        return one

    return pipeline


def measure(corpus: Corpus, make: Pipeline) -> tuple[float, int]:
    """Seconds for one pass over ``corpus``, and how many links came out."""
    kept = 0
    started = time.perf_counter()
    for page, hrefs in corpus:
        one = make(page)
        for href in hrefs:
            if one(href) is not None:
                kept += 1
    return time.perf_counter() - started, kept


def run(pages: int, rounds: int = 7) -> dict[str, object]:
    """Best per-link µs of ``rounds`` passes, strategies interleaved in each
    round so that load from other processes hits them alike."""
    corpora = {"web": web_corpus(pages)}
    if DOCS.is_dir():
        corpora["docs"] = docs_corpus(pages)
    pipelines = _pipelines()
    best: dict[tuple[str, str], float] = {}
    kept: dict[tuple[str, str], int] = {}
    for _ in range(rounds):
        for name, make in pipelines.items():
            for corpus_name, corpus in corpora.items():
                seconds, kept[name, corpus_name] = measure(corpus, make)
                key = (name, corpus_name)
                best[key] = min(best.get(key, float("inf")), seconds)
    rows = []
    for (name, corpus_name), seconds in best.items():
        corpus = corpora[corpus_name]
        links = sum(len(hrefs) for _, hrefs in corpus)
        differ = _differences(corpus, pipelines[name], pipelines.get("ada-only"))
        rows.append({"strategy": name, "corpus": corpus_name, "links": links,
                     "kept": kept[name, corpus_name], "differ": differ,
                     "us_per_link": round(seconds / links * 1e6, 2)})  # fmt: skip
    return {"python": platform.python_version(), "rows": rows}


def _differences(corpus: Corpus, make: Pipeline, reference: Pipeline | None) -> int | None:
    """Links whose URL differs from the all-ada pipeline's (None: no reference)."""
    if reference is None:
        return None
    return sum(
        make(page)(href) != reference(page)(href) for page, hrefs in corpus for href in hrefs
    )


def run_at_revision(rev: str, pages: int) -> dict[str, object]:
    """This benchmark run on the tree of git revision ``rev``."""
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tree}
        command = [sys.executable, __file__, "--pages", str(pages), "--json"]
        out = subprocess.run(command, env=env, cwd=tree, check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(out.stdout)
    for row in result["rows"]:  # type: ignore[attr-defined]
        row["strategy"] = f"{rev}: {row['strategy']}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300, help="pages per corpus")
    parser.add_argument("--rev", help="also run on this git revision's tree")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--markdown", action="store_true", help="print a table")
    args = parser.parse_args()
    result = run(args.pages)
    if args.rev:
        result["rows"] = run_at_revision(args.rev, args.pages)["rows"] + result["rows"]  # type: ignore[operator]
    if args.json:
        print(json.dumps(result))
        return
    print(f"CPython {result['python']}, one core, best of 7 rounds")
    print("| strategy | corpus | links | links kept | differ from ada-only | µs per link |")
    print("|---|---|---:|---:|---:|---:|")
    for row in result["rows"]:  # type: ignore[attr-defined]
        differ = "–" if row["differ"] is None else f"{row['differ']:,}"
        print(f"| {row['strategy']} | {row['corpus']} | {row['links']:,} | {row['kept']:,} "
              f"| {differ} | {row['us_per_link']} |")  # fmt: skip


if __name__ == "__main__":
    main()
