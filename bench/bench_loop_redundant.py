"""Loop-side costs per page that issue 14's session 34 (branch loop2) looked at.

A/B of a base tree's modules against this checkout's, in one process, rounds
alternating, medians (µs): the robots check of a page's 8 links
(``LinkFilter.robots_checked``, cached verdicts) and a page's TDM annotation
(``TdmGate.annotate``). Then the costs measured and not changed: building a
``CrawlRequest`` from the parser's tuple, ``urls.origin``, ``RestartState.note_host``.

    git -C /work/main archive main | tar -x -C /tmp/loop-base
    flock /tmp/cpu.lock .venv/bin/python bench/bench_loop_redundant.py --base /tmp/loop-base
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import timeit
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trawler import linkfilter, tdmgate  # noqa: E402
from trawler.frontier.restart_state import RestartState  # noqa: E402
from trawler.politeness import HostSlot  # noqa: E402
from trawler.records import CrawlRequest, PageRecord  # noqa: E402
from trawler.robotsgate import RobotsGate  # noqa: E402
from trawler.urls import origin  # noqa: E402


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


async def _noop(*_args: object) -> None:
    return None


def _gate(urls: list[str]) -> RobotsGate:
    gate = RobotsGate(None, "trawler", (1.0,), Counter(), _noop, lambda _r, _h: None)  # type: ignore[arg-type]
    for url in urls[::2]:
        gate._link_verdicts[url] = True
    for url in urls[1::16]:
        gate._link_verdicts[url] = False
    for url in urls:
        gate._entries[origin(url)] = SimpleNamespace(ai_groups=None, unavailable=True)  # type: ignore[assignment]
    return gate


def _robots(module: ModuleType, gate: RobotsGate, pages: list[list[CrawlRequest]]) -> float:
    links = SimpleNamespace(robots_allows=gate.allows, rejected=Counter())
    check = module.LinkFilter.robots_checked
    start = time.perf_counter()
    for _ in range(200):
        for page in pages:
            check(links, page)
    return (time.perf_counter() - start) / (200 * len(pages)) * 1e6


def _annotate(module: ModuleType, gate: RobotsGate, pages: list[PageRecord]) -> float:
    tdm = module.TdmGate(None, gate, Counter())
    start = time.perf_counter()
    for _ in range(50):
        for page in pages:
            tdm.annotate(page)
    return (time.perf_counter() - start) / (50 * len(pages)) * 1e6


def _median_us(stmt: object, number: int) -> float:
    return statistics.median(timeit.repeat(stmt, number=number, repeat=7)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="the tree to compare with")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    urls = [f"http://h{i}.test:8080/p/{j}.html" for i in range(50) for j in range(8)]
    gate = _gate(urls)
    requests = [CrawlRequest(u, 1, None, u.split("/")[2], i) for i, u in enumerate(urls)]
    pages = [requests[i : i + 8] for i in range(0, len(requests), 8)]
    records = [PageRecord(u, u, 200, "text/html", 1000, 1, None, "t", None, None, "x", 8, "",
                          0.0, 0.1, None) for u in urls]  # fmt: skip
    base = {name: _load(f"base_{name}", args.base / "trawler" / f"{name}.py")
            for name in ("linkfilter", "tdmgate")}  # fmt: skip
    for label, run, name, this, work in (
        ("robots_checked, 8 links", _robots, "linkfilter", linkfilter, pages),
        ("TdmGate.annotate, a page", _annotate, "tdmgate", tdmgate, records),
    ):
        before, after = [], []
        for _ in range(args.rounds):
            before.append(run(base[name], gate, work))
            after.append(run(this, gate, work))
        was, now = statistics.median(before), statistics.median(after)
        print(f"{label}: base {was:.3f} µs, this {now:.3f} µs")
    flat = [(u, 2, "http://h.test/x", "h.test", i) for i, u in enumerate(urls[:8])]
    build = _median_us(lambda: [CrawlRequest(*r) for r in flat], 100_000) / 8
    print(f"CrawlRequest(*tuple): {build:.3f} µs a request")
    print(f"origin(url): {_median_us(lambda: origin(urls[0]), 300_000):.3f} µs")
    state, slot = RestartState(time.monotonic), HostSlot("h1.test", last_sent_at=1.0)

    def note() -> None:
        state.note_host(slot)
        state._hosts.clear()

    print(f"RestartState.note_host: {_median_us(note, 300_000):.3f} µs")


if __name__ == "__main__":
    main()
