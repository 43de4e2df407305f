"""`critiquelab pipelines`: every pipeline with its summary, a table of its typed params, its roles
and the figures its outcome model declares, fitted to the terminal's width."""

import re

from critiquelab.experiments.cli.main import main
from critiquelab.pipelines.registry import pipeline_names, validate_params


def _sections(out: str) -> dict[str, str]:
    blocks = [block for block in out.strip().split("\n\n") if ":" in block.splitlines()[0]]
    return {block.split(":", 1)[0]: block for block in blocks}


def _as_written(value: object) -> str:
    """A default as a YAML spec writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def test_lists_every_field_of_every_model_with_its_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per field, whatever the description's length
    assert main(["pipelines"]) == 0
    sections = _sections(capsys.readouterr().out)
    assert set(pipeline_names()) <= set(sections)
    for name in pipeline_names():
        defaults = validate_params(name, {})
        for field, info in type(defaults).model_fields.items():
            default = _as_written(getattr(defaults, field))
            line = re.search(rf"^  {field} +.*  {re.escape(default)} +.*$", sections[name], re.MULTILINE)
            assert line, f"{name}.{field} (default {default}) not listed:\n{sections[name]}"
            assert info.description in line.group(0)
    assert "no params" in sections["baseline"]
    assert "  roles: coder, critic, fixer, meta_critic" in sections["critic_loop"].splitlines()
    assert "  roles: coder, repairer, scorer, path_reflector" in sections["tree_search"].splitlines()
    # where a role's predictor is named otherwise, the listing says which serves it
    assert "  roles: coder (proposer), debater, judge" in sections["debate"].splitlines()
    topology = next(line for line in sections["debate"].splitlines() if line.split()[0] == "topology")
    assert topology.split()[1:5] == ["str", "full", "full,", "ring,"]


def test_fits_the_terminal_and_names_each_pipelines_figures(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["pipelines"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    sections = _sections(out)
    vote = " ".join(sections["vote"].split())  # the figures line wraps like the rest
    assert "samples, largest_group, greedy_answer, samples_passed" in vote.split("figures: ", 1)[1]
    distinguish = " ".join(sections["distinguish"].split())
    assert "candidates_passed" in distinguish.split("figures: ", 1)[1] and "selection_accuracy" not in vote
