"""The distributed frontier's Redis memory and script times at a million URLs.

    nice -n 10 .venv/bin/python bench/bench_redis_frontier.py [--urls 1000000]
        [--hosts 10000] [--seeds 100000] [--batch 1000] [--json-out FILE]

A benchmark, not a test. It starts its own redis-server (tests/servers.py,
AOF off: memory, not durability, is measured) and puts ``--urls`` URLs over
``--hosts`` hosts into one job through the real ``RedisFrontier``:

- first ``--seeds`` of them with one ``filter_new`` + ``commit`` (what
  `trawler submit` does with its seeds);
- the rest ``--batch`` at a time, as a crawl discovers them (links of the
  host's pages: parent ``http://hNNNNN.bench.test/section-K/``, depth 1-3).

It reports, from Redis itself:

- bytes per queued URL: the INFO ``used_memory`` delta over the ingest, less
  the seen set, divided by the URLs queued;
- bytes per seen URL: ``MEMORY USAGE <key> SAMPLES 0`` summed over the seen
  set's keys;
- the longest single command (a script call), in the seeds phase and in the
  crawl phase: ``SLOWLOG`` (threshold 1 ms, read and reset after each phase,
  and before used_memory is read);
- ingest rate (URLs/s, wall time of filter_new + commit) and Redis's CPU;
- a check that URLs come back out: ``--drain`` URLs through next() + commit.

The same script runs against an older tree (PYTHONPATH=that tree): it uses
only the frontier's public methods.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/servers.py

from redis.asyncio import Redis  # noqa: E402

from tests.servers import start_redis  # noqa: E402
from trawler.dedup import url_fingerprint  # noqa: E402
from trawler.frontier.redis import RedisFrontier, RedisFrontierOptions  # noqa: E402
from trawler.politeness import PolitenessPolicy  # noqa: E402
from trawler.records import CrawlRequest  # noqa: E402


def make_requests(start: int, stop: int, hosts: int) -> list[CrawlRequest]:
    """URLs ``start``..``stop``: spread over the hosts, links of a section page."""
    out = []
    for i in range(start, stop):
        host = f"h{i % hosts:05d}.bench.test"
        n = i // hosts
        section = n % 20
        url = f"http://{host}/section-{section}/article-{n}.html"
        parent = f"http://{host}/section-{section}/"
        out.append(CrawlRequest(url, 1 + n % 3, parent, host, url_fingerprint(url)))
    return out


async def seen_bytes(client: Redis) -> tuple[int, int]:
    """(bytes, keys) of the job's seen set, exact (SAMPLES 0)."""
    keys = [key async for key in client.scan_iter(match="trawler:{bench}:seen:*", count=5000)]
    total = 0
    for i in range(0, len(keys), 5000):
        async with client.pipeline(transaction=False) as pipe:
            for key in keys[i : i + 5000]:
                pipe.memory_usage(key, samples=0)
            total += sum(v or 0 for v in await pipe.execute())
    return total, len(keys)


async def longest_call(client: Redis) -> dict[str, Any]:
    """The slowest command since the last call (SLOWLOG), then SLOWLOG RESET."""
    slow = await client.slowlog_get(100_000)
    await client.slowlog_reset()
    if not slow:
        return {"ms": 0.0, "calls_over_1ms": 0}
    entry = max(slow, key=lambda e: e["duration"])
    return {"ms": round(entry["duration"] / 1000, 1), "calls_over_1ms": len(slow)}


async def ingest(
    frontier: RedisFrontier, client: Redis, args: argparse.Namespace
) -> dict[str, Any]:
    started = time.monotonic()
    seeds = make_requests(0, args.seeds, args.hosts)
    await frontier.commit(await frontier.filter_new(seeds), [])
    seeds_s = time.monotonic() - started
    seeds_longest = await longest_call(client)
    del seeds
    step = 100_000  # generated a slice at a time: the URLs are not kept in memory
    for start in range(args.seeds, args.urls, step):
        requests = make_requests(start, min(start + step, args.urls), args.hosts)
        for i in range(0, len(requests), args.batch):
            batch = requests[i : i + args.batch]
            await frontier.commit(await frontier.filter_new(batch), [])
    return {
        "seeds_s": seeds_s, "ingest_s": time.monotonic() - started,
        "longest_seeds": seeds_longest, "longest_crawl": await longest_call(client),
    }  # fmt: skip


async def drain(frontier: RedisFrontier, count: int) -> float:
    started = time.monotonic()
    done: list[CrawlRequest] = []
    for _ in range(count):
        request = await frontier.next()
        assert request is not None and request.url.startswith("http://h")
        await frontier.finish_host(request.host)
        done.append(request)
        if len(done) == 100:
            await frontier.commit([], done)
            done = []
    await frontier.commit([], done)
    return count / (time.monotonic() - started)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    server = start_redis(tempfile.mkdtemp(prefix="bench-redis-"), appendonly=False)
    client = Redis.from_url(server.url)
    try:
        await client.config_set("slowlog-log-slower-than", 1000)
        await client.config_set("slowlog-max-len", 100_000)
        options = RedisFrontierOptions(job_id="bench", worker_id="bench", auto_renew=False)
        frontier = await RedisFrontier.connect(server.url, PolitenessPolicy(0.0), options)
        before = (await client.info("memory"))["used_memory"]
        cpu_before = await client.info("cpu")
        times = await ingest(frontier, client, args)
        cpu = await client.info("cpu")
        used = (await client.info("memory"))["used_memory"] - before
        seen, seen_keys = await seen_bytes(client)
        queued, _leased, _hosts = await frontier.stats()
        drained = await drain(frontier, args.drain)
        await frontier.aclose()
        redis_cpu = sum(cpu[k] - cpu_before[k] for k in ("used_cpu_sys", "used_cpu_user"))
        return {
            "urls": args.urls, "hosts": args.hosts, "seeds": args.seeds, "batch": args.batch,
            "queued": queued,
            "bytes_per_queued_url": round((used - seen) / queued, 1),
            "bytes_per_seen_url": round(seen / args.urls, 1),
            "seen_keys": seen_keys,
            "used_memory_mb": round(used / 2**20, 1),
            "seeds_s": round(times["seeds_s"], 2),
            "ingest_urls_per_s": round(args.urls / times["ingest_s"]),
            "redis_cpu_s": round(redis_cpu, 1),
            "longest_call_seeds": times["longest_seeds"],
            "longest_call_crawl": times["longest_crawl"],
            "drain_urls_per_s": round(drained),
        }  # fmt: skip
    finally:
        await client.aclose()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=100_000, help="in one filter_new + commit")
    parser.add_argument("--batch", type=int, default=1000, help="URLs per commit after the seeds")
    parser.add_argument("--drain", type=int, default=2000, help="URLs handed out at the end")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
