"""heap.py: glibc keeps the top of the heap that a page's parse tree freed, instead
of shrinking the heap after every page and growing it for the next (a fifth of the
parser process's CPU: bench/RESULTS.md, "Issue 14, session 37")."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="M_TOP_PAD is glibc's")

# In a process of its own (the setting is the process's for good): 50 rounds of what a
# parse tree does to the heap, ~1 MB in blocks under the mmap threshold (lexbor grew
# the heap by 0x68000, 0x58000 and 0x23000 bytes and gave it all back, page after
# page, under strace), and how often the heap's size (mallinfo2's arena: what brk
# holds) changed from one round to the next, the first round aside.
_PROBE = """
import ctypes, sys
from trawler.heap import HEAP_TOP_PAD, keep_heap_top

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "keep":
    assert keep_heap_top() and keep_heap_top()  # idempotent
sizes = []
for _ in range(50):
    blocks = [libc.malloc(100_000) for _ in range(10)]
    for block in reversed(blocks):
        libc.free(block)
    sizes.append(libc.mallinfo2().arena)
print(sum(a != b for a, b in zip(sizes[1:], sizes[2:])), min(sizes) >= HEAP_TOP_PAD)
"""


def _heap_changes(mode: str) -> tuple[int, bool]:
    """(rounds after which the heap's size had changed, whether it kept the pad)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    changes, padded = done.stdout.split()
    return int(changes), padded == "True"


def test_the_heap_keeps_its_top_from_round_to_round() -> None:
    """Kept: the heap grew by the pad once, and no round changed its size. (Without
    it, whether glibc shrinks the heap after a round depends on the process's past:
    its trim threshold follows the biggest mapped block freed so far. The parser
    process's did, ~5 times a page: bench/RESULTS.md.)"""
    assert _heap_changes("keep") == (0, True)
    assert _heap_changes("default")[1] is False  # the pad is keep_heap_top's doing
