#!/usr/bin/env bash
# Serve the generated benchmark web with nginx on loopback (127.0.x.y:PORT).
#
#   bench/nginx.sh [start] [--hosts 1000] [--pages 20] [--port 8800] [--out DIR] [--workers N]
#   bench/nginx.sh stop [--out DIR]
#   bench/nginx.sh install
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

# A web too large for one nginx is split over several instances (make_nginx_site.py
# shards()): nginx.conf, nginx-1.conf, ... with pid files nginx.pid, nginx-1.pid, ...
run_nginx() {  # CONF ARGS...
    local conf=$1
    shift
    "$(nginx_bin)" -p "$OUT" -c "$conf" -e "$OUT/logs/error.log" "$@"
}

confs() {
    ls "$OUT"/nginx.conf "$OUT"/nginx-*.conf 2>/dev/null || true
}

pid_file_of() {  # CONF
    local base
    base=$(basename "$1" .conf)
    echo "$OUT/$base.pid"
}

stop_nginx() {
    local conf pid_file pid status=0
    for pid_file in "$OUT"/nginx.pid "$OUT"/nginx-*.pid; do
        [[ -f $pid_file ]] || continue
        pid=$(cat "$pid_file")
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "nginx $pid did not stop" >&2
            status=1
        fi
        rm -f "$pid_file"
    done
    return $status
}

case $ACTION in
    start)
        ensure_nginx
        stop_nginx
        "$PYTHON" bench/make_nginx_site.py "${ARGS[@]}"
        rm -f "$OUT/logs/access.log"
        for conf in $(confs); do
            run_nginx "$conf" -t -q
            run_nginx "$conf"
            for _ in $(seq 50); do
                [[ -s $(pid_file_of "$conf") ]] && break
                sleep 0.1
            done
        done
        echo "nginx ($(confs | wc -l) instance(s)) serving $(wc -l <"$OUT/seeds.txt") hosts; seeds in $OUT/seeds.txt"
        echo ready
        ;;
    stop)
        stop_nginx
        ;;
    install)  # only that: run_crawl_pair.py, before two starts at once race apt-get
        ensure_nginx
        ;;
    *)
        echo "usage: $0 [start|stop|install] [--hosts N] [--pages N] [--port N] [--out DIR]" >&2
        exit 2
        ;;
esac
