"""Trace collection: pool messages of finished runs → per-role, labelled ``dspy.Example``s.

Every role call leaves one pool message whose ``metadata["trace"]`` holds the role's inputs
and outputs exactly as they were sent and parsed. That is the optimisers' training data; this
module reads it back (from the ChromaDB-persisted pool, or any store with ``get(where=…)``)
and labels it with what the run's hidden tests said, read from the run's ``problems.parquet``.

What is known, and therefore what the labels mean (a label is ``None`` when it is not known —
never guessed):

* ``task_passed``: the task's final code passed the hidden tests (every role of the task).
* ``output_passed``: for a message that *is* a version of the code (coder output, fix), whether
  that version passes. Only the first version (``extra.first_passed``) and the final version
  (``passed``) are scored by a run, so intermediate fixes get ``None`` unless a ``scorer`` is
  given to score them now.
* ``verdict_right`` (critic, meta-critic): the reviewed version's pass/fail is known (as above)
  and the verdict agrees with it: ``approve`` ⇔ the reviewed code passes. ``request_changes`` and
  ``reject`` both count as "this code fails". A review of an intermediate version, or an
  unparsed review (no verdict), gets ``None``. This is sound because it only compares the verdict
  with a hidden-test result *of the very code reviewed*, never with the task's final outcome —
  a critic that rightly rejected a wrong first draft is right even if the task ends failed.

Hidden tests never reach an example: examples hold only role inputs and outputs (the prompt the
role saw, the code, reviews), and :func:`assert_no_hidden_tests` checks that explicitly. A positive
control's runs (``critiquelab.pipelines.controls``: their prompts do carry hidden-test text) are refused as a
source when named, and never collected from an experiment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from critiquelab.eval.problems import Problem
from critiquelab.pipelines.controls import CONTROL_TAG, refuse_control_runs
from critiquelab.runtime.agents import code_messages
from critiquelab.runtime.pool.messages import Message

REVIEW_ROLES = ("critic", "meta_critic")


class MessageSource(Protocol):
    """Anything that returns persisted messages by equality filters (``ChromaPoolStore``, a pool)."""

    def get(self, where: Mapping[str, Any] | None = None) -> list[Message]: ...


@dataclass(frozen=True)
class TaskOutcome:
    """What a run's hidden tests said about one task."""

    passed: bool
    first_passed: bool | None = None


@dataclass
class RoleTrace:
    """One role call of a finished run, with its labels."""

    role: str
    task_id: str
    run_id: str
    thread_id: str
    message_id: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    task_passed: bool | None = None
    output_passed: bool | None = None
    verdict_right: bool | None = None
    labels: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """Whether this call is a good demonstration of its role (see module docstring)."""
        if self.role in REVIEW_ROLES:
            return self.verdict_right is True
        if self.output_passed is not None:
            return self.output_passed
        return self.task_passed is True

    def example(self) -> Any:
        """A ``dspy.Example`` with the role's inputs and outputs (inputs marked) and the labels."""
        import dspy

        return dspy.Example(
            **self.inputs, **self.outputs, task_id=self.task_id, task_passed=self.task_passed,
            output_passed=self.output_passed, verdict_right=self.verdict_right,
        ).with_inputs(*self.inputs)


def _code_versions(history: Sequence[Message], outcome: TaskOutcome | None) -> dict[str, bool | None]:
    """Message id of each code version → whether it passes, where the run scored it."""
    codes = code_messages(history)
    known: dict[str, bool | None] = {m.id: None for m in codes}
    if outcome is None or not codes:
        return known
    known[codes[-1].id] = outcome.passed  # the run scores the final version...
    if outcome.first_passed is not None:
        known[codes[0].id] = outcome.first_passed  # ...and, for revising pipelines, the first
    elif len(codes) == 1:
        known[codes[0].id] = outcome.passed
    return known


def label_thread(
    history: Sequence[Message],
    outcome: TaskOutcome | None,
    scorer: Callable[[str, str], bool] | None = None,
) -> list[RoleTrace]:
    """Role traces of one thread (one task in one run), labelled. ``scorer(task_id, code)``, if
    given, scores the code versions the run did not (intermediate fixes) on the hidden tests."""
    versions = _code_versions(history, outcome)
    if scorer is not None:
        for message in code_messages(history):
            if versions[message.id] is None:
                versions[message.id] = scorer(message.task_id, message.content)
    traces = []
    for message in history:
        trace = message.metadata.get("trace")
        if not trace or not trace.get("parsed", True):
            continue  # unparsed calls have no outputs to learn from
        role = str(trace.get("role", message.sender.split("@")[0]))
        item = RoleTrace(
            role=role, task_id=message.task_id, run_id=message.run_id, thread_id=message.thread_id,
            message_id=message.id, inputs=dict(trace.get("inputs") or {}),
            outputs=dict(trace.get("outputs") or {}),
            task_passed=None if outcome is None else outcome.passed,
            output_passed=versions.get(message.id),
        )
        reviewed = message.metadata.get("code_message_id")
        verdict = message.metadata.get("verdict")
        if role in REVIEW_ROLES and reviewed and verdict in ("approve", "request_changes", "reject"):
            code_ok = versions.get(str(reviewed))
            if code_ok is not None:
                item.verdict_right = (verdict == "approve") == code_ok
            item.labels["verdict"] = verdict
        traces.append(item)
    return traces


