"""Which local server serves a bundled model, how it is started, and what the run records."""

import os
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.core.errors import UserError
from critiquelab.experiments.checkpoints import checkpoint_key, input_fingerprints
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.serving.local_server import Backend, LocalModelServer, select_backend
from critiquelab.experiments.serving.provision import ModelIdentity
from critiquelab.experiments.serving.server_build import BuiltServer
from critiquelab.experiments.spec.experiment import parse_spec
from critiquelab.experiments.tracking.run_records import open_parent_run
from critiquelab.experiments.tracking.store import Tracker, tracking_uri

BUILT = BuiltServer(Path("/opt/llama/llama-server"), "llama_cpp_python-0.3.36.tar.gz", "0c1e57098")


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


@pytest.mark.parametrize(
    ("choice", "built", "expected"),
    [
        ("auto", BUILT, "llama-server"),
        ("auto", None, "llama-cpp-python"),
        ("llama-server", BUILT, "llama-server"),
        ("llama-cpp-python", BUILT, "llama-cpp-python"),
        ("llama-cpp-python", None, "llama-cpp-python"),
    ],
)
def test_backend_selection(choice, built, expected):
    backend = select_backend(choice, built)
    assert backend.name == expected
    assert (backend.build is not None) == (expected == "llama-server")


def test_explicit_llama_server_that_was_not_built_is_one_line():
    with pytest.raises(UserError) as error:
        select_backend("llama-server", None)
    message = str(error.value)
    assert "model.server" in message and "scripts/build_llama_server.sh" in message
    assert len(message.splitlines()) == 1


def test_llama_server_command_gives_each_slot_the_spec_context():
    server = LocalModelServer(
        Path("/m/model.gguf"), "local@abc", backend=Backend("llama-server", BUILT), n_ctx=4096, slots=4,
    )
    command = server.command(port=41234)
    assert command[0] == "/opt/llama/llama-server"
    assert _option(command, "--host") == "127.0.0.1"
    assert _option(command, "--port") == "41234"
    assert _option(command, "--parallel") == "4"
    assert _option(command, "--ctx-size") == str(4096 * 4)  # split across the 4 slots
    assert "--no-kv-unified" in command  # a fixed share per slot, as llama-cpp-python's window
    assert _option(command, "--threads") == _option(command, "--threads-batch") == str(os.cpu_count())
    assert _option(command, "--alias") == "local@abc"
    assert _option(command, "--model") == "/m/model.gguf"
    assert int(_option(command, "--cache-ram")) > 0


def test_fallback_command_and_params_are_llama_cpp_python_with_one_slot():
    server = LocalModelServer(
        Path("/m/model.gguf"), "local@abc", backend=Backend("llama-cpp-python"), n_ctx=2048, slots=4,
        n_threads=3,
    )
    command = server.command(port=41234)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    assert _option(command, "--n_ctx") == "2048"
    assert _option(command, "--n_threads") == "3"
    assert _option(command, "--host") == "127.0.0.1"
    params = server.params()
    assert params["serving.server"] == "llama-cpp-python"
    assert params["serving.slots"] == "1"  # it serves one request at a time whatever it is asked
    assert params["serving.version"].startswith("llama-cpp-python 0.3.")


def test_llama_server_params_name_the_vendored_commit():
    server = LocalModelServer(Path("/m.gguf"), "a", backend=Backend("llama-server", BUILT), slots=2)
    params = server.params()
    assert params["serving.server"] == "llama-server"
    assert params["serving.slots"] == "2"
    assert "0c1e57098" in params["serving.version"] and "0.3.36" in params["serving.version"]


def test_speculation_off_adds_no_option_and_ngram_turns_on_llama_servers_ngram_drafts():
    def server(mode: str) -> LocalModelServer:
        return LocalModelServer(
            Path("/m.gguf"), "a", backend=Backend("llama-server", BUILT), speculation=mode,  # type: ignore[arg-type]
        )

    off, ngram = server("off"), server("ngram")
    assert not any(option.startswith("--spec") for option in off.command(port=1))
    assert _option(ngram.command(port=1), "--spec-type") == "ngram-simple"
    assert off.params()["serving.speculative"] == "off" and "serving.speculative_args" not in off.params()
    assert ngram.params()["serving.speculative"] == "ngram"
    assert "--spec-type ngram-simple" in ngram.params()["serving.speculative_args"]


