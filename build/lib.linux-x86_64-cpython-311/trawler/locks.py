"""File locks that the kernel drops when their process dies, kill -9 included.

flock(2) locks belong to an open file: there is no stale lock to clean up
after a crash, a second open of the same file conflicts even in the same
process, and a child started with spawn does not inherit them (Python opens
files close-on-exec). Four uses:

- the data directory's ``trawler.lock``: one `trawler crawl` per directory (its
  politeness per host holds within one process); `trawler serve` takes it only
  while it moves an older single-job layout;
- each job's ``DATA/jobs/<id>/job.lock``: one process runs a job at a time (a
  `trawler crawl` and a `trawler serve` on one data directory never both run it);
- files being written (an open WARC file, an export's temporary file): their
  writer holds a lock on the file itself, so a file whose lock can be taken
  was abandoned by a dead writer and may be repaired or removed;
- ``create_locked`` makes such a file under a name no sweeper looks at, locks
  it, then renames it: a sweeper never sees it unlocked.

``fsync_dir`` makes the rename that finishes such a file durable (WARC files, exports).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

LOCK_NAME = "trawler.lock"
JOB_LOCK_NAME = "job.lock"
_PID_WAIT_S = 1.0  # the holder writes its pid right after taking the lock


class DataDirBusy(RuntimeError):
    """Another process holds the data directory's lock."""

    def __init__(self, data_dir: Path, pid: str) -> None:
        super().__init__(
            f"data directory {data_dir} is in use by another trawler process (pid {pid});"
            " stop it first, or use another --data"
        )
        self.pid = pid


def lock_data_dir(data_dir: Path) -> BinaryIO:
    """Take the data directory's exclusive lock; it is held while the file stays open.

    Raises ``DataDirBusy`` naming the holder's pid when another process has it.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _lock_file(data_dir / LOCK_NAME)
    except _Held as held:
        raise DataDirBusy(data_dir, held.pid) from None


class JobBusy(RuntimeError):
    """Another process is running this job."""

    def __init__(self, job_id: str, pid: str) -> None:
        super().__init__(f"job {job_id} is being run by another trawler process (pid {pid})")
        self.job_id, self.pid = job_id, pid


def lock_job(job_dir: Path, job_id: str) -> BinaryIO:
    """Take the job's lock (``job_dir``: DATA/jobs/<id>); ``JobBusy`` when another
    process (or another open in this one) runs the job."""
    job_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _lock_file(job_dir / JOB_LOCK_NAME)
    except _Held as held:
        raise JobBusy(job_id, held.pid) from None


def is_locked(path: Path) -> bool:
    """Whether a process holds ``path``'s lock exclusive (a job being run)."""
    try:
        with path.open("rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released as it closes
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


class _Held(Exception):
    def __init__(self, pid: str) -> None:
        self.pid = pid


def _lock_file(path: Path) -> BinaryIO:
    """The open file, locked exclusive, with our pid in it; ``_Held`` with the
    holder's pid when another open has it."""
    handle = path.open("a+b", buffering=0)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder_pid(handle)
        handle.close()
        raise _Held(pid) from None
    except BaseException:
        handle.close()
        raise
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n".encode())
    return handle


def _holder_pid(handle: BinaryIO) -> str:
    deadline = time.monotonic() + _PID_WAIT_S
    while True:
        handle.seek(0)
        pid = handle.read(32).decode("ascii", "replace").strip()
        if pid or time.monotonic() > deadline:
            return pid or "unknown"
        time.sleep(0.02)


def create_locked(path: Path, buffering: int = -1) -> BinaryIO:
    """Create ``path`` for writing, with an exclusive lock held before the name appears."""
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    handle = staging.open("xb", buffering=buffering)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: always free
        if path.exists():
            raise FileExistsError(f"{path} exists")
        staging.rename(path)  # same inode: the lock comes along
    except BaseException:
        handle.close()
        staging.unlink(missing_ok=True)
        raise
    return handle


@contextlib.contextmanager
def if_abandoned(path: Path) -> Iterator[bool]:
    """Yield True, holding the file's lock, when no live process writes ``path``."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        yield False
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield _still_named(path, handle)


def _still_named(path: Path, handle: BinaryIO) -> bool:
    """False when the writer renamed the file (it was finishing) before we got the lock."""
    try:
        return path.stat().st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def fsync_dir(directory: Path) -> None:
    """fsync the directory itself: a rename (how such a file is finished) survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
