"""Near-duplicate benchmark: precision and recall on real documentation and one-word edits.

    apt-get install -y python3.11-doc postgresql-doc-15 git-doc
    .venv/bin/python bench/bench_neardup.py [--work bench/work/neardup]
        [--packages python3.11-doc postgresql-doc-15 git-doc] [--index-sizes 10000 1000000]

Without those Debian packages it says so and exits 0 (CI does not run it).

For each package, separately:

1. Serves every HTML page on loopback and, beside each, a copy with one word
   changed (``/~edited/<path>``): one word of a text node, chosen (seeded) so
   that the page's main text, as parse.py extracts it, differs by exactly that
   word. A page whose main text cannot be edited so has no copy.
2. Crawls them all with ``trawler crawl`` (seeds file, depth 0): the real
   fetch, parse, fingerprint and dedup path; reads the flags from trawler.db.
3. Ground truth from the pages' main text: the Jaccard similarity J of their
   sets of word 3-shingles. A flag is false when J < NEAR_DUPLICATE_JACCARD
   (0.9). The real pairs with J >= 0.9 are found exactly with a prefix-filter
   similarity join (Bayardo, Ma and Srikant, "Scaling up all pairs
   similarity search", WWW 2007). A pair is caught when both pages end up
   with the same original.
4. Replays the previous rule (SimHash counting every occurrence of a word
   pair, within 3 bits, not confirmed) over the same pages in the same
   order, for comparison.
5. Times the fingerprints per page (CPU, best of 3): before, ``text_hash`` and
   the SimHash of word pairs counting repeats; now, what outcome.py computes
   (``text_hash``, the distinct 3-shingles' SimHash and MinHash sketch); and,
   if ``datasketch`` is importable, its 64-permutation MinHash alone.
6. Times an index lookup: ``candidates`` (multi-probe, up to CANDIDATE_BITS)
   against the previous ``find`` (within 3 bits), at 10,000 and 1,000,000
   random fingerprints.

Prints the false flags, then Markdown tables for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from trawler.minhash import NEAR_DUPLICATE_JACCARD
from trawler.parse import parse_html
from trawler.simhash import text_hash, words
from trawler.simhash_index import SimHashIndex

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling bench modules

from neardup_costs import counted_simhash, fingerprint_costs, lookup_cost_us, shingles  # noqa: E402

PACKAGES = {
    "python3.11-doc": Path("/usr/share/doc/python3.11/html"),
    "postgresql-doc-15": Path("/usr/share/doc/postgresql-doc-15/html"),
    "git-doc": Path("/usr/share/doc/git-doc"),
}
EDITED = "/~edited"
EDIT_WORD = "zqxedited"
_TEXT_NODE = re.compile(rb">([^<]*[A-Za-z]{4}[^<]*)<")
_WORD = re.compile(rb"\b[A-Za-z]{4,}\b")


@dataclass(slots=True)
class Page:
    path: str
    body: bytes
    main_text: str  # as parse.py extracts it: what the crawl fingerprints
    main_words: list[bytes]
    edited_of: str | None = None  # for a copy: the path of its original


@dataclass(slots=True)
class Scores:
    pages: int = 0
    copies: int = 0
    flags: int = 0
    false_flags: list[tuple[str, str, float]] = field(default_factory=list)
    true_pairs: int = 0  # real pages with J >= threshold
    true_pairs_caught: int = 0
    copies_caught: int = 0
    copies_similar: int = 0  # copies whose J with their original is >= threshold
    copies_similar_caught: int = 0


# -- the labelled set --------------------------------------------------------------------


def load_pages(root: Path) -> dict[str, Page]:
    """Every HTML page under ``root`` and its one-word-edited copy, by URL path."""
    pages: dict[str, Page] = {}
    for file in sorted(root.rglob("*.html")):
        path = "/" + file.relative_to(root).as_posix()
        body = file.read_bytes()
        main = parse_html(body, "http://127.0.0.1" + path).main_text
        if not words(main):
            continue
        pages[path] = Page(path, body, main, words(main))
        copy = one_word_edit(pages[path], random.Random(path))
        if copy is not None:
            pages[copy.path] = copy
    return pages


def one_word_edit(page: Page, rng: random.Random) -> Page | None:
    """The page with one word of a text node changed, if its main text then differs
    from the original's by exactly that word."""
    nodes = [m for m in _TEXT_NODE.finditer(page.body, page.body.find(b"<body")) if m.start() > 0]
    for node in rng.sample(nodes, min(len(nodes), 40)):
        candidates = list(_WORD.finditer(page.body, node.start(1), node.end(1)))
        if not candidates:
            continue
        word = rng.choice(candidates)
        body = page.body[: word.start()] + EDIT_WORD.encode() + page.body[word.end() :]
        main = parse_html(body, "http://127.0.0.1" + EDITED + page.path).main_text
        edited = words(main)
        if len(edited) == len(page.main_words):
            differ = sum(a != b for a, b in zip(edited, page.main_words, strict=True))
            if differ == 1:
                return Page(EDITED + page.path, body, main, edited, edited_of=page.path)
    return None


