"""File locks: the data directory's, and those of files being written (WARC, export)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from trawler.locks import (
    JOB_LOCK_NAME,
    DataDirBusy,
    JobBusy,
    create_locked,
    if_abandoned,
    is_locked,
    lock_data_dir,
    lock_job,
)
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


def test_a_job_lock_is_one_runner_per_job_beside_other_jobs(tmp_path: Path) -> None:
    a, b = tmp_path / "jobs" / "a", tmp_path / "jobs" / "b"
    held = lock_job(a, "a")
    assert is_locked(a / JOB_LOCK_NAME) and not is_locked(b / JOB_LOCK_NAME)
    busy = f"job a is being run by another trawler process \\(pid {os.getpid()}\\)"
    with pytest.raises(JobBusy, match=busy):
        lock_job(a, "a")
    lock_job(b, "b").close()  # another job: its own lock
    held.close()
    assert not is_locked(a / JOB_LOCK_NAME)
    lock_job(a, "a").close()


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
