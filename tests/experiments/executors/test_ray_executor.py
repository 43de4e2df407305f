"""The Ray executor on a real two-node Ray cluster (127.0.0.1) against a scripted endpoint: the
same results, checkpoints, messages and MLflow runs as the local executor; a node killed mid-run
costs only its problems in flight."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.ray_cluster import two_node_cluster
from support.role_responder import role_of, role_responder
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.experiments.api import RunOverrides, load_experiment, run
from critiquelab.experiments.tracking.store import tracking_uri

PIPELINES = [{"name": "baseline"}, {"name": "critic_loop", "params": {"max_iterations": 2}}]
# Fields that say when and where a problem ran, not what it answered.
TIMING = {"latency_s", "thread_id"}
CLOCKED = {"wall_time_s", "problem_latency_s"}


@pytest.fixture(scope="module")
def cluster():
    with two_node_cluster() as (ray_cluster, second):
        yield ray_cluster, second


def _ray(address: str, **extra: object) -> dict:
    return {"executor": "ray", "address": address, "in_flight_per_node": 2, **extra}


def _table(result) -> dict:
    table = {}
    for child in result.children:
        for r in child.results:
            row = r.model_dump(exclude=TIMING)
            for usage in row["usage_by_role"].values():  # seconds: clocked, not behaviour
                del usage["latency_s"], usage["model_s"]
            table[(child.pipeline, r.task_id)] = row
    return table


def _messages(home, result) -> list[tuple]:
    """Every child run's logged message log, without ids and times."""
    client = MlflowClient(tracking_uri(home))
    found = []
    for child in result.children:
        path = client.download_artifacts(child.run_id, "messages.jsonl", str(home / f"dl-{child.run_id}"))
        for line in Path(path).read_text().splitlines():
            m = json.loads(line)
            agent = m["sender"].split("@")[0]  # the suffix is minted per problem
            found.append((child.pipeline, m["task_id"], m["intent"], agent, m["content"]))
    return sorted(found)


def _checkpoint_lines(home) -> list[tuple[str, str]]:
    lines = []
    for path in sorted((home / "checkpoints").glob("*/*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            lines.append((record["pipeline"], record["task_id"]))
    return lines


def test_ray_run_matches_local_run(cluster, tmp_path, humaneval_problems):
    ray_cluster, _ = cluster
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems)), delay_s=0.1) as fake:
        spec = fake_spec(fake.api_base, pipelines=PIPELINES, limit=6, concurrency=4)
        local = run(spec, home=tmp_path / "local", progress=False)
        distributed = run({**spec, "execution": _ray(ray_cluster.address)}, home=tmp_path / "ray",
                          progress=False)
        assert _table(distributed) == _table(local)
        assert {r.isolation for c in distributed.children for r in c.results} == {
            r.isolation for c in local.children for r in c.results}
        assert _messages(tmp_path / "ray", distributed) == _messages(tmp_path / "local", local)
        assert sorted(_checkpoint_lines(tmp_path / "ray")) == sorted(_checkpoint_lines(tmp_path / "local"))
        for ours, theirs in zip(distributed.children, local.children, strict=True):
            metrics = {k: v for k, v in ours.metrics.items() if k not in CLOCKED}
            assert metrics == {k: v for k, v in theirs.metrics.items() if k not in CLOCKED}
        client = MlflowClient(tracking_uri(tmp_path / "ray"))
        logged = client.get_run(distributed.children[1].run_id)
        assert logged.data.metrics["pass_at_1"] == local.children[1].metrics["pass_at_1"]
        assert client.get_run(distributed.parent_run_id).data.params["config.execution.executor"] == "ray"

        # Solved again from scratch on the cluster (--fresh): the LM cache the driver serves to
        # the workers replays every call.
        requests = len(fake.requests)
        again = run({**spec, "execution": _ray(ray_cluster.address)}, home=tmp_path / "ray",
                    progress=False, fresh=True)
        replayed = _table(again)
        assert all(row.pop("cached_lm_calls") == row["lm_calls"] > 0 for row in replayed.values())
        expected = _table(local)
        for row in expected.values():
            del row["cached_lm_calls"]
        assert replayed == expected
        assert len(fake.requests) == requests + 1  # only the start-up probe of the endpoint


