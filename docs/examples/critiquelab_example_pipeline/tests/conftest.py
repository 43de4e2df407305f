"""The example installed as a user installs it (pip, from its pyproject) for these tests: the
entry point, not an import of the source folder, is what makes ``plan_first`` a pipeline.

In critiquelab's checkout, ``support`` is its test helpers (tests/support). In a package of
your own, ``pip install -e .`` once instead, and drop this fixture."""

from collections.abc import Iterator

import pytest
from support.plugins import EXAMPLE, on_path, pip_install


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> object:
    return pip_install(EXAMPLE, tmp_path_factory.mktemp("example-plugin"))


@pytest.fixture(autouse=True)
def installed(example_site: object) -> Iterator[None]:
    with on_path(example_site):  # type: ignore[arg-type]
        yield
