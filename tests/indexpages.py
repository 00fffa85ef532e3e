"""Pages shaped like the Python docs' genindex-*.html, for near-duplicate tests.

Each page is a long list of index entries: a name of its own followed by one
of a few phrases repeated hundreds of times ("(class in ctypes)", "(in module
os)", "(socket.socket method)"). Two such pages share almost no word
3-shingles (about 5%, as the real ones do), yet their SimHashes counted
shingles with multiplicity landed 2-3 bits apart: the repeated phrases
outvoted everything else.
"""

from __future__ import annotations

import random

MODULES = ("os", "ctypes", "asyncio", "typing")
CLASSES = ("Path", "socket")
KINDS = ("{name}() (in module {module})", "{name} (class in {module})",
         "{name}() ({module}.{cls} method)", "{name} ({module}.{cls} attribute)")  # fmt: skip
KIND_WEIGHTS = (6, 2, 1, 1)  # as in the real pages: "in module" is most of them
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def index_entries(letter: str, count: int = 600, seed: int = 0) -> list[str]:
    """``count`` entries whose names start with ``letter`` (different for each letter)."""
    rng = random.Random(f"{letter}-{seed}")
    entries = []
    for _ in range(count):
        name = letter + "".join(rng.choices(_LETTERS + "_", k=rng.randint(3, 12)))
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        entries.append(kind.format(name=name, module=rng.choice(MODULES), cls=rng.choice(CLASSES)))
    return entries


def index_html(letter: str, entries: list[str] | None = None) -> str:
    """A genindex-like page: heading, then the entries as a list of links."""
    items = "".join(f'<li><a href="#{i}">{e}</a></li>'
                    for i, e in enumerate(entries or index_entries(letter)))  # fmt: skip
    return (f"<html><head><title>Index - {letter.upper()}</title></head><body>"
            f"<h1>Index - {letter.upper()}</h1><ul>{items}</ul></body></html>")  # fmt: skip
