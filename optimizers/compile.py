"""DSPy compilation of a registered pipeline (a ``dspy.Module``; DSPy finds its predictors).

Optimisers:

* ``traces``: few-shot demos straight from successful pool traces of earlier runs (no LM call):
  each predictor gets up to ``k`` demos of its role whose output passed / whose verdict was right.
* ``bootstrap``: ``dspy.BootstrapFewShot`` — runs the (teacher) pipeline on the train split and
  keeps the role calls of runs whose final code passes the hidden tests.
* ``mipro``: ``dspy.MIPROv2`` (``auto: light`` by default) with the teacher as prompt model
  and as the LM that bootstraps the demo candidates; a proposal the teacher's reply does not
  parse into is recorded, not fatal (:mod:`critiquelab.optimizers.mipro`).
* ``gepa``: ``dspy.GEPA`` with a feedback metric built from the sandbox verdict (failed
  assertion, exception, timeout) and the teacher as reflection LM; with ``roles``, it proposes
  instructions for those roles' predictors only (:mod:`critiquelab.optimizers.gepa`).

Every optimiser returns a new program and never mutates its input (it works on a deep copy).
``CompileConfig.roles`` limits what it may change to some roles (tree search's repairer and
scorer, say): the other predictors of its result get back the input program's prompts
(:func:`keep_roles`), and a bootstrapped run counts only if it called one of those roles
(:class:`RoleRunMetric`). The limit is applied to the optimiser's result, so whatever measures the
compiled program afterwards (the optimisation loop's validation) measures what is kept.
Whatever the optimiser, a demo showing code is kept only if that code passes its train task's
hidden tests (:mod:`critiquelab.optimizers.demo_filter`): a run that passed in the end also holds the
drafts and repairs that failed, and those must not become demos.
The metric needs the hidden tests, so it holds the problems in a closure keyed by ``task_id``;
the examples the optimisers see (and may turn into demos) carry only the prompt, entry point
and task id. Feedback text for GEPA has hidden-test lines redacted, because GEPA's reflection
LM writes instructions from it: a test line there would leak into a prompt. Each optimiser's
parameters are typed and checked once (:mod:`critiquelab.optimizers.optimizer_params`): when the optimisation
spec is read, or when a config is made from a mapping.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dspy

from critiquelab.core.errors import UserError
from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.eval.scoring import score_code
from critiquelab.eval.verdict import Verdict
from critiquelab.optimizers.demo_filter import CodeDemoFilter, code_output_fields
from critiquelab.optimizers.optimizer_params import (
    BootstrapParams,
    GepaParams,
    MiproParams,
    OptimizerParams,
    TracesParams,
    optimizer_params,
)
from critiquelab.optimizers.training_examples import RoleTrace
from critiquelab.pipelines.controls import NO_CONTROL, WHY_FENCED, control_of
from critiquelab.pipelines.registry import program_roles
from critiquelab.pipelines.solve import returned_code, solve_and_score
from critiquelab.signatures.adapter import CodeAdapter

if TYPE_CHECKING:
    from critiquelab.runtime.pool.message_pool import MessagePool


def problem_examples(problems: Iterable[Problem]) -> list[dspy.Example]:
    """Pipeline-level examples: what a pipeline's ``forward`` takes, and nothing hidden."""
    return [
        dspy.Example(prompt=p.prompt, entry_point=p.entry_point, task_id=p.task_id).with_inputs(
            "prompt", "entry_point", "task_id"
        )
        for p in problems
    ]


def _hidden_lines(problem: Problem, min_len: int = 8) -> list[str]:
    return sorted(
        {line.strip() for line in problem.test.splitlines()
         if len(line.strip()) >= min_len and line.strip() not in problem.prompt},
        key=len, reverse=True,
    )


def redact_hidden_tests(problem: Problem, text: str) -> str:
    """``text`` with every hidden-test line of ``problem`` (not already in its prompt) replaced
    by ``<hidden test>``: anything an LM writes prompts from must not quote the hidden tests."""
    for line in _hidden_lines(problem):
        text = text.replace(line, "<hidden test>")
    return text


# Verdicts whose detail comes from the candidate's code alone, never from what a hidden test
# passed it: a compile error, a missing function, the time limit.
_DETAIL_WITHOUT_INPUTS = frozenset({"syntax", "missing_entry_point", "timeout"})