def collect_traces(
    source: MessageSource,
    run_ids: Iterable[str],
    outcomes: Mapping[tuple[str, str], TaskOutcome],
    *,
    roles: Iterable[str] | None = None,
    task_ids: Iterable[str] | None = None,
    scorer: Callable[[str, str], bool] | None = None,
) -> list[RoleTrace]:
    """Labelled role traces of ``run_ids``. ``outcomes[(run_id, task_id)]`` holds the run's hidden
    test results (see :func:`load_outcomes`); ``task_ids`` restricts collection (e.g. to the
    train split) so other splits' problems never become demos."""
    wanted_roles = set(roles) if roles is not None else None
    wanted_tasks = set(task_ids) if task_ids is not None else None
    traces: list[RoleTrace] = []
    for run_id in run_ids:
        threads: dict[str, list[Message]] = {}
        read = source.query if hasattr(source, "query") else source.get  # a MessagePool or a store
        for message in read({"run_id": run_id}):
            if wanted_tasks is None or message.task_id in wanted_tasks:
                threads.setdefault(message.thread_id, []).append(message)
        for history in threads.values():
            outcome = outcomes.get((run_id, history[0].task_id))
            for item in label_thread(history, outcome, scorer):
                if wanted_roles is None or item.role in wanted_roles:
                    traces.append(item)
    return traces


def by_role(traces: Iterable[RoleTrace]) -> dict[str, list[Any]]:
    """``{role: [dspy.Example, …]}``."""
    grouped: dict[str, list[Any]] = {}
    for item in traces:
        grouped.setdefault(item.role, []).append(item.example())
    return grouped


def load_outcomes(tracking_uri: str, run_ids: Iterable[str]) -> dict[tuple[str, str], TaskOutcome]:
    """Hidden-test outcomes per (run, task) from each run's ``problems.parquet`` artifact."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    outcomes: dict[tuple[str, str], TaskOutcome] = {}
    for run_id in run_ids:
        local = client.download_artifacts(run_id, "problems.parquet")
        frame = pd.read_parquet(local)
        has_first = "extra.first_passed" in frame.columns
        for row in frame.to_dict("records"):
            first = row.get("extra.first_passed") if has_first else None
            first = None if first is None or pd.isna(first) else bool(first)
            outcomes[(run_id, str(row["task_id"]))] = TaskOutcome(bool(row["passed"]), first)
    return outcomes


def runs_of_experiment(tracking_uri: str, experiment: str, pipeline: str | None = None) -> list[str]:
    """Finished child runs (pipeline × seed, the ones with a per-problem table) of an experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        from critiquelab.core.errors import UserError

        raise UserError(f"no MLflow experiment named '{experiment}'")
    runs = client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'")
    return [
        r.info.run_id for r in runs
        if "mlflow.parentRunId" in r.data.tags
        and CONTROL_TAG not in r.data.tags  # a positive control's prompts carry hidden-test text
        and (pipeline is None or r.data.params.get("pipeline") == pipeline)
    ]


def collect_from_home(
    home: Path, *, uri: str | None = None, run_ids: Iterable[str] = (), experiment: str | None = None,
    pipeline: str | None = None, **kwargs: Any,
) -> list[RoleTrace]:
    """Traces from a data directory's persisted pool and the MLflow store its runs were logged
    to (``uri``; default the data directory's own), by run ids and/or an experiment name."""
    from mlflow.tracking import MlflowClient

    from critiquelab.runtime.pool.chroma_store import ChromaPoolStore

    uri = uri or f"sqlite:///{home / 'mlflow.db'}"
    ids = list(run_ids)
    client = MlflowClient(tracking_uri=uri)
    refuse_control_runs(((run_id, client.get_run(run_id).data.tags) for run_id in ids), "a trace source")
    if experiment:
        ids += runs_of_experiment(uri, experiment, pipeline)
    outcomes = load_outcomes(uri, ids)
    with ChromaPoolStore(home / "chroma") as store:
        return collect_traces(store, ids, outcomes, **kwargs)


def assert_no_hidden_tests(examples: Iterable[Any], problems: Iterable[Problem], min_len: int = 12) -> None:
    """Raise if any line of a hidden test (one not already in the prompt) appears in an example."""
    lines = [
        (p.task_id, line.strip()) for p in problems for line in p.test.splitlines()
        if len(line.strip()) >= min_len and line.strip() not in p.prompt
    ]
    for example in examples:
        text = "\n".join(str(v) for v in dict(example).values())
        for task_id, line in lines:
            if line in text:
                raise AssertionError(f"hidden test of {task_id} leaked into an example: {line!r}")


__all__ = [
    "RoleTrace", "TaskOutcome", "assert_no_hidden_tests", "by_role", "collect_from_home",
    "collect_traces", "label_thread", "load_outcomes", "runs_of_experiment",
]
