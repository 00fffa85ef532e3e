"""Job states: every transition the issue's state machine allows, and no other."""

from __future__ import annotations

import itertools

import pytest

from trawler.jobs.model import InvalidTransition, JobState, check_transition

S = JobState
ALLOWED = {
    (S.PENDING, S.RUNNING), (S.PENDING, S.PAUSED), (S.PENDING, S.FINISHED),
    (S.PENDING, S.CANCELLED), (S.PENDING, S.FAILED),
    (S.RUNNING, S.PAUSED), (S.RUNNING, S.FINISHED), (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.FAILED),
    (S.PAUSED, S.RUNNING), (S.PAUSED, S.CANCELLED), (S.PAUSED, S.FAILED),
}  # fmt: skip


@pytest.mark.parametrize(("current", "wanted"), list(itertools.product(S, S)))
def test_transition(current: JobState, wanted: JobState) -> None:
    if (current, wanted) in ALLOWED:
        check_transition("j1", current, wanted)
    else:
        with pytest.raises(InvalidTransition, match=f"job j1 is {current}"):
            check_transition("j1", current, wanted)


def test_ended_states_are_final() -> None:
    assert {s for s in S if s.ended} == {S.FINISHED, S.CANCELLED, S.FAILED}
