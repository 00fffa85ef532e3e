"""scripts/python.sh: which interpreter makes .venv (README, "Speed")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUALIFIES = "import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))"


def venv_python(*candidates: str | Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHON"} | env
    out = subprocess.run(
        ["bash", "-c", '. scripts/python.sh; venv_python "$@"', "-", *map(str, candidates)],
        cwd=ROOT, env=environ, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def fake_python(path: Path, exit_code: int) -> Path:
    """An executable that answers the check with ``exit_code`` (1: too old, no venv)."""
    path.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    path.chmod(0o755)
    return path


def test_python_set_is_used_as_given(tmp_path: Path) -> None:
    good = fake_python(tmp_path / "good", 0)
    assert venv_python(good, PYTHON="/opt/some/python3.12") == "/opt/some/python3.12"


def test_the_first_candidate_that_passes_the_check(tmp_path: Path) -> None:
    old, good = fake_python(tmp_path / "old", 1), fake_python(tmp_path / "good", 0)
    assert venv_python(tmp_path / "missing", old, good) == str(good)
    assert venv_python(old, tmp_path / "missing") == "python3"


def test_the_check_runs_the_interpreter() -> None:
    """This test's own interpreter is 3.11+ with venv and ensurepip: it passes."""
    assert subprocess.run([sys.executable, "-c", QUALIFIES]).returncode == 0
    assert venv_python(sys.executable) == sys.executable


def test_the_distributions_python_by_default() -> None:
    system = Path("/usr/bin/python3")
    qualifies = system.exists() and subprocess.run([system, "-c", QUALIFIES]).returncode == 0
    assert venv_python() == ("/usr/bin/python3" if qualifies else "python3")
