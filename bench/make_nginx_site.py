"""Write the generated test web (trawler.sitegen) as static files plus an nginx.conf.

    python bench/make_nginx_site.py --hosts 1000 --pages 20 --port 8800 --out bench/work/site

Layout under --out::

    nginx.conf              one server block per host address (nginx-1.conf, ...: the
                            further instances of a web too large for one, see shards())
    logs/access.log         JSON lines (see LOG_FORMAT); logs/error.log; nginx.pid
    tmp/                    nginx temp paths
    127.0.1.1/index.html    "/" of host 0
    127.0.1.1/p/3.html      /p/3.html
    127.0.1.1/list/2.html   /list.html?page=2&sort=asc (mapped with try_files)
    127.0.1.1/files/0.pdf   ...

nginx serves the same bytes as ``python -m trawler.testsite`` with the same
spec, so Site.reachable()/forbidden() hold for both. Start and stop it with
bench/nginx.sh.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from trawler.sitegen import Site, SiteSpec  # noqa: E402

# nginx logs when the response is done: $msec is that time, so the request
# arrived at t - rt. Field names otherwise match trawler.testsite's log.
LOG_FORMAT = (
    '\'{"t":$msec,"rt":$request_time,"host":"$server_addr:$server_port",'
    '"method":"$request_method","path":"$request_uri","request":"$request",'
    '"status":$status,"bytes":$body_bytes_sent,"ua":"$http_user_agent",'
    '"cr":$connection_requests}\''
)

HTTP_BLOCK = """\
{user}worker_processes {workers};
worker_rlimit_nofile {nofile};
pid {out}/{pid_file};
error_log {out}/logs/error.log warn;

events {{
    worker_connections {connections};
}}

http {{
    types {{
        text/html html;
        text/plain txt;
        application/xml xml;
        application/pdf pdf;
        image/jpeg jpg;
    }}
    default_type application/octet-stream;
    charset utf-8;
    charset_types text/plain;  # text/html is always included
    log_format trawler escape=json {log_format};
    access_log {out}/logs/access.log trawler;
    client_body_temp_path {out}/tmp/body;
    proxy_temp_path {out}/tmp/proxy;
    fastcgi_temp_path {out}/tmp/fastcgi;
    uwsgi_temp_path {out}/tmp/uwsgi;
    scgi_temp_path {out}/tmp/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    server_tokens off;
    # No open_file_cache: it holds a descriptor per cached file, and a web of
    # 2,000 hosts x 40 files ran nginx out of descriptors (accept4() and open()
    # failed with EMFILE: 500s, 404s and stalled connections). open() on a file
    # in the page cache costs far less than a request.

{servers}}}
"""

SERVER_BLOCK = """\
    server {{
        listen {address}:{port} backlog=4096;
        root {out}/{address};
        location = /list.html {{
            if ($arg_page !~ "^[1-9][0-9]*$") {{ return 404; }}
            try_files /list/$arg_page.html =404;
        }}
        location /list/ {{ internal; }}
    }}
"""


def file_for(path: str) -> str:
    """URL path (normalised query) → file path relative to the host's root."""
    if path == "/":
        return "index.html"
    if path.startswith("/list.html?"):
        page = path.split("page=", 1)[1].split("&", 1)[0]
        return f"list/{page}.html"
    return path.lstrip("/")


def write_host(site: Site, i: int, root: Path) -> int:
    count = 0
    for path in site.paths(i):
        response = site.page(i, path)
        assert response is not None and response.status == 200, path
        target = root / file_for(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(response.body)
        count += 1
    return count


def descriptor_limits() -> tuple[int, int]:
    """(worker_rlimit_nofile, worker_connections) that fit this machine.

    nginx may only raise its soft limit up to the hard one (a container often
    caps it, e.g. 20000). Each connection takes a descriptor, and so do the
    listening sockets (one per host) and the files being sent.
    """
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile = 65536 if hard == resource.RLIM_INFINITY else min(65536, hard)
    return nofile, max(1024, min(16384, nofile // 2))


def shards(hosts: int) -> int:
    """nginx instances needed for ``hosts`` listening sockets.

    Every listening socket of an instance counts against its
    worker_connections and takes a descriptor, and a process may not hold more
    descriptors than the hard limit (a container's is often 20,000): one
    instance cannot listen on 20,000 addresses ("worker_connections are not
    enough for 20000 listening sockets"). Each instance is its own process
    with its own limit, so a large web is split over several, each keeping
    half its connections for clients.
    """
    _nofile, connections = descriptor_limits()
    per_instance = max(1, connections // 2)
    return -(-hosts // per_instance)


def conf_name(shard: int) -> str:
    return "nginx.conf" if shard == 0 else f"nginx-{shard}.conf"


def nginx_conf(site: Site, out: Path, workers: str, shard: int = 0, of: int = 1) -> str:
    """The configuration of instance ``shard`` of ``of``: every of-th host from shard.
    All instances append to one access log (one write() a line, O_APPEND)."""
    servers = "".join(
        SERVER_BLOCK.format(address=site.address(i), port=site.spec.port, out=out)
        for i in range(shard, site.spec.hosts, of)
    )
    # As root, workers would drop to the build's default user (www-data), which
    # may not read a checkout under a private home: keep them as the caller.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    nofile, connections = descriptor_limits()
    pid_file = "nginx.pid" if shard == 0 else f"nginx-{shard}.pid"
    return HTTP_BLOCK.format(
        user=user, workers=workers, nofile=nofile, connections=connections, pid_file=pid_file,
        out=out, log_format=LOG_FORMAT, servers=servers,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--port", type=int, default=8800)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", default="1", help="worker_processes: a number or auto")
    parser.add_argument("--out", type=Path, default=Path("bench/work/site"))
    args = parser.parse_args(argv)
    out = args.out.resolve()
    site = Site(SiteSpec(hosts=args.hosts, pages=args.pages, port=args.port, seed=args.seed))
    for i in range(site.spec.hosts):
        shutil.rmtree(out / site.address(i), ignore_errors=True)
    files = sum(write_host(site, i, out / site.address(i)) for i in range(site.spec.hosts))
    for sub in ("logs", "tmp"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for old in out.glob("nginx-*.conf"):
        old.unlink()
    count = shards(site.spec.hosts)
    for shard in range(count):
        conf = nginx_conf(site, out, args.workers, shard, count)
        (out / conf_name(shard)).write_text(conf, encoding="utf-8")
    (out / "seeds.txt").write_text("\n".join(site.seeds()) + "\n", encoding="utf-8")
    print(f"wrote {files} files for {site.spec.hosts} hosts and {count} nginx configuration(s)")


if __name__ == "__main__":
    main()
