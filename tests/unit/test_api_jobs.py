"""Pure parts of the API's jobs: the options of a new job, the completion estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.exceptions import RequestValidationError

from trawler.api.jobspec import as_options, job_config, job_seeds
from trawler.api.routes.jobs import estimated_completion
from trawler.api.schemas import JobRequest
from trawler.jobs.model import JobInfo, JobState


def test_options_keep_their_cli_names_both_ways() -> None:
    body = JobRequest(seeds=["http://example.com/"], delay=0.5, strip_param=["ref"],
                      robots_retry_wait=[1.0], max_crawl_delay=5, scope="domain")  # fmt: skip
    config = job_config(body, server_allows_private=False)
    assert (config.delay_s, config.strip_params, config.robots_retry_waits_s) == (
        0.5,
        ["ref"],
        [1.0],
    )
    assert config.max_crawl_delay_s == 5 and config.scope == "domain"
    options = as_options(config.model_dump(mode="json"))
    assert options["delay"] == 0.5 and options["strip_param"] == ["ref"]
    assert options["robots_retry_wait"] == [1.0] and "delay_s" not in options
    # No option of the API (yet): max_redirects; the continuous job's recrawl, window and
    # revisit policy; rendering's restart, memory and learning knobs (no CLI option either).
    assert set(options) - set(JobRequest.model_fields) == {
        "max_redirects",
        "recrawl",
        "revisit_min_s",
        "revisit_max_s",
        "revisit_policy",
        "render_restart_pages",
        "render_max_memory_mb",
        "render_host_misses",
    }


def test_a_bad_option_names_itself() -> None:
    body = JobRequest(seeds=["http://example.com/"], first_byte_timeout=0)
    with pytest.raises(RequestValidationError) as caught:
        job_config(body, server_allows_private=False)
    assert caught.value.errors()[0]["loc"] == ("body", "first_byte_timeout")


def test_seeds_are_normalised_and_private_ones_need_the_job_to_allow_them() -> None:
    body = JobRequest(seeds=["HTTP://Example.com:80/a?utm_source=x", "http://example.com/a"])
    assert job_seeds(body, job_config(body, False)) == ["http://example.com/a"]
    private = JobRequest(seeds=["http://10.1.2.3/"], allow_private=True)
    assert job_seeds(private, job_config(private, True)) == ["http://10.1.2.3/"]
    private.allow_private = None
    with pytest.raises(RequestValidationError):
        job_seeds(private, job_config(private, True))


def job(state: JobState, queued: int, pace: float, crawled: int = 10, **options: object) -> JobInfo:
    return JobInfo(id="j", state=state, options=dict(options), created_at=0.0,
                   pages_crawled=crawled, urls_queued=queued, pages_per_s=pace)  # fmt: skip


def test_completion_is_estimated_from_the_pace_and_the_page_budget() -> None:
    assert estimated_completion(job(JobState.RUNNING, 100, 10.0), now=1000.0) == 1010.0
    budget = job(JobState.RUNNING, 100, 10.0, crawled=10, max_pages=30)
    assert estimated_completion(budget, now=1000.0) == 1002.0  # 20 pages left of the budget
    assert estimated_completion(job(JobState.PAUSED, 100, 10.0), now=1000.0) is None
    assert estimated_completion(job(JobState.RUNNING, 100, 0.0), now=1000.0) is None


def test_render_without_chromium_here_is_a_422_naming_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`trawler serve --data` renders in its own process: a job asking for --render on a
    machine without chromium is refused at once, naming the field (it failed later,
    as a job that could not start). A distributed server does not render: no check."""
    from fastapi.testclient import TestClient

    from trawler.api.app import create_app
    from trawler.api.datadir import DataDirJobs
    from trawler.api.deps import ApiSettings

    monkeypatch.setattr("trawler.render.browser.CHROMIUM", tmp_path / "no-chromium")
    body = JobRequest(seeds=["http://example.com/"], render="auto")
    with pytest.raises(RequestValidationError) as caught:
        job_config(body, server_allows_private=False, renders_here=True)
    error = caught.value.errors()[0]
    assert error["loc"] == ("body", "render")
    assert str(tmp_path / "no-chromium") in error["msg"]
    assert job_config(body, False, renders_here=False).render == "auto"  # the workers'
    never = JobRequest(seeds=["http://example.com/"], render="never")
    assert job_config(never, False, renders_here=True).render == "never"

    app = create_app(DataDirJobs(tmp_path), ApiSettings("t", renders_here=True))
    with TestClient(app) as client:
        job = {"seeds": ["http://example.com/"], "render": "always"}
        answer = client.post("/api/v1/jobs", headers={"Authorization": "Bearer t"}, json=job)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "render"]
