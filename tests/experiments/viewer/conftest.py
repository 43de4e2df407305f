"""Data directories with finished experiments for the viewer's tests (see support.viewer_run and
support.pattern_runs)."""

import pytest
from support.pattern_runs import pattern_run
from support.viewer_run import viewer_run


@pytest.fixture(scope="session")
def viewer_home(tmp_path_factory, humaneval_problems):
    home = tmp_path_factory.mktemp("viewer") / "home"
    return home, viewer_run(home, humaneval_problems)


@pytest.fixture(scope="session")
def pattern_home(tmp_path_factory, humaneval_problems):
    """scratchpad, architect and tree search finished on two problems (support.pattern_runs)."""
    home = tmp_path_factory.mktemp("patterns") / "home"
    return home, pattern_run(home, humaneval_problems)
