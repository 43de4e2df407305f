"""The documentation's generated pages: references read from the code (the CLI's parser, the spec's
pydantic models, the pipeline registry, the exit codes) and the performance page from its data and
the benchmark scripts' docstrings, and the example plugin's README as a page, so none of them can
drift from what the code (or the file) says.
:mod:`critiquelab.experiments.docgen.mkdocs_hook` adds them to the site at build time (``mkdocs build``);
:func:`generated_pages` returns them as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def page_makers(root: Path) -> dict[str, Callable[[], str]]:
    """Path of each generated page (relative to ``docs/``) -> what writes it; ``root`` is the
    repository (for the data files pages are rendered from). Imports happen when a page is made."""

    def cli() -> str:
        from critiquelab.experiments.cli.parser import build_parser
        from critiquelab.experiments.docgen.cli_reference import cli_page

        return cli_page(build_parser())

    def spec() -> str:
        from critiquelab.experiments.docgen.spec_reference import spec_page

        return spec_page()

    def pipelines() -> str:
        from critiquelab.experiments.docgen.pipeline_reference import pipelines_page
        from critiquelab.pipelines.registry import describe_pipelines

        return pipelines_page(describe_pipelines())

    def exit_codes() -> str:
        from critiquelab.experiments.docgen.pipeline_reference import exit_codes_page

        return exit_codes_page()

    def study_files() -> str:
        from critiquelab.experiments.docgen.study_reference import study_files_page

        return study_files_page()

    def performance() -> str:
        from critiquelab.experiments.docgen.performance import performance_page

        return performance_page(root / "docs" / "data" / "timings.csv", root / "benchmarks")

    def example_pipeline() -> str:
        # The example package's README, as its author keeps it beside the code (docs/ excludes the
        # package's folder, whose tests run what it shows).
        readme = Path("docs/examples/critiquelab_example_pipeline/README.md")
        text = (root / readme).read_text(encoding="utf-8") if (root / readme).is_file() else "# The example\n"
        return f"{text}\n---\n*This page is `{readme.as_posix()}`, the example package's README.*\n"

    return {
        "guides/example-pipeline.md": example_pipeline,
        "reference/cli.md": cli,
        "reference/spec.md": spec,
        "reference/pipelines.md": pipelines,
        "reference/exit-codes.md": exit_codes,
        "reference/study-files.md": study_files,
        "performance.md": performance,
    }


def generated_pages(root: Path) -> dict[str, str]:
    """Every generated page's text, by its path under ``docs/``: the references and one page per
    committed study (:mod:`critiquelab.experiments.docgen.study_pages`)."""
    from critiquelab.experiments.docgen.study_pages import study_pages

    return {**{path: make() for path, make in page_makers(root).items()}, **study_pages(root)}