def test_problems_are_spread_over_both_nodes(cluster, tmp_path, humaneval_problems):
    from critiquelab.experiments.executors.job import SolveJob
    from critiquelab.experiments.executors.ray_cluster import RayExecutor
    from critiquelab.experiments.serving.provision import resolve_model, serve_model
    from critiquelab.pipelines.registry import create_pipeline
    from critiquelab.runtime.pool.message_pool import MessagePool

    ray_cluster, _ = cluster
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems)), delay_s=0.3) as fake:
        # Fewer places than the two nodes have (4): a node with a free place queues nothing.
        execution = _ray(ray_cluster.address)
        spec = load_experiment(fake_spec(fake.api_base, limit=8, concurrency=3, execution=execution))
        executor = RayExecutor(spec, tmp_path)
        with serve_model(resolve_model(spec.model), spec.model, tmp_path, cache="off") as lm:
            try:
                job = SolveJob(create_pipeline("baseline"), lm, "baseline", 0, 10.0, "run-1")
                pool = MessagePool()
                results = list(executor.solve(job, humaneval_problems[:8], pool))
            finally:
                executor.close()
    assert sorted(r.task_id for r in results) == sorted(p.task_id for p in humaneval_problems[:8])
    assert len(executor.problems_per_node) == 2  # both nodes solved some
    assert sum(executor.problems_per_node.values()) == 8
    assert {m.task_id for m in pool.history()} == {r.task_id for r in results}
    assert all(m.run_id == "run-1" for m in pool.history())
    assert fake.max_in_flight <= 3  # concurrency, across the cluster, with batches queued behind


def test_a_node_that_joins_gets_workers_at_the_next_child_run(cluster, tmp_path, humaneval_problems):
    from critiquelab.experiments.executors.job import SolveJob
    from critiquelab.experiments.executors.ray_cluster import RayExecutor
    from critiquelab.experiments.serving.provision import resolve_model, serve_model
    from critiquelab.pipelines.registry import create_pipeline
    from critiquelab.runtime.pool.message_pool import MessagePool

    ray_cluster, _ = cluster
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems)), delay_s=0.3) as fake:
        execution = _ray(ray_cluster.address)
        spec = load_experiment(fake_spec(fake.api_base, limit=6, concurrency=6, execution=execution))
        executor = RayExecutor(spec, tmp_path)
        third = None
        with serve_model(resolve_model(spec.model), spec.model, tmp_path, cache="off") as lm:
            try:
                job = SolveJob(create_pipeline("baseline"), lm, "baseline", 0, 10.0, "run-1")
                list(executor.solve(job, humaneval_problems[:6], MessagePool()))
                before = set(executor.problems_per_node)
                third = ray_cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
                ray_cluster.wait_for_nodes(timeout=120)
                executor.problems_per_node.clear()
                job = SolveJob(create_pipeline("baseline"), lm, "baseline", 0, 10.0, "run-2")
                results = list(executor.solve(job, humaneval_problems[:6], MessagePool()))
            finally:
                executor.close()
                if third is not None:
                    ray_cluster.remove_node(third)
    assert len(before) == 2
    assert sorted(r.task_id for r in results) == sorted(p.task_id for p in humaneval_problems[:6])
    assert len(executor.problems_per_node) == 3  # the new node solved some of the second run


def test_roles_keep_their_own_lm_and_the_drivers_cache_on_ray(cluster, tmp_path, humaneval_problems):
    ray_cluster, _ = cluster
    scripts = critic_loop_scripts(humaneval_problems)
    with FakeOpenAIServer(role_responder(scripts)) as main_lm, \
            FakeOpenAIServer(role_responder(scripts)) as critic_lm:
        roles = {"critic": {"model": "openai/critic-model", "api_base": critic_lm.api_base},
                 "fixer": {"temperature": 0.8}}
        pipelines = [{"name": "critic_loop", "params": {"max_iterations": 2}, "roles": roles}]
        spec = fake_spec(main_lm.api_base, pipelines=pipelines, limit=3, execution=_ray(ray_cluster.address))
        first = run(spec, home=tmp_path, progress=False)
        asked = (len(main_lm.requests), len(critic_lm.requests))
        again = run(spec, home=tmp_path, progress=False, fresh=True)
        replayed = (len(main_lm.requests), len(critic_lm.requests))
        critic_models = {r["model"] for r in critic_lm.requests}
        temperatures = {role_of(r["messages"]): r.get("temperature") for r in main_lm.requests
                        if "Reply with OK." not in str(r["messages"])}
    assert critic_models == {"critic-model"}  # the critic ran on its own endpoint, on the workers
    assert asked[1] > 1  # more than the start-up check of its endpoint
    assert temperatures == {"coder": 0.0, "fixer": 0.8}
    # Solved again: every role's calls replayed from the driver's cache (only start-up checks asked).
    assert replayed == (asked[0] + 1, asked[1] + 1)
    assert _table(again) == {k: {**v, "cached_lm_calls": v["lm_calls"]} for k, v in _table(first).items()}


