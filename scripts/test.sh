#!/usr/bin/env bash
# Install Trawler with its test tools into .venv and run the whole test suite.
# This is the README's test command; CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/ruff check trawler tests bench
.venv/bin/mypy trawler
.venv/bin/python -m pytest "$@"