def _detail_without_inputs(verdict: Verdict) -> str:
    """What of ``verdict.detail`` may reach an LM: all of it where it cannot hold a hidden input,
    else only the exception's type. An exception's or an assertion's message is made while a
    hidden test runs and can carry its inputs (``KeyError: 'x'``; a candidate can even raise
    ``repr(locals())``), which redacting the test's lines would not catch."""
    if verdict.reason in _DETAIL_WITHOUT_INPUTS:
        return verdict.detail
    kind = verdict.detail.split(":", 1)[0].strip()
    return f"({kind})" if kind.isidentifier() else ""


def feedback_text(problem: Problem, verdict: Verdict) -> str:
    """The sandbox verdict as text a reflection LM can learn from: what failed and how, never
    a hidden test's line or what the test passed the code."""
    if verdict.passed:
        return "The final code passes the hidden tests."
    detail = redact_hidden_tests(problem, _detail_without_inputs(verdict))
    what = {
        "assertion": "a hidden test assertion failed",
        "timeout": "it timed out (infinite loop or too slow)",
        "syntax": "the code does not compile",
        "exception": "it raised an exception",
    }.get(verdict.reason, verdict.reason or str(verdict.status))
    return f"The final code fails the hidden tests: {what}. {detail}".strip()


@dataclass
class PassMetric:
    """Hidden-test pass (1.0/0.0) of a prediction's final code; usable by every DSPy optimiser,
    and as GEPA's feedback metric (then it returns score and feedback)."""

    problems: Mapping[str, Problem]
    timeout_s: float = 10.0
    calls: list[tuple[str, bool]] = field(default_factory=list)

    def verdict(self, example: Any, prediction: Any) -> tuple[Problem, Verdict]:
        problem = self.problems[example.task_id]
        # DSPy ran the program: the same contract and scoring as a run's (critiquelab.pipelines.solve).
        _, verdict = score_code(problem, returned_code(prediction, "the program"), self.timeout_s)
        self.calls.append((problem.task_id, verdict.passed))
        return problem, verdict

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        return 1.0 if self.verdict(example, prediction)[1].passed else 0.0

    def with_feedback(
        self, gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
        pred_trace: Any = None, *args: Any, **kwargs: Any,
    ) -> dspy.Prediction:
        problem, verdict = self.verdict(gold, pred)
        return dspy.Prediction(score=1.0 if verdict.passed else 0.0, feedback=feedback_text(problem, verdict))


@dataclass
class RoleRunMetric:
    """``metric``, except that a bootstrapped run (DSPy passes its trace) counts as a success only
    if it called one of ``signatures`` — the roles an optimisation may change. Without it,
    ``BootstrapFewShot`` stops at its quota of passing runs, which for tree search's repairer are
    the problems whose first code passed and no repair ran: the repairer would get no demo and
    the "compiled" program would be the original one."""

    metric: PassMetric
    signatures: frozenset[tuple[tuple[str, ...], tuple[str, ...]]]

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        score = self.metric(example, prediction, trace)
        if trace is None:  # an evaluation, not a bootstrapped run
            return score
        called = {_signature_key(step[0].signature) for step in trace}
        return score if called & self.signatures else 0.0


