"""The embedded store's read side for /hosts and /hosts/{host}: each host's
numbers, its politeness now, its robots.txt (sqlite_read.py: the other reads).

``host_row`` and ``current_interval_s`` serve both backends (api/pgreader.py).
"""

from __future__ import annotations

import sqlite3

from trawler.config import CrawlConfig
from trawler.politeness import HostSlot, PolitenessPolicy
from trawler.records import FetchResult
from trawler.robotscache import entry_from_fetch
from trawler.store.sqlite import ROBOTS_TXT_ONLY
from trawler.store.sqlite_read import FAILED, scalar

_HOST_PAGES = (
    "SELECT host, count(*), sum({failed}), avg(fetch_duration_s) FROM pages"
    " WHERE host IN ({marks}) GROUP BY host"
)


def _host_numbers(conn: sqlite3.Connection, hosts: list[str]) -> dict[str, tuple]:
    if not hosts:
        return {}
    sql = _HOST_PAGES.format(failed=FAILED, marks=", ".join("?" for _ in hosts))
    return {row[0]: row[1:] for row in conn.execute(sql, hosts)}


# /hosts?sort=: numeric sorts put the biggest first (the busiest, most failing,
# slowest), ties by name; the values as host_row rounds them.
HOST_ORDERS = {
    "host": "q.host",
    "fetched": "coalesce(p.fetched, 0) DESC, q.host",
    "queued": "q.queued DESC, q.host",
    "errors": "coalesce(p.failed, 0) DESC, q.host",
    "error_rate": "coalesce(round(1.0 * p.failed / p.fetched, 4), 0) DESC, q.host",
    "mean_response_s": "p.mean_s IS NULL, round(p.mean_s, 4) DESC, q.host",
}
_SORTED_HOSTS = (
    "SELECT q.host, q.queued FROM host_queues q LEFT JOIN (SELECT host, count(*) AS fetched,"
    " sum({failed}) AS failed, avg(fetch_duration_s) AS mean_s FROM pages GROUP BY host) p"
    " ON p.host = q.host ORDER BY {order} LIMIT ? OFFSET ?"
)


def host_rows(
    conn: sqlite3.Connection, offset: int, limit: int, sort: str = "host",
    config: CrawlConfig | None = None,
) -> tuple[list[dict], int]:  # fmt: skip
    """Hosts of the job in ``sort`` order (HOST_ORDERS): queued, fetched, errors, error
    rate, mean time, interval and back-off now, robots.txt. Any sort but the name's
    reads every page (no index by host): the API's one-off question."""
    total = int(scalar(conn, "SELECT count(*) FROM host_queues"))
    if sort == "host":
        sql = "SELECT host, queued FROM host_queues ORDER BY host LIMIT ? OFFSET ?"
    else:
        sql = _SORTED_HOSTS.format(failed=FAILED, order=HOST_ORDERS[sort])
    queues = conn.execute(sql, (limit, offset)).fetchall()
    names = [host for host, _ in queues]
    numbers = _host_numbers(conn, names)
    state = _politeness_now(conn, names, config or CrawlConfig())
    robots = _robots_summaries(conn, names, config.robots_token if config else "")
    return [
        {**host_row(host, queued, numbers.get(host)), **state[host], "robots": robots.get(host)}
        for host, queued in queues
    ], total


def current_interval_s(config: CrawlConfig, crawl_delay_s: float | None, backoff_s: float) -> float:
    """A host's interval now, by the crawler's own rule (politeness.py)."""
    slot = HostSlot("", crawl_delay_s=crawl_delay_s)
    slot.health.backoff_s = backoff_s
    return PolitenessPolicy.from_config(config).interval_s(slot)


