"""The blocklist and politeness routes over an in-memory ``OperatorControls`` (the
runner's lands separately; `trawler serve` without one answers 501, see
tests/e2e/test_api_serve.py)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from trawler.api.app import create_app
from trawler.api.datadir import DataDirJobs
from trawler.api.deps import ApiSettings


class Controls:
    """What the runner keeps, in a dict: enough to drive the HTTP layer."""

    def __init__(self) -> None:
        self.blocked: dict[str, dict] = {}
        self.settings = {"delay": None, "max_crawl_delay": None, "concurrency": None}

    async def blocklist(self) -> list[dict]:
        return list(self.blocked.values())

    async def block(self, domain: str, reason: str) -> dict:
        if "." not in domain:
            raise ValueError(f"{domain!r} is not a domain")
        self.blocked[domain] = {"domain": domain, "reason": reason, "added_at": 1.0}
        return self.blocked[domain]

    async def unblock(self, domain: str) -> bool:
        if "." not in domain:
            raise ValueError(f"{domain!r} is not a domain")
        return self.blocked.pop(domain, None) is not None

    async def politeness(self) -> dict:
        return dict(self.settings)

    async def set_politeness(self, delay, max_crawl_delay, concurrency) -> dict:  # type: ignore[no-untyped-def]
        self.settings = {"delay": delay, "max_crawl_delay": max_crawl_delay,
                         "concurrency": concurrency}  # fmt: skip
        return dict(self.settings)


def client(tmp_path: Path) -> TestClient:
    app = create_app(DataDirJobs(tmp_path), ApiSettings("token-123"), Controls())
    return TestClient(app, headers={"Authorization": "Bearer token-123"})


def test_blocklist_add_list_remove(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        added = api.post("/api/v1/admin/blocklist", json={"domain": "spam.example", "reason": "x"})
        assert added.status_code == 201 and added.json()["domain"] == "spam.example"
        assert [e["domain"] for e in api.get("/api/v1/admin/blocklist").json()] == ["spam.example"]
        assert api.delete("/api/v1/admin/blocklist/spam.example").status_code == 204
        assert api.delete("/api/v1/admin/blocklist/spam.example").status_code == 404
        # Not a domain at all: it cannot be blocked, so it is not (never a 500).
        assert api.delete("/api/v1/admin/blocklist/nodots").status_code == 404
        bad = api.post("/api/v1/admin/blocklist", json={"domain": "nodots"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "domain"]


def test_politeness_is_read_and_set(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        assert api.get("/api/v1/admin/settings/politeness").json()["delay"] is None
        answer = api.put("/api/v1/admin/settings/politeness", json={"delay": 2, "concurrency": 8})
        assert answer.json() == {"delay": 2.0, "max_crawl_delay": None, "concurrency": 8}
        bad = api.put("/api/v1/admin/settings/politeness", json={"concurrency": 0})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "concurrency"]
        assert api.get("/api/v1/admin/blocklist", headers={"Authorization": ""}).status_code == 401
