"""A data directory with a finished experiment for the viewer's tests (see support.viewer_run)."""

import pytest
from support.viewer_run import viewer_run


@pytest.fixture(scope="session")
def viewer_home(tmp_path_factory, humaneval_problems):
    home = tmp_path_factory.mktemp("viewer") / "home"
    return home, viewer_run(home, humaneval_problems)
