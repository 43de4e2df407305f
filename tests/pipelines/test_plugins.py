"""Pipelines from outside the package: named by module or file in a spec, installed through the
``critiquelab.pipelines`` entry-point group (as critiquelab's own are), listed by ``critiquelab
pipelines``; a plugin that fails to load or takes a taken name is one line, exit 2."""

import textwrap

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.plugins import EXAMPLE, fake_distribution, on_path, pip_install
from support.role_responder import role_responder

from critiquelab.core.errors import UserError
from critiquelab.experiments.cli.main import main
from critiquelab.pipelines.registry import describe_pipelines, pipeline_names, registered_name

# A pipeline of a user's own: baseline's coder, told to shout. Registered under "shout".
SHOUT = textwrap.dedent('''
    import dspy
    from critiquelab.runtime.agents import TaskContext
    from critiquelab.pipelines.baseline import BaselineOutcome, BaselineParams
    from critiquelab.pipelines.coder_agent import CoderAgent
    from critiquelab.runtime.pool.context import current_pool
    from critiquelab.pipelines.registry import register_pipeline
    from critiquelab.pipelines.threads import run_thread
    from critiquelab.signatures.coder import Coder


    class ShoutParams(BaselineParams):
        """No params."""


    @register_pipeline("shout", params=ShoutParams, outcome=BaselineOutcome, roles=("coder",))
    class Shout(dspy.Module):
        """The coder, told to shout."""

        def __init__(self, params=None):
            super().__init__()
            self.params = params or ShoutParams()
            self.coder = dspy.Predict(Coder.with_instructions("SHOUT. " + Coder.instructions))

        def forward(self, prompt, entry_point="", task_id=""):
            ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
            return run_thread(ctx, [CoderAgent(ctx, self.coder)], BaselineOutcome)
''')


def _solving(problems):
    solutions = {p.prompt: p.prompt + p.canonical_solution for p in problems}
    return {"coder": lambda text: {"code": next(s for p, s in solutions.items() if p.strip() in text)}}


def _run_spec(spec_path, problems, home):
    from critiquelab.experiments.api import run

    with FakeOpenAIServer(role_responder(_solving(problems))) as fake:
        spec = yaml.safe_load(spec_path.read_text())
        spec["model"]["api_base"] = fake.api_base
        spec_path.write_text(yaml.safe_dump(spec))
        result = run(spec_path, home=home, progress=False)
        asked = [str(r["messages"][0]["content"]) for r in fake.requests]
        shouted = all("SHOUT." in text for text in asked if "Reply with OK." not in text)
    return result, shouted


def _spec(name):
    return {"name": "plugins", "dataset": {"source": "humaneval", "limit": 2}, "seeds": [0],
            "model": {"id": "openai/fake", "num_retries": 0}, "pipelines": [{"name": name}]}


def test_a_file_named_in_a_spec_is_found_beside_the_spec_and_runs(tmp_path, monkeypatch, humaneval_problems):
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_pipes.py").write_text(SHOUT)
    spec_path = project / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(_spec("my_pipes.py:Shout")))
    monkeypatch.chdir(tmp_path)  # elsewhere: the path is the spec's neighbour, not the cwd's
    result, shouted = _run_spec(spec_path, humaneval_problems, tmp_path / "home")
    (child,) = result.children
    assert shouted and [r.status for r in child.results] == ["passed", "passed"]
    assert child.pipeline == "shout"  # the label: its registered name
    # The run records the file by its absolute path, so compare finds it from anywhere.
    assert registered_name(f"{project / 'my_pipes.py'}:shout") == "shout"