def jaccard(a: Page, b: Page) -> float:
    x, y = shingles(a.main_words), shingles(b.main_words)
    return len(x & y) / len(x | y)


def similar_pairs(pages: list[Page], threshold: float) -> list[tuple[str, str]]:
    """Every pair with J >= threshold, exactly: prefix filter, size filter, then verify."""
    sets = {p.path: shingles(p.main_words) for p in pages}
    frequency = Counter(s for shingle_set in sets.values() for s in shingle_set)
    index: dict[bytes, list[str]] = {}
    for path, shingle_set in sets.items():
        ordered = sorted(shingle_set, key=lambda s: (frequency[s], s))
        prefix = len(ordered) - math.ceil(threshold * len(ordered)) + 1
        for s in ordered[:prefix]:
            index.setdefault(s, []).append(path)
    candidates = {(a, b) for paths in index.values() for i, a in enumerate(paths)
                  for b in paths[i + 1 :]}  # fmt: skip
    pairs = []
    for a, b in candidates:
        x, y = sets[a], sets[b]
        sizes_fit = min(len(x), len(y)) >= threshold * max(len(x), len(y))
        if sizes_fit and len(x & y) >= threshold * len(x | y):
            pairs.append((a, b))
    return pairs


# -- serving and crawling ----------------------------------------------------------------


def _handler(pages: dict[str, Page]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            page = pages.get(self.path)
            self.send_response(200 if page else 404)
            body = page.body if page else b"not found"
            self.send_header("Content-Type", "text/html" if page else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(pages: dict[str, Page]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(pages))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def crawl(base: str, paths: list[str], data: Path) -> list[tuple[str, str | None]]:
    """(path, duplicate_of path) of every stored HTML page, in the order dedup saw them."""
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    seeds = data / "seeds.txt"
    seeds.write_text("".join(f"{base}{path}\n" for path in paths))
    command = [sys.executable, "-m", "trawler", "crawl", "--seeds-file", str(seeds),
               "--data", str(data / "crawl"), "--allow-private", "--delay", "0",
               "--concurrency", "16", "--max-depth", "0", "--no-sitemaps", "-q"]  # fmt: skip
    subprocess.run(command, check=True, timeout=3600)
    with sqlite3.connect(data / "crawl" / "trawler.db") as conn:
        rows = conn.execute(
            "SELECT url, duplicate_of FROM pages WHERE simhash IS NOT NULL ORDER BY id"
        ).fetchall()
    return [(url.removeprefix(base), dup and dup.removeprefix(base)) for url, dup in rows]


# -- scoring -----------------------------------------------------------------------------


def score(pages: dict[str, Page], flags: list[tuple[str, str | None]]) -> Scores:
    scores = Scores()
    root = {path: dup or path for path, dup in flags}
    for path, dup in flags:
        if dup is None:
            continue
        scores.flags += 1
        similarity = jaccard(pages[path], pages[dup])
        if similarity < NEAR_DUPLICATE_JACCARD:
            scores.false_flags.append((path, dup, similarity))
    real = [p for p in pages.values() if p.edited_of is None and p.path in root]
    scores.pages = len(real)
    for a, b in similar_pairs(real, NEAR_DUPLICATE_JACCARD):
        scores.true_pairs += 1
        scores.true_pairs_caught += root[a] == root[b]
    for page in pages.values():
        if page.edited_of is not None and page.path in root and page.edited_of in root:
            caught = root[page.path] == root[page.edited_of]
            scores.copies += 1
            scores.copies_caught += caught
            if jaccard(page, pages[page.edited_of]) >= NEAR_DUPLICATE_JACCARD:
                scores.copies_similar += 1
                scores.copies_similar_caught += caught
    return scores


def previous_rule(pages: dict[str, Page], order: list[str]) -> list[tuple[str, str | None]]:
    """The flags the previous rule gives in the same order: exact text, else a SimHash
    within 3 bits, unconfirmed."""
    exact: dict[str, str] = {}
    near = SimHashIndex(3)
    flags: list[tuple[str, str | None]] = []
    for path in order:
        text = pages[path].main_text
        key, fingerprint = text_hash(text), counted_simhash(text)
        original = exact.get(key) or near.find(fingerprint)
        flags.append((path, original))
        if original is None:
            exact[key] = path
            near.add(fingerprint, path)
    return flags


# -- report ------------------------------------------------------------------------------


def run_package(name: str, root: Path, work: Path) -> dict:
    started = time.monotonic()
    pages = load_pages(root)
    originals = [p for p in pages.values() if p.edited_of is None]
    copies = [p for p in pages.values() if p.edited_of is not None]
    with serving(pages) as base:
        flags = crawl(base, [p.path for p in originals + copies], work / name)
    now = score(pages, flags)
    before = score(pages, previous_rule(pages, [path for path, _ in flags]))
    texts = [p.main_text for p in originals]
    return {"name": name, "now": now, "before": before, "costs": fingerprint_costs(texts),
            "kb_per_page": sum(len(t) for t in texts) / len(texts) / 1024,
            "seconds": time.monotonic() - started}  # fmt: skip


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.1%})" if whole else "0/0"