def _signature_key(signature: type[dspy.Signature]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A role's signature by its fields (a predictor's copy may be another class object)."""
    return tuple(signature.input_fields), tuple(signature.output_fields)


def changed_roles(original: dspy.Module, compiled: dspy.Module) -> list[str]:
    """The roles whose prompt (instruction, field descriptions, demos) ``compiled`` changed."""
    before = {name: predictor.dump_state() for name, predictor in original.named_predictors()}
    roles = program_roles(compiled)
    return sorted({
        roles.role_of(name) for name, predictor in compiled.named_predictors()
        if predictor.dump_state() != before.get(name)
    })


def role_of_predictor(program: dspy.Module, name: str) -> str:
    """The role the predictor ``name`` of ``program`` serves, as its pipeline's registration
    declares it (debate's ``proposer`` is ``coder``): the name pool traces carry."""
    return program_roles(program).role_of(name)


def demo_from_trace(trace: RoleTrace, signature: type[dspy.Signature]) -> dspy.Example | None:
    """A demo with exactly the signature's fields, or None if the trace lacks one of them."""
    values = {**trace.inputs, **trace.outputs}
    if any(name not in values for name in signature.fields):
        return None
    return dspy.Example(**{name: values[name] for name in signature.fields})


def attach_trace_demos(
    program: dspy.Module, traces: Sequence[RoleTrace], *, k: int = 3, seed: int = 0,
    demo_filter: CodeDemoFilter | None = None,
) -> dspy.Module:
    """A copy of ``program`` whose predictors carry up to ``k`` demos each, drawn (seeded) from
    the successful traces of their role (and, with ``demo_filter``, only those it keeps: they
    are filtered before drawing, so a failing fix does not take the place of a good one).
    Predictors without such traces keep their demos."""
    compiled = program.deepcopy()
    rng = random.Random(seed)
    roles = program_roles(compiled)
    for name, predictor in compiled.named_predictors():
        role = roles.role_of(name)
        demos = [  # a trace carries the name its call was made as: the role, or one of its calls
            d for d in (demo_from_trace(t, predictor.signature) for t in traces
                        if roles.role_of_call(t.role) == role and t.success)
            if d is not None
        ]
        unique = [
            d for d in {repr(sorted(d.items())): d for d in demos}.values()
            if demo_filter is None or demo_filter.keep(role, d, predictor.signature)
        ]
        if unique:
            predictor.demos = rng.sample(unique, min(k, len(unique)))
    return compiled


@dataclass
class CompileConfig:
    """Which optimiser and its parameters: the optimiser's own model (an optimisation spec's,
    validated when the spec was read), or a mapping validated on creation (see
    :mod:`critiquelab.optimizers.optimizer_params`); ``settings`` holds them typed, defaults filled in."""

    optimizer: str = "bootstrap"
    params: OptimizerParams | Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float = 10.0
    seed: int = 0
    log_dir: Path | None = None  # GEPA's state, so a killed optimisation resumes where it stopped
    roles: tuple[str, ...] | None = None  # the roles it may change (see keep_roles); None: all
    settings: OptimizerParams = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.settings = optimizer_params(self.optimizer, self.params)


def keep_roles(original: dspy.Module, compiled: dspy.Module, roles: Iterable[str]) -> dspy.Module:
    """``compiled`` (in place, and returned) with every predictor whose role is not in ``roles``
    given back ``original``'s state: its instruction, field descriptions and demos."""
    chosen = set(roles)
    before = dict(original.named_predictors())
    for name, predictor in compiled.named_predictors():
        if role_of_predictor(compiled, name) not in chosen:
            predictor.load_state(before[name].dump_state())
    return compiled


def filter_code_demos(program: dspy.Module, demo_filter: CodeDemoFilter) -> dict[str, int]:
    """Remove (in place) the demos of ``program`` that ``demo_filter`` rejects; the demos it has
    dropped so far per judged role with code output (0 included: nothing to drop is a finding)."""
    judged = set()
    for name, predictor in program.named_predictors():
        role = role_of_predictor(program, name)
        if not code_output_fields(predictor.signature) or (
            demo_filter.roles is not None and role not in demo_filter.roles
        ):
            continue
        judged.add(role)
        predictor.demos = [d for d in predictor.demos if demo_filter.keep(role, d, predictor.signature)]
    return {role: demo_filter.dropped[role] for role in sorted(judged)}


def compile_program(
    program: dspy.Module,
    config: CompileConfig,
    *,
    train: Sequence[Problem],
    val: Sequence[Problem] = (),
    task_lm: dspy.BaseLM | None = None,
    teacher_lm: dspy.BaseLM | None = None,
    traces: Sequence[RoleTrace] = (),
    progress: Callable[[str, float], None] | None = None,
) -> dspy.Module:
    """Optimise a copy of ``program`` on ``train`` (``val`` for optimisers that select on it) with
    ``task_lm`` running the pipeline and ``teacher_lm`` bootstrapping demos / proposing
    instructions / reflecting (default: the task LM). ``progress(name, value)`` receives
    measurements of the compilation (the mean train metric, MIPROv2's failed proposals, the
    code demos dropped per role as ``demos_dropped.<role>``); with ``config.roles``, only those
    roles' prompts change."""
    demo_filter = CodeDemoFilter(train, config.timeout_s, config.roles)
    compiled = _optimise(program, config, train, val, task_lm, teacher_lm, traces, progress, demo_filter)
    if config.roles is not None:
        keep_roles(program, compiled, config.roles)
    dropped = filter_code_demos(compiled, demo_filter)
    if progress is not None:
        for role, count in dropped.items():
            progress(f"demos_dropped.{role}", float(count))
    return compiled


def _optimise(
    program: dspy.Module, config: CompileConfig, train: Sequence[Problem], val: Sequence[Problem],
    task_lm: dspy.BaseLM | None, teacher_lm: dspy.BaseLM | None, traces: Sequence[RoleTrace],
    progress: Callable[[str, float], None] | None, demo_filter: CodeDemoFilter,
) -> dspy.Module:
    """The optimiser ``config`` names, on a copy of ``program`` (see :func:`compile_program`)."""
    settings = config.settings
    if isinstance(settings, TracesParams):
        return attach_trace_demos(program, traces, k=settings.k, seed=config.seed, demo_filter=demo_filter)
    student = program.deepcopy()
    metric = PassMetric({p.task_id: p for p in [*train, *val]}, config.timeout_s)
    bootstrap_metric: Any = metric
    if config.roles is not None:
        bootstrap_metric = RoleRunMetric(metric, frozenset(
            _signature_key(p.signature) for name, p in program.named_predictors()
            if role_of_predictor(program, name) in config.roles
        ))
    trainset, valset = problem_examples(train), problem_examples(val) or None
    teacher = teacher_lm or task_lm
    with dspy.context(lm=task_lm, adapter=CodeAdapter()):
        if isinstance(settings, BootstrapParams):
            optimizer = dspy.BootstrapFewShot(
                metric=bootstrap_metric, max_bootstrapped_demos=settings.max_bootstrapped_demos,
                max_labeled_demos=0,  # problem-level examples are not role demos
                max_rounds=settings.max_rounds,
                teacher_settings={"lm": teacher} if teacher_lm is not None else {},
            )
            compiled = optimizer.compile(student, trainset=trainset)
        elif isinstance(settings, MiproParams):
            from critiquelab.optimizers.mipro import compile_mipro

            compiled, failed = compile_mipro(student, settings, bootstrap_metric, trainset, valset, task_lm,
                                             teacher, config.seed)
            if progress is not None:
                progress("failed_proposals", float(len(failed)))
        else:
            assert isinstance(settings, GepaParams), settings  # the four optimisers' models, each handled
            from critiquelab.optimizers.gepa import compile_gepa

            compiled = compile_gepa(
                student, settings, metric.with_feedback, trainset, valset, reflection_lm=teacher,
                seed=config.seed, log_dir=config.log_dir, roles=config.roles,
                role_of=program_roles(student).role_of,
            )
    if progress is not None and metric.calls:
        progress("train_metric_mean", sum(p for _, p in metric.calls) / len(metric.calls))
    return compiled


def evaluate(
    program: dspy.Module, problems: Sequence[Problem], *, lm: dspy.BaseLM, timeout_s: float = 10.0,
    traces: list[RoleTrace] | None = None,
) -> dict[str, bool]:
    """Hidden-test pass of ``program`` on each problem, solved and scored exactly as a run does
    (:func:`critiquelab.pipelines.solve.solve_and_score`), one problem at a time (a pipeline's own
    ``parallel_agents`` still overlap its role calls), so traces come in problem order and a
    seeded draw from them repeats. With ``traces``, the run's role calls are appended to it,
    labelled — how an optimisation without earlier runs gets pool traces of its own train split."""
    from critiquelab.optimizers.training_examples import TaskOutcome, label_thread

    results: dict[str, bool] = {}
    with private_pool() as pool:
        for problem in problems:
            result = solve_as_run(program, problem, lm=lm, timeout_s=timeout_s)
            results[problem.task_id] = result.passed
            if traces is not None:
                history = pool.history(thread_id=result.thread_id or None, task_id=problem.task_id)
                first_passed = result.extra.get("first_passed")  # None: no first version to score
                traces.extend(label_thread(history, TaskOutcome(result.passed, first_passed)))
    return results


@contextlib.contextmanager
def private_pool() -> Iterator[MessagePool]:
    """An in-memory pool of the optimiser's own for the runs inside this block: their messages are
    its traces, never a run's."""
    from critiquelab.runtime.pool.context import using_pool
    from critiquelab.runtime.pool.message_pool import MessagePool

    with MessagePool() as pool, using_pool(pool):
        yield pool


def solve_as_run(
    program: dspy.Module, problem: Problem, *, lm: dspy.BaseLM, timeout_s: float
) -> ProblemResult:
    """``program`` on ``problem``, solved and scored as a run does; an optimiser may not run a
    positive control (its prompts carry hidden-test text), whatever called it."""
    if control_of(getattr(program, "params", None)) != NO_CONTROL:
        raise UserError(f"an optimiser cannot run a positive control: {WHY_FENCED}")
    return solve_and_score(program, problem, lm=lm, label=program_roles(program).pipeline, seed=0,
                           timeout_s=timeout_s)


def pass_at_1(scores: Mapping[str, bool]) -> float:
    """The share of :func:`evaluate`'s problems that passed; NaN for no problem (no score, not 0)."""
    return sum(scores.values()) / len(scores) if scores else float("nan")
