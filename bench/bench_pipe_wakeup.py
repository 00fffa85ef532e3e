"""What a pipe write costs the writer, by whether it wakes a sleeping reader.

    .venv/bin/python bench/bench_pipe_wakeup.py [--messages 300]

A child process writes ``--messages`` messages to a pipe that this process reads
with a selector (as the event loop reads the parser's answers), either 5 ms apart
(the reader is asleep in the selector when each comes: every write wakes it) or
back to back (it is still reading: no wake-up). Each message is written as one
write (header and payload together, as parserpipe.py does) or as two
(``Connection.send_bytes`` past 16 KiB: the 4-byte header, then the payload).
Printed per message: the writer's CPU (time.process_time around the writes), the
reader's CPU (this process, over the whole run) and its reads; medians of ``--rounds``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import selectors
import statistics
import struct
import time
from multiprocessing.connection import Connection


def _writer(conn: Connection, size: int, count: int, gap_s: float, writes: int) -> None:
    payload = b"x" * size
    header = struct.pack("!i", size)
    fd, spent = conn.fileno(), 0.0
    for _ in range(count):
        started = time.process_time()
        if writes == 1:
            os.write(fd, header + payload)
        else:
            os.write(fd, header)
            os.write(fd, payload)
        spent += time.process_time() - started
        if gap_s:
            time.sleep(gap_s)
    os.write(fd, struct.pack("!d", spent))


def one_run(size: int, count: int, gap_s: float, writes: int) -> tuple[float, float, float]:
    """Per message: the writer's CPU µs, the reader's CPU µs, the reader's reads."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=_writer, args=(writer, size, count, gap_s, writes))
    process.start()
    writer.close()
    os.set_blocking(reader.fileno(), False)
    selector = selectors.DefaultSelector()
    selector.register(reader.fileno(), selectors.EVENT_READ)
    received, reads, started = bytearray(), 0, time.process_time()
    while True:
        selector.select()
        try:
            data = os.read(reader.fileno(), 1 << 18)
        except BlockingIOError:
            continue
        if not data:
            break
        reads += 1
        received += data
    read_s = time.process_time() - started
    process.join()
    selector.close()
    reader.close()
    (spent,) = struct.unpack("!d", received[-8:])
    return spent / count * 1e6, read_s / count * 1e6, reads / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"CPU µs per message (writer / reader) and the reader's reads per message, "
          f"median of {args.rounds} runs of {args.messages}")  # fmt: skip
    print("| message | reader | one write | two writes (header, payload) |")
    print("|---|---|---:|---:|")
    for size in (10_000, 40_000):
        for gap_s, reader in ((0.005, "asleep (5 ms apart)"), (0.0, "busy (back to back)")):
            cells = []
            for writes in (1, 2):
                runs = [one_run(size, args.messages, gap_s, writes) for _ in range(args.rounds)]
                writer_us, reader_us, reads = (statistics.median(r[k] for r in runs)
                                               for k in range(3))  # fmt: skip
                cells.append(f"{writer_us:.1f} / {reader_us:.1f}, {reads:.2f} reads")
            print(f"| {size:,} B | {reader} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