def test_a_node_killed_mid_run_costs_only_its_batches_in_flight(tmp_path, humaneval_problems):
    """Batches grow past one problem here (60 s of work aimed at per call, problems of ~1 s, so
    the doubling cap decides, 1, 2, 4, also on a loaded machine where a problem takes several
    seconds — with 5 s batches then stayed at one and too few problems were asked again): each
    of the four places solves a batch of one, with another of one queued behind it, then batches
    of two to four. The second node is killed once those have asked their second problem, so it
    loses batches with a problem finished but not yet reported: more problems are asked again
    than the node's two places, and still every problem is recorded exactly once."""
    problems, places = 24, 4
    with two_node_cluster() as (ray_cluster, second), \
            FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems)), delay_s=1.0) as fake:
        def kill_second_node_once_batches_are_half_done():
            deadline = time.monotonic() + 120
            asked = 1 + 2 * places + 2 * places  # the start-up probe, two rounds of one, two of more
            while len(fake.requests) < asked and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.4)  # every place's second problem asked, none answered yet
            ray_cluster.remove_node(second, allow_graceful=False)  # SIGKILL: raylet, store, workers

        killer = threading.Thread(target=kill_second_node_once_batches_are_half_done, daemon=True)
        killer.start()
        execution = _ray(ray_cluster.address, batch_target_s=60.0, max_batch=4)
        spec = fake_spec(fake.api_base, limit=problems, concurrency=places, execution=execution)
        result = run(spec, home=tmp_path / "home", progress=False, cache=False)
        killer.join(timeout=5)
        retried_requests = len(fake.requests) - 1 - problems  # minus the start-up probe
    assert not killer.is_alive()
    assert retried_requests > 2  # more than one problem per place: whole batches were redone
    tasks = [r.task_id for r in result.children[0].results]
    assert sorted(tasks) == sorted(p.task_id for p in humaneval_problems[:problems])
    lines = _checkpoint_lines(tmp_path / "home")
    assert len(lines) == len(set(lines)) == problems  # every problem exactly once
    messages = _messages(tmp_path / "home", result)
    assert len(messages) == len(set(messages))  # a lost attempt's messages never reached the pool
    assert {m[1] for m in messages} == set(tasks)


def test_ray_settings_are_checked_before_anything_runs(tmp_path):
    with pytest.raises(UserError, match="in_flight_per_node 3 must be a multiple of workers_per_node 2"):
        load_experiment(fake_spec("http://127.0.0.1:9/v1", execution={
            "executor": "ray", "in_flight_per_node": 3, "workers_per_node": 2}))
    spec = load_experiment(fake_spec("http://127.0.0.1:9/v1"), RunOverrides(ray="127.0.0.1:1"))
    assert (spec.execution.executor, spec.execution.address) == ("ray", "127.0.0.1:1")
    from critiquelab.experiments.executors.ray_cluster import RayExecutor

    start = time.monotonic()
    with pytest.raises(UserError, match=r"execution.address '127.0.0.1:1': nothing answers"):
        RayExecutor(spec, tmp_path).start()
    assert time.monotonic() - start < 10


def test_a_node_at_another_isolation_level_is_refused_unless_allowed(tmp_path, humaneval_problems):
    from critiquelab.eval.execution import isolation_level

    ours = isolation_level()
    other = "process" if ours != "process" else "setuid"
    with two_node_cluster({"CRITIQUELAB_SANDBOX_ISOLATION": other}) as (ray_cluster, _), \
            FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems)), delay_s=0.2) as fake:
        spec = fake_spec(fake.api_base, limit=4, concurrency=4, execution=_ray(ray_cluster.address))
        with pytest.raises(UserError, match=f"isolation level '{other}', this driver at '{ours}'"):
            run(spec, home=tmp_path / "refused", progress=False)
        assert not (tmp_path / "refused" / "mlflow.db").exists()  # refused before any run exists

        allowed = {**spec, "execution": _ray(ray_cluster.address, allow_mixed_isolation=True)}
        result = run(allowed, home=tmp_path / "allowed", progress=False)
    levels = {r.isolation for r in result.children[0].results}
    assert levels == {ours, other}  # each verdict says which sandbox scored it


def test_cli_ray_flag_with_no_cluster_is_one_line_and_writes_nothing(tmp_path, humaneval_problems, capsys):
    import yaml

    from critiquelab.experiments.cli.main import main

    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=2)))
        code = main(["--home", str(tmp_path / "home"), "run", str(spec), "--ray", "127.0.0.1:1",
                     "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    # The address came from --ray, not the spec: the line names the option.
    assert len(err.splitlines()) == 1 and "error: --ray 127.0.0.1:1: nothing answers" in err
    assert not (tmp_path / "home" / "mlflow.db").exists()
