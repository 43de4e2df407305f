"""The progress bar of one pipeline × seed."""

from __future__ import annotations

import pytest

from critiquelab.eval.results import ProblemResult, Status
from critiquelab.experiments.progress import ProgressBar


def _result(passed: bool) -> ProblemResult:
    return ProblemResult(task_id="T/0", pipeline="p", seed=0,
                         status=Status.PASSED if passed else Status.FAILED, completion_tokens=10)


def test_a_resumed_run_shows_its_finished_problems_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    bar = ProgressBar("p seed=0", total=41)
    bar.resumed([_result(True)] * 30 + [_result(False)])
    shown = capsys.readouterr().err.split("\r")[-1]
    assert "31/41" in shown  # not 0/41 until the first new problem ends
    assert "pass=97%" in shown and "tokens=310" in shown
    bar.close()
