"""Per-page asyncio costs of the crawl dispatcher, old against new, in one process (min of rounds).

PYTHONPATH=. .venv/bin/python bench/bench_loop_objects.py
"""

import asyncio
import time
from functools import partial

from trawler.throttle import RequestSlot, Throttle

N = 200_000


async def sem_cycle(make):
    a, b = make(1024), make(256)
    t = time.thread_time()
    for _ in range(N):
        await a.acquire()
        await b.acquire()
        b.release()
        a.release()
    return (time.thread_time() - t) / N * 1e6


async def tasks_cycle(callbacks):
    done = set()

    async def work():
        pass

    def one(slot, task):
        done.discard(task)
        slot.release()

    def give_back(slot, task):
        slot.release()

    t = time.thread_time()
    for i in range(N // 4):
        slot = RequestSlot(lambda: None)
        task = asyncio.create_task(work())
        done.add(task)
        if callbacks == 2:
            task.add_done_callback(done.discard)
            task.add_done_callback(partial(give_back, slot))
        else:
            task.add_done_callback(partial(one, slot))
        if i % 64 == 0:
            await asyncio.sleep(0)
    while done:
        await asyncio.sleep(0)
    return (time.thread_time() - t) / (N // 4) * 1e6


async def main():
    for name, coro in [
        ("Semaphore", lambda: sem_cycle(asyncio.Semaphore)),
        ("Throttle", lambda: sem_cycle(Throttle)),
        ("2 done callbacks", lambda: tasks_cycle(2)),
        ("1 done callback", lambda: tasks_cycle(1)),
    ]:
        runs = [await coro() for _ in range(7)]
        print(f"{name:18} min {min(runs):.3f} µs  median {sorted(runs)[3]:.3f} µs")


asyncio.run(main())