def markdown(results: list[dict]) -> str:
    lines = [
        "| package | rule | real pages | flags (real pages and copies) | false flags (J < 0.9)"
        " | real pairs with J >= 0.9 caught | one-word copies caught | of them with J >= 0.9 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for rule in ("before", "now"):
            s: Scores = r[rule]
            precision = (s.flags - len(s.false_flags)) / s.flags if s.flags else 1.0
            lines.append(
                f"| {r['name']} | {rule} | {s.pages} | {s.flags} (precision {precision:.1%})"
                f" | {len(s.false_flags)} | {_rate(s.true_pairs_caught, s.true_pairs)}"
                f" | {_rate(s.copies_caught, s.copies)}"
                f" | {_rate(s.copies_similar_caught, s.copies_similar)} |"
            )
    lines += ["", "| package | main text per page | fingerprint CPU per page |", "|---|---|---|"]
    for r in results:
        costs = ", ".join(f"{name} {us:.0f} µs" for name, us in r["costs"].items())
        lines.append(f"| {r['name']} | {r['kb_per_page']:.1f} KB | {costs} |")
    return "\n".join(lines)


def details(results: list[dict]) -> str:
    lines = []
    for r in results:
        lines.append(f"{r['name']}: {r['seconds']:.0f} s")
        for rule in ("before", "now"):
            for path, dup, similarity in r[rule].false_flags[:20]:
                lines.append(f"  {rule}: false flag {path} -> {dup} (J = {similarity:.3f})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("bench/work/neardup"))
    parser.add_argument("--packages", nargs="*", default=list(PACKAGES))
    parser.add_argument("--index-sizes", nargs="*", type=int, default=[10_000, 1_000_000])
    args = parser.parse_args()
    installed = {n: PACKAGES[n] for n in args.packages if PACKAGES[n].is_dir()}
    missing = sorted(set(args.packages) - set(installed))
    if missing:
        print(
            f"skipped: {', '.join(missing)} not installed (apt-get install -y {' '.join(missing)})"
        )
    if not installed:
        return
    results = [run_package(name, root, args.work) for name, root in installed.items()]
    print(details(results))
    print(markdown(results))
    for size in args.index_sizes:
        costs = ", ".join(f"`{n}` {us:.1f} µs" for n, us in lookup_cost_us(size).items())
        print(f"\nlookup in an index of {size:,} fingerprints: {costs}")


if __name__ == "__main__":
    main()