def test_a_module_named_in_a_spec_runs_and_is_listed(tmp_path, monkeypatch, humaneval_problems, capsys):
    package = tmp_path / "lab" / "team_pipes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "shouting.py").write_text(SHOUT)
    monkeypatch.syspath_prepend(str(tmp_path / "lab"))
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(_spec("team_pipes.shouting:shout")))
    result, shouted = _run_spec(spec_path, humaneval_problems, tmp_path / "home")
    assert shouted and result.children[0].pipeline == "shout"
    assert main(["pipelines", "team_pipes.shouting:Shout", "baseline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("team_pipes.shouting:Shout: The coder, told to shout.")
    assert "\nbaseline: " in out and "\ndebate: " not in out  # only those named


@pytest.mark.parametrize(("name", "expected"), [
    ("missing.py:Shout", "pipeline 'missing.py:Shout': no file missing.py"),
    ("no_such_module_here:Shout", "no_such_module_here fails to import: ModuleNotFoundError"),
    ("broken.py:Shout", "broken.py fails to import: ZeroDivisionError: division by zero"),
    ("my_pipes.py:Whisper", "registers no pipeline named or defined as 'Whisper' (it registers: shout)"),
    ("my_pipes.py:", "expected package.module:Name or path/to/file.py:Name"),
    ("baseline_copy.py:baseline", "registers the name 'baseline', which an installed pipeline has"),
])
def test_a_bad_reference_is_one_line_exit_2(tmp_path, monkeypatch, capsys, name, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_pipes.py").write_text(SHOUT)
    (tmp_path / "broken.py").write_text("1 / 0\n")
    (tmp_path / "baseline_copy.py").write_text(SHOUT.replace('"shout"', '"baseline"'))
    assert main(["pipelines", name]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err


def _plugin(tmp_path, entry_points, modules):
    return on_path(fake_distribution(tmp_path / "site", "team-plugin", entry_points, modules))


@pytest.mark.parametrize(("entry_points", "modules", "expected"), [
    ("[critiquelab.pipelines]\nbaseline = team_dup:Shout\n",
     {"team_dup.py": SHOUT.replace('"shout"', '"baseline"')},
     "pipeline 'baseline' is registered twice: by entry point "
     "'baseline = critiquelab.pipelines.baseline:Baseline' "
     "of critiquelab (critiquelab.pipelines) and by entry point 'baseline = team_dup:Shout' of team-plugin"),
    ("[critiquelab.pipelines]\nbroken = team_broken:Shout\n",
     {"team_broken.py": "import no_such_dependency\n"},
     "entry point 'broken = team_broken:Shout' of team-plugin (critiquelab.pipelines) fails to load: "
     "ModuleNotFoundError: No module named 'no_such_dependency'"),
    ("[critiquelab.pipelines]\nloud = team_loud:Shout\n", {"team_loud.py": SHOUT},
     "registers pipeline 'shout'; name the entry point 'shout'"),
    ("[critiquelab.pipelines]\nshout = team_x:dspy\n", {"team_x.py": "import dspy\n"},
     "not a pipeline (a class decorated with @register_pipeline)"),
    ("[critiquelab.formats]\nhumaneval = team_f:FORMAT\n",
     {"team_f.py": "from critiquelab.eval.formats.humaneval import FORMAT as F\nimport dataclasses\n"
                   "FORMAT = dataclasses.replace(F)\n"},
     "dataset format 'humaneval' is registered twice"),
])
def test_a_bad_plugin_is_one_line_exit_2(tmp_path, capsys, entry_points, modules, expected):
    with _plugin(tmp_path, entry_points, modules):
        code = main(["pipelines"]) if "pipelines" in entry_points else main(
            ["run", "x.yaml", "--format", "humaneval"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err


def test_an_installed_plugin_is_listed_and_goes_when_uninstalled(tmp_path, capsys):
    with _plugin(tmp_path, "[critiquelab.pipelines]\nshout = team_shout:Shout\n", {"team_shout.py": SHOUT}):
        assert "shout" in pipeline_names()
        assert main(["pipelines", "shout"]) == 0
        assert capsys.readouterr().out.startswith("shout: The coder, told to shout.")
    assert "shout" not in pipeline_names()
    with pytest.raises(UserError, match="unknown pipeline 'shout'; registered: architect, baseline"):
        describe_pipelines(["shout"])


def test_the_example_package_installs_and_is_listed_with_its_params_and_roles(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with on_path(pip_install(EXAMPLE, tmp_path)):
        assert main(["pipelines"]) == 0
        out = capsys.readouterr().out
    block = next(b for b in out.split("\n\n") if b.startswith("plan_first: "))
    assert "  max_steps  int   5        >= 1, <= 12" in block
    assert "  roles: planner, coder" in block.splitlines()
    assert not list(EXAMPLE.rglob("*.egg-info")) and not (EXAMPLE / "build").exists()  # checkout untouched


def test_an_installed_dataset_format_is_one_a_spec_and_run_format_can_name(tmp_path):
    from critiquelab.experiments.api import load_experiment
    from critiquelab.experiments.cli.parser import build_parser

    spec = {**_spec("baseline"), "dataset": {"source": "humaneval", "format": "team_rows"}}
    spec["model"]["api_base"] = "http://127.0.0.1:9/v1"
    with pytest.raises(UserError, match=r"dataset.format: unknown dataset format 'team_rows'; "
                                        r"known: evalplus, humaneval, mbpp"):
        load_experiment(spec)
    module = ("import dataclasses\nfrom critiquelab.eval.formats.humaneval import FORMAT as F\n"
              "FORMAT = dataclasses.replace(F, name='team_rows')\n")
    with _plugin(tmp_path, "[critiquelab.formats]\nteam_rows = team_rows:FORMAT\n", {"team_rows.py": module}):
        assert load_experiment(spec).dataset.format == "team_rows"
        args = build_parser().parse_args(["run", "x.yaml", "--format", "team_rows"])
        assert args.format == "team_rows"


def test_a_plugins_code_is_part_of_its_checkpoint_key(tmp_path):
    """code_fingerprint covers only the project's packages: an edited plugin must not reuse the
    results of its earlier code, and a spec of built-ins keeps the key it had."""
    from critiquelab.experiments.api import load_experiment
    from critiquelab.experiments.checkpoints import outside_code

    (tmp_path / "my_pipes.py").write_text(SHOUT)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(_spec("my_pipes.py:Shout")))
    before = outside_code(load_experiment(spec_path))
    (tmp_path / "my_pipes.py").write_text(SHOUT.replace("SHOUT. ", "WHISPER. "))
    after = outside_code(load_experiment(spec_path))
    assert len(before) == 1 and before.keys() == after.keys() and before != after
    assert outside_code(load_experiment(_spec("baseline"))) == {}
