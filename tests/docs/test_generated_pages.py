"""The generated reference pages say what the code says: every verb and option of the parser,
every field of the spec models, every registered pipeline and param, every exit code, and the
performance page's latest figures from its data (issue #55: documentation that cannot drift)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from critiquelab.core.errors import EXIT_MEANINGS, ExitCode, UserError
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.cli.parser import build_parser
from critiquelab.experiments.docgen import generated_pages
from critiquelab.experiments.docgen.cli_reference import cli_page
from critiquelab.experiments.docgen.markdown import cell
from critiquelab.experiments.docgen.performance import performance_page
from critiquelab.experiments.docgen.pipeline_reference import pipelines_page
from critiquelab.experiments.docgen.spec_reference import spec_page
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.pipelines.registry import describe_pipelines

ROOT = Path(__file__).resolve().parents[2]


def _options(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [(f"{prog} {name}", ""), *_options(sub, f"{prog} {name}")]
        elif not isinstance(action, argparse._HelpAction):
            found += [(prog, option) for option in action.option_strings]
    return found


def test_the_cli_page_lists_every_verb_and_option_of_the_parser() -> None:
    page = cli_page(build_parser())
    for command, option in _options(build_parser(), "critiquelab"):
        assert f"## `{command}`" in page or command == "critiquelab", command
        assert not option or f"`{option}" in page, (command, option)


def test_a_new_option_appears_without_touching_the_docs() -> None:
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    verbs.choices["compare"].add_argument("--brand-new", type=int, default=7, help="a new option")
    page = cli_page(parser)
    assert "| `--brand-new` | `BRAND_NEW` | `7` | a new option |" in page


def test_the_spec_page_gives_each_field_its_type_default_bounds_and_description() -> None:
    page = spec_page()
    field = ExperimentSpec.model_fields["concurrency"]
    assert f"| `concurrency` | int | `{field.default}` | ≥ 1, ≤ 64 | {cell(field.description)} |" in page
    assert "| `split` | str | `all` | `all`, `dev`, `test` |" in page  # a Literal's choices
    for section in ("{#run-dataset}", "{#run-model}", "{#run-pipelines}", "{#run-pipelines-roles-role}",
                    "{#run-pipelines-memory}", "{#run-execution}", "{#optimize-optimizer}"):
        assert section in page


def test_the_pipeline_page_has_every_registered_pipeline_and_param() -> None:
    entries = describe_pipelines()
    page = pipelines_page(entries)
    for entry in entries:
        assert f"## `{entry['name']}`" in page
        for param in entry["params"]:
            assert f"| `{param['name']}` |" in page


def test_the_exit_codes_are_those_the_cli_returns(capsys: pytest.CaptureFixture[str]) -> None:
    page = generated_pages(ROOT)["reference/exit-codes.md"]
    assert set(EXIT_MEANINGS) == set(ExitCode)
    for code in ExitCode:
        assert f"| `{int(code)}` |" in page
    assert main(["run"]) == ExitCode.BAD_INPUT  # a usage error: the code the page gives for bad input


def test_the_performance_page_shows_the_latest_figure_of_each_measure(tmp_path: Path) -> None:
    data = tmp_path / "timings.csv"
    data.write_text("measure,date,value,unit,machine,source,note\n"
                    "job,2026-12-05,22.4,min,m,cmd,latest\njob,2026-11-23,17.0,min,m,cmd,older\n")
    page = performance_page(data)
    current = page.split("## Current")[1].split("## History")[0]
    assert "22.4 min" in current and "17.0 min" not in current
    assert "17.0 min" in page.split("## History")[1]
    data.write_text("measure,date,value\njob,2026-12-05,22.4\n")
    with pytest.raises(UserError, match="missing column"):
        performance_page(data)


def test_the_shipped_timings_render() -> None:
    assert "## Current" in generated_pages(ROOT)["performance.md"]


def test_prose_in_a_cell_stays_one_line_and_shows_as_written() -> None:
    assert cell("a | b\n<dir> 2**3 [a-z] `x|y`") == r"a \| b &lt;dir&gt; 2\*\*3 \[a-z] `x\|y`"


def test_the_worked_example_page_is_the_example_packages_readme() -> None:
    readme = ROOT / "docs" / "examples" / "critiquelab_example_pipeline" / "README.md"
    assert generated_pages(ROOT)["guides/example-pipeline.md"].startswith(readme.read_text())
