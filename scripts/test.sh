#!/usr/bin/env bash
# Install Trawler with its test tools into .venv and run the whole test suite.
# This is the README's test command; CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python.sh  # venv_python: $PYTHON, else an optimised build when there is one
if [ ! -x .venv/bin/python ]; then
  "$(venv_python)" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/ruff check trawler tests bench
.venv/bin/mypy trawler
.venv/bin/python -m pytest "$@"
