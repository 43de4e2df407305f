"""Bad input: one line naming what is wrong, exit code 2, no traceback, nothing written."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.bad_params import BAD_PARAMS

from critiquelab.core.errors import UserError
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.spec.experiment import parse_spec


def _write(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def _run_cli(capsys, *args):
    code = main(list(args))
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\npipelines: [{name: baseline}\n", "malformed YAML at line"),
        ("name: x\npipelines: [{name: baseline}]\nseeds: [0, 0]\n", "seeds"),
        (
            "name: x\npipelines: [{name: baseline}]\nmodel: {temprature: 0.5}\n",
            "model.temprature: unknown field",
        ),
        ("name: x\npipelines: []\n", "pipelines"),
        ("name: x\npipelines: [{name: nope}]\n", "unknown pipeline 'nope'"),
        ("- just\n- a list\n", "expected a mapping"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {max_tokens: -1}\n",
         "model.max_tokens: must be >= 1 (got -1)"),  # as a pipeline param's range reads
        ("name: x\npipelines: [{name: baseline}]\nmodel: {temperature: 2.5}\n",
         "model.temperature: must be <= 2.0 (got 2.5)"),
        (
            "name: x\nconcurrency: 8\npipelines: [{name: vote, params: {parallel_agents: 16}}]\n",
            "concurrency 8 × pipeline 'vote' params.parallel_agents 16 = 128 model calls at once; at most 64",
        ),
        # an endpoint is an http(s) URL with a host; beside a bundled model (which the harness
        # serves itself) an endpoint URL or key would be silently ignored
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/x, api_base: 'ftp://h/v1'}\n",
         "model.api_base: must be an http:// or https:// URL with a host"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/x, api_base: 'localhost:8000'}\n",
         "model.api_base: must be an http:// or https:// URL with a host"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/x, api_base: 'http://127.0.0.1:99999/v1'}\n",
         "model.api_base: Port out of range 0-65535"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/x, api_base: 'http://[::1/v1'}\n",
         "model.api_base: Invalid IPv6 URL"),
        ("name: x\npipelines: [{name: baseline}]\npool: {chroma_url: 'http://127.0.0.1:99999'}\n",
         "pool.chroma_url: 'http://127.0.0.1:99999': Port out of range 0-65535"),
        ("name: x\npipelines: [{name: baseline}]\npool: {chroma_url: '[::1'}\n",
         "pool.chroma_url: '[::1': Invalid IPv6 URL"),
        ("name: x\npipelines: [{name: baseline}]\nexecution: {timeout_s: 1.0e+300}\n",
         "execution.timeout_s: must be <= 600.0 (got 1e+300)"),
        # a tag whose value the YAML library cannot construct
        ("name: x\npipelines: [{name: baseline}]\nseeds: [!!int '']\n", "malformed YAML: "),
        ("name: x\npipelines: [{name: baseline}]\nseeds: [!!bool foo]\n", "malformed YAML: "),
        ("name: x\npipelines: [{name: baseline}]\nseeds: [!!timestamp foo]\n", "malformed YAML: "),
        ("name: x\npipelines: [{name: baseline}]\nseeds: !!set [1]\n", "malformed YAML: "),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/x, api_base: 'http://a b.org/v1'}\n",
         "model.api_base: must not contain spaces"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {api_base: 'http://127.0.0.1:8000/v1'}\n",
         "model: api_base: 'local' is a bundled model the harness serves itself, so the URL would "
         "be ignored"),
        ("name: x\npipelines: [{name: baseline}]\nmodel: {id: local-1.5b, api_key_env: KEY}\n",
         "model: api_key_env: 'local-1.5b' is a bundled model the harness serves itself"),
        ("name: x\npipelines: [{name: critic_loop, roles: {critic: {model: local-1.5b, "
         "api_base: 'http://127.0.0.1:8000/v1'}}}]\n",
         "roles.critic: api_base: 'local-1.5b' is a bundled model the harness serves itself"),
        # settings that would be ignored: a cluster's under the local executor, a reply longer
        # than a bundled server's context
        ("name: x\nexecution: {address: 'head:6379', max_batch: 4, max_retries: 3}\n"
         "pipelines: [{name: baseline}]\n",
         "execution: address, max_batch: Ray settings, ignored by executor 'local'"),
        # YAML 1.1 reads an exponent without a point as text
        ("name: x\nexecution: {timeout_s: 1e3}\npipelines: [{name: baseline}]\n",
         "execution.timeout_s: expected a number, got '1e3' (YAML reads 1e3 as text: write 1000)"),
        ("name: x\npipelines: [{name: vote, params: {temperature: 5e-1}}]\n",
         "params.temperature: expected a number, got '5e-1' (YAML reads 5e-1 as text: write 0.5)"),
        ("name: x\nmodel: {max_tokens: 4096}\npipelines: [{name: baseline}]\n",
         "model: max_tokens 4096 leaves no room for the prompt in n_ctx 4096"),
        # past the trained context a bundled model's replies degrade without an error
        ("name: x\nmodel: {n_ctx: 32769}\npipelines: [{name: baseline}]\n",
         "model: n_ctx 32769 is longer than the 32,768 tokens qwen2.5-coder-0.5b-instruct-q4_k_m was "
         "trained on"),
        ("name: x\nmodel: {id: openai/m, api_base: 'http://127.0.0.1:9/v1', n_ctx: 40000}\n"
         "pipelines: [{name: critic_loop, roles: {critic: {model: local-1.5b}}}]\n",
         "pipeline 'critic_loop': roles.critic: n_ctx 40000 is longer than the 32,768 tokens"),
        (
            "name: x\nexecution: {executor: ray}\npipelines: [{name: baseline, memory: {enabled: true}}]\n",
            "pipeline 'baseline': memory: a pipeline with memory solves its problems in order",
        ),
        (
            "name: x\nexecution: {executor: ray}\n"
            "pipelines: [{name: critic_loop, roles: {fixer: {temperature: 0.8}}}]\n",
            "roles: per-role models and temperatures are not supported with execution.executor ray",
        ),
    ],
)
def test_bad_spec_is_one_line_exit_2(tmp_path, capsys, home, text, expected):
    code, err = _run_cli(capsys, "run", str(_write(tmp_path, text)))
    assert code == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert not (home / "mlflow.db").exists()  # nothing half-written


def test_missing_spec_file(capsys, home, tmp_path):
    code, err = _run_cli(capsys, "run", str(tmp_path / "absent.yaml"))
    assert code == 2 and "no such file" in err


def test_a_bad_dataset_option_is_blamed_on_the_option_not_the_spec(tmp_path, capsys, home):
    spec = _write(tmp_path, "name: x\npipelines: [{name: baseline}]\n")
    code, err = _run_cli(capsys, "run", str(spec), "--dataset", "hf://")
    assert code == 2 and err.startswith("critiquelab: error: --dataset hf://: dataset 'hf://': expected"), err


def test_missing_dataset_field_is_named(tmp_path, capsys, home):
    data = tmp_path / "d.jsonl"
    data.write_text('{"task_id": "a", "prompt": "def f():\\n", "test": "x"}\n')
    spec = _write(tmp_path, yaml.safe_dump({"name": "x", "pipelines": [{"name": "baseline"}],
                                            "dataset": {"source": str(data)}}))
    code, err = _run_cli(capsys, "run", str(spec))
    assert code == 2 and "no field 'entry_point'" in err
    assert not (home / "mlflow.db").exists()


def test_unreachable_endpoint_is_a_clear_error(tmp_path, capsys, home):
    from critiquelab.experiments.serving.local_server import free_port

    spec = _write(tmp_path, "name: x\npipelines: [{name: baseline}]\n")
    code, err = _run_cli(capsys, "run", str(spec), "--model", "openai/whatever", "--api-base",
                         f"http://127.0.0.1:{free_port()}/v1", "--limit", "1")
    assert code == 2
    assert "not usable" in err and len(err.strip().splitlines()) == 1
    assert not (home / "mlflow.db").exists()


def test_missing_api_key_env_is_named(tmp_path, capsys, home, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    spec = _write(tmp_path, "name: x\npipelines: [{name: baseline}]\n")
    code, err = _run_cli(capsys, "run", str(spec), "--model", "openai/gpt-4o-mini",
                         "--api-key-env", "NO_SUCH_KEY_VAR", "--limit", "1")
    assert code == 2 and "NO_SUCH_KEY_VAR" in err


def test_cli_process_prints_no_traceback(tmp_path, home):
    spec = _write(tmp_path, "name: x\npipelines: {name: baseline\n")
    proc = subprocess.run([sys.executable, "-m", "critiquelab.experiments.cli", "run", str(spec)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("critiquelab: error:")


@pytest.mark.parametrize(("name", "params", "expected"), BAD_PARAMS)
def test_bad_pipeline_params_exit_2_before_anything_is_written(tmp_path, capsys, home, name, params,
                                                               expected):
    spec = _write(tmp_path, yaml.safe_dump({
        "name": "x", "pipelines": [{"name": "baseline", "label": "first"}, {"name": name, "params": params}],
    }))
    code, err = _run_cli(capsys, "--home", str(home), "run", str(spec))
    assert code == 2
    assert err == f"critiquelab: error: {spec}: pipelines.1: pipeline '{name}': {expected}\n"
    assert not home.exists()  # no mlflow.db, no checkpoints, no datasets cache


@pytest.mark.parametrize("pipelines", [
    [{"name": "vote", "params": {"token_budget_from": "debate"}}, {"name": "debate"}],
    [{"name": "debate"}, {"name": "vote", "params": {"token_budget_from": "dbate"}}],
])
def test_budget_label_must_name_an_earlier_pipeline(tmp_path, capsys, home, pipelines):
    spec = _write(tmp_path, yaml.safe_dump({"name": "x", "pipelines": pipelines}))
    code, err = _run_cli(capsys, "--home", str(home), "run", str(spec))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "pipeline 'vote': params.token_budget_from:" in err and "listed before it" in err
    assert not home.exists()


def test_params_are_completed_so_explicit_defaults_share_checkpoints():
    implicit = parse_spec({"name": "x", "pipelines": [{"name": "critic_loop"}]})
    explicit = parse_spec(
        {"name": "x", "pipelines": [{"name": "critic_loop", "params": {"max_iterations": 3}}]}
    )
    # the runner's checkpoint key hashes exactly this dump
    assert implicit.pipelines[0].model_dump() == explicit.pipelines[0].model_dump()
    assert implicit.pipelines[0].params.model_dump() == {
        "max_iterations": 3, "execution_feedback": False, "meta_critic": False, "feedback_timeout_s": 5.0,
        "critics": [], "parallel_agents": 1, "control": "none",
    }


DATA = Path(__file__).parents[2] / "eval" / "data"


def _refused(capsys, home, *args):
    code, err = _run_cli(capsys, "run", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not home.exists() or list(home.iterdir()) == []  # no dataset cache, no store
    return err


def test_a_bad_dataset_row_stops_the_run_and_writes_nothing(tmp_path, capsys, home):
    rows = (DATA / "mbpp.jsonl").read_text().splitlines()
    bad = json.loads(rows[2]) | {"test_list": []}
    data = tmp_path / "bad.jsonl"
    data.write_text("\n".join([rows[0], rows[1], json.dumps(bad)]) + "\n")
    err = _refused(capsys, home, "experiments/baseline.yaml", "--dataset", str(data))
    assert f"dataset '{data}' row 3 (task_id 3): field 'test_list' is empty" in err


def test_refused_parquet_dataset_leaves_no_cache(capsys, home):
    err = _refused(capsys, home, "experiments/baseline.yaml", "--dataset", str(DATA / "mbpp.parquet"),
                   "--task-ids", "404")
    assert "task id(s) not in dataset" in err and "'404'" in err


def test_format_flag_and_unknown_format(tmp_path, capsys, home):
    err = _refused(capsys, home, "experiments/baseline.yaml", "--dataset", str(DATA / "mbpp.jsonl"),
                   "--format", "evalplus")
    assert "no field 'prompt' (needed for 'prompt' in format 'evalplus')" in err
    spec = _write(tmp_path, "name: x\npipelines: [{name: baseline}]\ndataset: {format: apps}\n")
    err = _refused(capsys, home, str(spec))
    assert "dataset.format: unknown dataset format 'apps'; known: evalplus, humaneval, mbpp" in err


@pytest.mark.parametrize("execution", [{}, {"executor": "ray", "address": "head:6379", "max_batch": 4}])
@pytest.mark.parametrize("dataset", [{}, {"task_ids": ["HumanEval/0"]}])
def test_a_spec_written_out_in_full_loads_again(execution, dataset):
    """A run logs its spec with every field spelled out (config.yaml); reading that back, as
    export_replay and rescoring do, must not trip the checks for settings given in vain."""
    spec = parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "execution": execution,
                       "dataset": dataset})
    logged = yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    assert parse_spec(logged) == spec


def test_an_empty_task_id_list_is_refused_and_null_means_every_problem():
    with pytest.raises(UserError, match="task_ids: must name at least one problem"):
        parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "dataset": {"task_ids": []}})
    spec = parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "dataset": {"task_ids": None}})
    assert spec.dataset.task_ids is None
