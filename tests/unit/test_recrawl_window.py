"""`trawler recrawl`'s window: the options given, the job's own settings for the rest."""

from __future__ import annotations

import pytest
import typer

from trawler.cli_recrawl import job_window
from trawler.config import CrawlConfig
from trawler.recrawl import RevisitWindow

JOB = CrawlConfig(revisit_min_s=5.0, revisit_max_s=50.0, revisit_policy="proportional")


def test_a_recrawl_keeps_the_job_s_own_window_and_policy() -> None:
    assert job_window(JOB, None, None, None) == RevisitWindow(5.0, 50.0, "proportional")


def test_options_given_win_each_on_its_own() -> None:
    assert job_window(JOB, 10.0, None, None) == RevisitWindow(10.0, 50.0, "proportional")
    assert job_window(JOB, None, 500.0, "optimal") == RevisitWindow(5.0, 500.0, "optimal")


def test_a_minimum_past_the_job_s_maximum_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as exited:
        job_window(JOB, 100.0, None, None)
    assert exited.value.exit_code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--revisit-max 50" in err[0]
