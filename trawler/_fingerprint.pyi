# The C fingerprints (trawler/_fingerprint.c) and the SimHash index's lookup
# (trawler/_simhash_near.c), built by pip when a compiler is there.

from typing_extensions import Buffer  # collections.abc.Buffer from 3.12

def of_words(words: list[bytes], shingle_words: int, /) -> tuple[int, bytes | None]: ...
def of_ascii(text: str, shingle_words: int, /) -> tuple[int, bytes | None]: ...
def near(
    fingerprint: int,
    radius: int,
    max_bits: int,
    blocks: tuple[tuple[int, int], ...],
    tag_shift: int,
    offsets: Buffer,
    positions: Buffer,
    stored: Buffer,
    merged: int,
    count: int,
    /,
) -> list[tuple[int, int]]: ...