def _politeness_now(
    conn: sqlite3.Connection, hosts: list[str], config: CrawlConfig
) -> dict[str, dict]:
    """host -> interval_s and backoff_s (None when not backed off)."""
    marks = ", ".join("?" for _ in hosts)
    kept = dict.fromkeys(hosts, (None, 0.0))
    if hosts:
        sql = f"SELECT host, crawl_delay_s, backoff_s FROM hosts WHERE host IN ({marks})"
        kept |= {host: (delay, backoff) for host, delay, backoff in conn.execute(sql, hosts)}
    return {
        host: {"interval_s": current_interval_s(config, delay, backoff or 0.0),
               "backoff_s": backoff or None}
        for host, (delay, backoff) in kept.items()
    }  # fmt: skip


def _robots_summaries(conn: sqlite3.Connection, hosts: list[str], token: str) -> dict[str, dict]:
    """host -> status, error, Crawl-delay of its newest robots.txt (none fetched: absent)."""
    sites = {f"{scheme}://{host}": host for host in hosts for scheme in ("http", "https")}
    if not sites:
        return {}
    rows = conn.execute(
        "SELECT site, status, error, body FROM robots"
        f" WHERE site IN ({', '.join('?' for _ in sites)}) AND {ROBOTS_TXT_ONLY}"
        " ORDER BY fetched_at",
        list(sites),
    )
    found = {}
    for site, status, error, body in rows:  # the newest of each host last: it stays
        result = FetchResult("", "", status=status, error=error, body=bytes(body))
        rules = entry_from_fetch(result, token, 0.0, None).rules
        found[sites[site]] = {"status": status, "error": error, "crawl_delay": rules.crawl_delay}
    return found


def host_row(host: str, queued: int, numbers: tuple | None) -> dict:
    """A host's row of /hosts from (fetched, failed, mean response s); both backends."""
    fetched, failed, mean_s = numbers or (0, 0, None)
    return {
        "host": host, "queued": queued, "fetched": fetched, "errors": failed or 0,
        "error_rate": round((failed or 0) / fetched, 4) if fetched else 0.0,
        "mean_response_s": round(mean_s, 4) if mean_s is not None else None,
    }  # fmt: skip


def host_report(conn: sqlite3.Connection, host: str, config: CrawlConfig) -> dict | None:
    """One host: its numbers, its politeness now, and its robots.txt."""
    queue = conn.execute("SELECT queued FROM host_queues WHERE host = ?", (host,)).fetchone()
    if queue is None:
        return None
    report = host_row(host, queue[0], _host_numbers(conn, [host]).get(host))
    kept = conn.execute(
        "SELECT last_sent_at, next_allowed_at, crawl_delay_s, backoff_s, failures,"
        " paused_until FROM hosts WHERE host = ?",
        (host,),
    ).fetchone()
    names = ("last_sent_at", "next_allowed_at", "crawl_delay_s", "backoff_s", "failures",
             "paused_until")  # fmt: skip
    state = dict(zip(names, kept, strict=True)) if kept else dict.fromkeys(names)
    report["interval_s"] = current_interval_s(
        config, state["crawl_delay_s"], state["backoff_s"] or 0.0
    )
    report["politeness"] = state
    report["robots"] = _host_robots(conn, host, config.robots_token)
    return report


def _host_robots(conn: sqlite3.Connection, host: str, token: str) -> list[dict]:
    """Each kept robots.txt of the host (one per scheme): status, Crawl-delay, fetch
    time, and the file itself."""
    rows = conn.execute(
        "SELECT site, status, error, body, fetched_at FROM robots WHERE site IN (?, ?)"
        f" AND {ROBOTS_TXT_ONLY} ORDER BY fetched_at DESC",
        (f"http://{host}", f"https://{host}"),
    )
    kept = []
    for site, status, error, body, fetched_at in rows:
        result = FetchResult("", "", status=status, error=error, body=bytes(body))
        rules = entry_from_fetch(result, token, 0.0, None).rules
        text = None if body is None else bytes(body).decode("utf-8", "replace")
        kept.append({"robots_url": site + "/robots.txt", "status": status, "error": error,
                     "crawl_delay": rules.crawl_delay, "fetched_at": fetched_at,
                     "text": text})  # fmt: skip
    return kept
