"""The dispatcher's wake-ups per page: SqliteFrontier in memory, hosts with a delay,
tasks that 'fetch' for 1-50 ms, as the engine drives them. PYTHONPATH picks the tree.

    PYTHONPATH=. .venv/bin/python bench/bench_frontier_wakes.py HOSTS PAGES DELAY_S
"""

import asyncio
import json
import random
import sys
import time

from trawler.dedup import url_fingerprint
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest

HOSTS, PAGES, LINKS, DELAY = int(sys.argv[1]), int(sys.argv[2]), 10, float(sys.argv[3])


def request(h, p, d):
    name = f"127.0.{h // 250 + 1}.{h % 250 + 1}"
    url = f"http://{name}/p/{p}.html"
    return CrawlRequest(url, d, None, name, url_fingerprint(url))


async def main():
    random.seed(7)
    web = {(h, p): request(h, p, 1) for h in range(HOSTS) for p in range(PAGES)}
    at = {r.url: k for k, r in web.items()}
    f = SqliteFrontier(PolitenessPolicy(DELAY))
    waits = 0
    orig = f._wait

    async def counted(timeout):
        nonlocal waits
        waits += 1
        await orig(timeout)

    f._wait = counted
    done = 0

    async def process(r):
        nonlocal done
        f.record_sent(r.host, time.monotonic())
        await asyncio.sleep(random.uniform(0.001, 0.05))
        f.record_response(r.host, 200, None, None)
        await f.finish_host(r.host)
        i, n = at[r.url]
        f.enqueue(await f.filter_new([web[i, (n + k) % PAGES] for k in range(LINKS)]))
        f.ack(1)
        done += 1

    cpu, wall = time.process_time(), time.monotonic()
    f.enqueue(await f.filter_new([request(h, 0, 0) for h in range(HOSTS)]))
    tasks = set()
    while (r := await f.next()) is not None:
        t = asyncio.create_task(process(r))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(
        json.dumps(
            {
                "pages": done,
                "waits_per_page": round(waits / done, 3),
                "cpu_us_per_page": round(cpu / done * 1e6, 1),
                "wall_s": round(wall, 2),
            }
        )
    )


asyncio.run(main())
