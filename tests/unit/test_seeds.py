"""seeds.py (spool, chunks, errors), Scope from kept hosts, older jobs' seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.scope import Scope
from trawler.seeds import SeedError, spool_seeds
from trawler.store import sqlite as db
from trawler.urls import Normaliser


def test_spool_normalises_once_and_chunks(tmp_path: Path) -> None:
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("# comment\n\n  HTTP://B.test/x?utm_source=y \nhttp://c.test:81/\n")
    with spool_seeds(["http://a.test"], seeds_file, Normaliser()) as spool:
        assert spool.count == 3 and spool.hosts == {"a.test", "b.test", "c.test:81"}
        assert list(spool.chunks(2)) == [
            ["http://a.test/", "http://b.test/x"],
            ["http://c.test:81/"],
        ]


def test_a_bad_seed_names_its_line(tmp_path: Path) -> None:
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("http://a.test/\n# note\nmailto:x@y.test\n")
    with pytest.raises(SeedError, match=r"'mailto:x@y.test' \(--seeds-file line 3\)"):
        spool_seeds([], seeds_file, Normaliser())
    with pytest.raises(SeedError, match="not an http"):
        spool_seeds(["nope"], None, Normaliser())
    with pytest.raises(SeedError, match="cannot read --seeds-file"):
        spool_seeds([], tmp_path / "missing.txt", Normaliser())


@pytest.mark.parametrize("mode", ["host", "domain", "any"])
def test_scope_from_hosts_is_the_scope_from_seeds(mode: str) -> None:
    seeds = ["http://www.a.example.com/x", "http://b.test:8080/"]
    from_seeds = Scope(mode, seeds)  # type: ignore[arg-type]
    from_hosts = Scope.from_hosts(mode, ["www.a.example.com", "b.test:8080"])  # type: ignore[arg-type]
    for url in ("http://www.a.example.com/y", "http://c.a.example.com/", "http://b.test:8080/z",
                "http://b.test/", "http://other.test/"):  # fmt: skip
        assert from_hosts.allows(url) == from_seeds.allows(url), url


def test_older_jobs_seeds_become_its_scope(tmp_path: Path) -> None:
    """A data directory of a Trawler that kept seeds in the config."""
    conn = db.connect(tmp_path)
    legacy = {
        **CrawlConfig(max_depth=2).model_dump(),
        "seeds": ["http://A.test/x", "http://b.test/"],
    }
    conn.execute("INSERT INTO jobs VALUES ('old', ?, 'stopped', 1, 1)", (json.dumps(legacy),))
    conn.commit()
    store = db.SqliteStore(conn)
    job = store.current_job()
    assert job is not None and job[1] == CrawlConfig(max_depth=2)
    assert sorted(store.scope_hosts()) == ["a.test", "b.test"]
    stored = conn.execute("SELECT config FROM jobs").fetchone()[0]
    assert "seeds" not in json.loads(stored)
    conn.close()