def test_draft_speculation_names_its_draft_model():
    server = LocalModelServer(Path("/big.gguf"), "a", backend=Backend("llama-server", BUILT),
                              speculation="draft", draft_model=Path("/small.gguf"))
    assert _option(server.command(port=1), "--spec-draft-model") == "/small.gguf"
    # without a speculation type llama-server loads the draft model and never drafts
    assert _option(server.command(port=1), "--spec-type") == "draft-simple"


def test_speculation_needs_llama_server():
    with pytest.raises(UserError) as error:
        LocalModelServer(Path("/m.gguf"), "a", backend=Backend("llama-cpp-python"), speculation="ngram")
    assert "model.speculative" in str(error.value) and len(str(error.value).splitlines()) == 1


@pytest.mark.parametrize(("field", "value"), [("server", "vllm"), ("slots", 0), ("slots", 1000)])
def test_bad_server_settings_name_the_field(field, value):
    with pytest.raises(UserError) as error:
        parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "model": {field: value}})
    assert f"model.{field}" in str(error.value)


def test_server_and_slots_share_checkpoints():
    """They change no answer's cache key, so not the checkpoint key either."""
    def key(model: dict) -> str:
        spec = parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "model": model})
        identity = ModelIdentity("local", "local", "f" * 64, Path("/m.gguf"))
        return checkpoint_key(spec, identity, input_fingerprints(spec, "sqlite:///unused.db"))

    assert key({}) == key({"server": "llama-cpp-python"}) == key({"server": "llama-server", "slots": 8})
    # Like concurrency, it is logged rather than keyed: a resumed or replayed run gets the cache's answers.
    assert key({}) == key({"speculative": "ngram"})
    assert key({}) != key({"n_ctx": 2048})


def test_draft_speculation_is_for_the_bundled_1_5b_only():
    with pytest.raises(UserError) as error:
        parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "model": {"speculative": "draft"}})
    assert "speculative 'draft' needs model.id 'local-1.5b'" in str(error.value)
    assert parse_spec({"name": "x", "pipelines": [{"name": "baseline"}],
                       "model": {"id": "local-1.5b", "speculative": "draft"}}).model.speculative == "draft"


@pytest.mark.parametrize("model", [{"id": "openai/x", "speculative": "ngram"},
                                   {"id": "openai/x", "api_base": "http://h:1/v1", "speculative": "ngram"},
                                   {"id": "openai/x", "speculative": "draft"}])
def test_an_endpoint_is_not_told_to_speculate(model):
    """Only a server the harness starts can speculate; an endpoint would silently run without it."""
    with pytest.raises(UserError) as error:
        parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "model": model})
    assert "applies to the bundled models the harness serves" in str(error.value)


def test_a_speculating_run_says_so_on_screen_and_on_the_run():
    from critiquelab.experiments.run_warnings import speculation_warnings

    def warnings(model: dict) -> list[str]:
        spec = parse_spec({"name": "x", "pipelines": [{"name": "baseline"}], "model": model})
        return speculation_warnings(spec, "baseline", 0)

    assert warnings({}) == []
    (line,) = warnings({"speculative": "ngram"})
    assert "model.speculative 'ngram'" in line and "greedy replies differ" in line


def test_missing_llama_server_is_exit_2_before_anything_is_written(tmp_path, capsys, home, monkeypatch):
    monkeypatch.setattr("critiquelab.experiments.serving.server_build.binary_path",
                        lambda: tmp_path / "none" / "llama-server")
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\npipelines: [{name: baseline}]\nmodel: {server: llama-server}\n")
    code = main(["run", str(spec), "--limit", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "model.server is 'llama-server', but it was not built" in err
    assert len(err.strip().splitlines()) == 1
    assert not (home / "mlflow.db").exists()


def test_parent_run_records_what_served_it(home):
    spec = parse_spec({"name": "x", "pipelines": [{"name": "baseline"}]})
    identity = ModelIdentity("local", "local", "f" * 64, Path("/m.gguf"))
    tracker = Tracker(home, "x")
    server = LocalModelServer(Path("/m.gguf"), "a", backend=Backend("llama-server", BUILT), slots=3)
    served_by = server.params()
    parent_id = open_parent_run(tracker, spec, identity, "k", [], resume=False, served_by=served_by)
    params = MlflowClient(tracking_uri(home)).get_run(parent_id).data.params
    assert params["serving.server"] == "llama-server"
    assert params["serving.slots"] == "3"
    assert "0c1e57098" in params["serving.version"]
    assert params["config.model.server"] == "auto"  # what was asked, beside what ran
