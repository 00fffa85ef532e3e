"""The server fixtures really run: a query on PostgreSQL, SET/GET on Redis, AOF survives."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
import redis

from tests.servers import PostgresServer, RedisServer, start_redis


def test_postgres_answers_a_query(postgres_server: PostgresServer, postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT current_database(), current_setting('fsync')").fetchone()
    assert row == ("trawler_test", "off")
    assert postgres_server.process is not None and postgres_server.process.poll() is None


def test_fresh_databases_are_separate(fresh_postgres_url: str, postgres_url: str) -> None:
    assert fresh_postgres_url != postgres_url
    with psycopg.connect(fresh_postgres_url) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == (None,)


def test_redis_set_get_and_aof_survives_restart(redis_server: RedisServer, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set("trawler:test:key", "value")
    redis_server.restart()
    assert redis_server.url == redis_url  # same port: clients reconnect
    client = redis.Redis.from_url(redis_url)
    assert client.get("trawler:test:key") == b"value"
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    client.delete("trawler:test:key")


def test_each_test_gets_an_empty_redis(
    redis_server: RedisServer, request: pytest.FixtureRequest
) -> None:
    """Keys an earlier test left (a host's robots.txt answer, its politeness) are gone."""
    client = redis.Redis.from_url(redis_server.url)
    client.set("trawler:host:127.0.9.1:35253", "left by an earlier test")
    url = request.getfixturevalue("redis_url")
    assert redis.Redis.from_url(url).dbsize() == 0


def test_redis_kill_keeps_writes_older_than_the_fsync_interval(tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    try:
        client = redis.Redis.from_url(server.url)
        client.set("old", "1")
        time.sleep(1.5)  # appendfsync everysec: older than a second is on disk
        server.restart(kill=True)
        assert redis.Redis.from_url(server.url).get("old") == b"1"
    finally:
        server.stop()


def test_redis_without_appendonly_loses_data_on_restart(tmp_path: Path) -> None:
    """The AOF check above can fail: without AOF (and --save "") a restart is empty."""
    server = start_redis(tmp_path, appendonly=False)
    try:
        redis.Redis.from_url(server.url).set("k", "v")
        server.restart()
        assert redis.Redis.from_url(server.url).get("k") is None
    finally:
        server.stop()
