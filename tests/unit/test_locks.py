"""File locks: the data directory's, and those of files being written (WARC, export)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawler.locks import DataDirBusy, create_locked, if_abandoned, lock_data_dir
from trawler.store.warc import WarcWriter, recover


def test_data_dir_lock_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    held = lock_data_dir(tmp_path / "data")
    with pytest.raises(DataDirBusy, match=f"pid {os.getpid()}"):
        lock_data_dir(tmp_path / "data")  # a second open conflicts, even in one process
    held.close()
    lock_data_dir(tmp_path / "data").close()  # free again once closed


def test_data_dir_lock_of_a_dead_process_is_free(tmp_path: Path) -> None:
    code = "import sys, os; from pathlib import Path; from trawler.locks import lock_data_dir; "
    code += "h = lock_data_dir(Path(sys.argv[1])); os._exit(0)"  # no clean-up at all
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=30)
    lock_data_dir(tmp_path).close()


def test_created_file_is_locked_until_closed(tmp_path: Path) -> None:
    target = tmp_path / "x.open"
    handle = create_locked(target)
    assert [p.name for p in tmp_path.iterdir()] == ["x.open"]  # no staging name left
    with if_abandoned(target) as abandoned:
        assert not abandoned
    handle.close()
    with if_abandoned(target) as abandoned:
        assert abandoned
    with pytest.raises(FileExistsError):
        create_locked(target)
    assert [p.name for p in tmp_path.iterdir()] == ["x.open"]


def test_recover_leaves_a_live_writers_open_file_alone(tmp_path: Path) -> None:
    """A second process's recovery must not cut or close a file still being written."""
    writer = WarcWriter(tmp_path, prefix="any-name-at-all")
    writer._rotate()
    writer.flush()
    (open_file,) = tmp_path.glob("*.open")
    size = open_file.stat().st_size
    assert recover(tmp_path) == []
    assert recover(tmp_path, {open_file.name.removesuffix(".open"): 0}) == []
    assert open_file.exists() and open_file.stat().st_size == size
    writer.close()
    (done,) = tmp_path.glob("*.warc.gz")
    with done.open("rb") as stream:
        assert [r.rec_type for r in ArchiveIterator(stream)] == ["warcinfo"]
