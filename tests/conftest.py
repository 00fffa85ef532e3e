"""Session-wide servers for the distributed tests (see tests/servers.py).

Each server starts on first use, once per test session. When its binaries are
missing and cannot be installed, its tests are skipped with the reason, or fail
in CI (``CI`` set: tests/servers.py ``unavailable``).
Tests that kill a session server must restart it (``redis_server.restart()``);
tests that want one of their own call ``start_redis`` / ``start_postgres``.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from tests.servers import (
    PostgresServer,
    RedisServer,
    ServerUnavailable,
    start_postgres,
    start_redis,
    unavailable,
)


def _own_redis(prefix: str) -> Iterator[RedisServer]:
    """A redis-server in a directory of its own, removed with it."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        server = start_redis(tmp)
    except ServerUnavailable as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        unavailable("redis-server", exc)
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    yield from _own_redis("trawler-redis-")


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's redis-server, emptied for each test. What a job keeps per host
    is shared with every later job by design (robots.txt answers, politeness): a
    later test whose server got the same address and port inherited an earlier
    test's robots.txt (404: allow all) and fetched a disallowed page (CI,
    test_rules.py::test_meta_robots_and_x_robots_tag[distributed])."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url


@pytest.fixture(scope="module")
def module_redis_url() -> Iterator[str]:
    """A redis-server of the module's own, for module-scoped deployments: the
    session's is emptied before every test (``redis_url``), which would wipe a
    crawl or a serve that lives across the module's tests."""
    for server in _own_redis("trawler-redis-module-"):
        yield server.url


def _postgres_or_skip() -> PostgresServer:
    try:
        return start_postgres()
    except ServerUnavailable as exc:
        unavailable("PostgreSQL", exc)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = _postgres_or_skip()
    yield server
    server.stop()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A private server, for tests that stop it."""
    server = _postgres_or_skip()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    return postgres_server.url


@pytest.fixture
def fresh_postgres_url(postgres_server: PostgresServer) -> str:
    """An empty database of this test's own (about 0.1 s to create)."""
    return postgres_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
