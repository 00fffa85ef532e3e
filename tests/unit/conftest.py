"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trawler import simhash_index


@pytest.fixture(scope="module", params=["c", "numpy"])
def lookup_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test that uses it twice: SimHashIndex's lookup in C, then in numpy (the
    fallback without the extension). Module-scoped, so Hypothesis tests may use it."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "numpy":
            patch.setattr(simhash_index, "native_near", None)
        else:
            assert simhash_index.native_near is not None, "the C lookup is not built"
        yield request.param
