"""The C heap of a parser process: keep the top of glibc's heap instead of handing
it back to the kernel after every page.

lexbor (selectolax's parser) builds each document in blocks of its own and frees
them all when the tree goes. A parser process fed the benchmark's pages grew its heap
by 0x68000, 0x58000 and 0x23000 bytes and shrank it by all of that, over and over
(``brk`` under strace: 7,638 calls for 4,300 pages; the same pages analysed inline
in the benchmark's own process, 17,769): glibc trims the top of the heap once more
than its trim threshold is free there, and that threshold follows the biggest mapped
block the process has freed so far (twice it), so whether a process does this
depends on its past. Memory the heap grows into comes zero-filled from the kernel, a
fault for each page touched. bench/bench_parsepool.py, 100 hosts: 351-379 CPU µs
a page in the parser process, 255-290 with 4-64 MiB kept (bench/RESULTS.md, "Issue
14, session 37"). ``M_TOP_PAD`` makes every growth of the heap ``HEAP_TOP_PAD``
bigger than asked and every trim leave that much: a page's blocks then come and go
inside it. A crawl's parser process, with another past, made 0.02 and 0.33
``brk`` calls a page in two runs (bench/bench_engine.py under strace, 7,425 pages),
and on the 2,000-host benchmark its CPU did not change (three runs each): kept for
the processes whose past makes them churn, at no cost seen.

What it costs: up to ``HEAP_TOP_PAD`` of memory the process keeps instead of giving
it back, resident only where a page touched it. Setting it also ends glibc's moving
of the mmap threshold (blocks of 128 KiB and more are then always mapped): the same
count of mmap calls was measured with and without it. The crawl process's own CPU
did not change with it (bench/bench_engine.py, two runs each), so only processes
that parse pages set it: the parser processes, and a crawl process that analyses
inline (analysis.py ``AnalysisPool`` with no processes).

Only glibc has ``mallopt`` with these numbers; elsewhere (musl, macOS) nothing is done.
Written by hand: no library sets malloc parameters; ``ctypes`` reaches the C call.
"""

from __future__ import annotations

import ctypes
import platform

HEAP_TOP_PAD = 8 << 20  # bytes: 4 and 64 MiB measured the same (bench/RESULTS.md)
_M_TOP_PAD = -2  # glibc's malloc.h

_kept = False


def keep_heap_top(pad: int = HEAP_TOP_PAD) -> bool:
    """Set glibc's ``M_TOP_PAD`` for this process (idempotent); False where the C
    library is not glibc or refuses."""
    global _kept
    if _kept:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _kept = mallopt(_M_TOP_PAD, pad) == 1
    return _kept
