#!/usr/bin/env bash
# Install Trawler into .venv, serve the generated test web on loopback, crawl
# it into ./demo-crawl with the embedded store (SQLite + WARC), show the stats.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python.sh  # venv_python: $PYTHON, else an optimised build when there is one
if [ ! -x .venv/bin/python ]; then
  "$(venv_python)" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e .
PORT=${PORT:-8800}
.venv/bin/trawler testsite --hosts 20 --pages 50 --port "$PORT" > demo-testsite.out 2>&1 &
SITE_PID=$!
trap 'kill $SITE_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q ready demo-testsite.out 2>/dev/null && break; sleep 0.2; done
rm -rf demo-crawl
# The test web lives on 127.0.x.y, so private addresses must be allowed here.
.venv/bin/trawler crawl --seeds-file <(grep '^http' demo-testsite.out) --data demo-crawl \
  --scope any --delay 0.2 --allow-private
.venv/bin/trawler stats --data demo-crawl
.venv/bin/trawler export --data demo-crawl --format jsonl --output demo-crawl/pages.jsonl
echo "pages exported to demo-crawl/pages.jsonl; WARC files in demo-crawl/warc/"
