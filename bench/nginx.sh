#!/usr/bin/env bash
# Serve the generated benchmark web with nginx on loopback (127.0.x.y:PORT).
#
#   bench/nginx.sh [start] [--hosts 1000] [--pages 20] [--port 8800] [--out DIR] [--workers N]
#   bench/nginx.sh stop [--out DIR]
#
# start installs nginx from Debian when missing, writes the site with
# bench/make_nginx_site.py, (re)starts nginx on it and prints "ready".
# Seeds: DIR/seeds.txt. Access log (JSON lines): DIR/logs/access.log.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=bench/work/site
ACTION=start
if [[ $# -gt 0 && $1 != --* ]]; then
    ACTION=$1
    shift
fi
ARGS=("$@")
while [[ $# -gt 0 ]]; do
    case $1 in
        --out) OUT=$2; shift 2 ;;
        *) shift ;;
    esac
done
OUT=$(realpath -m "$OUT")

nginx_bin() {
    command -v nginx || echo /usr/sbin/nginx
}

ensure_nginx() {
    [[ -x $(nginx_bin) ]] && return
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    # Keep the package's own service (port 80 on all interfaces) from starting.
    local made_policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx-light \
        || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx
    [[ -n $made_policy ]] && $sudo rm -f /usr/sbin/policy-rc.d
    return 0
}

run_nginx() {
    "$(nginx_bin)" -p "$OUT" -c "$OUT/nginx.conf" -e "$OUT/logs/error.log" "$@"
}

stop_nginx() {
    [[ -f $OUT/nginx.pid ]] || return 0
    local pid
    pid=$(cat "$OUT/nginx.pid")
    run_nginx -s quit || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    echo "nginx $pid did not stop" >&2
    return 1
}

case $ACTION in
    start)
        ensure_nginx
        stop_nginx
        "$PYTHON" bench/make_nginx_site.py "${ARGS[@]}"
        rm -f "$OUT/logs/access.log"
        run_nginx -t -q
        run_nginx
        for _ in $(seq 50); do
            [[ -s $OUT/nginx.pid ]] && break
            sleep 0.1
        done
        echo "nginx $(cat "$OUT/nginx.pid") serving $(wc -l <"$OUT/seeds.txt") hosts; seeds in $OUT/seeds.txt"
        echo ready
        ;;
    stop)
        stop_nginx
        ;;
    *)
        echo "usage: $0 [start|stop] [--hosts N] [--pages N] [--port N] [--out DIR]" >&2
        exit 2
        ;;
esac
