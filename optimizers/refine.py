"""TextGrad refinement of one role's instruction, gated on the validation split.

Why: demos (``critiquelab.optimizers.compile``) teach by example, but a role's instruction (its signature's
docstring) is what every call reads first. TextGrad treats that instruction as a trainable
text variable: the program runs on each training problem with the current instruction, an
evaluation LM reads what happened — the role's own outputs, the critic's reviews from the run's
pool messages, and the hidden-test verdict — and its critique is back-propagated as a textual
gradient; ``TGD`` rewrites the instruction from it. A rewrite is only worth keeping if it does
not make the program worse on problems it was not refined on, so the result is gated: the new
instruction is kept only if validation pass@1 does not drop.

Hidden tests never reach the engine: verdict details are redacted exactly as GEPA's feedback
is (:func:`critiquelab.optimizers.compile.feedback_text`), the whole feedback text is redacted again, and
every request the engine receives is checked with
:func:`critiquelab.optimizers.training_examples.assert_no_hidden_tests` before it is sent.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import dspy

from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult

if TYPE_CHECKING:
    from textgrad import TGD, Variable
    from textgrad.engine import EngineLM
    from textgrad.loss import MultiFieldEvaluation

    from critiquelab.runtime.pool.messages import Message

EVALUATION_INSTRUCTION = (
    "Below is the instruction given to one role of a multi-agent Python code generator, and "
    "what happened when the generator ran on one programming problem with it: the role's "
    "output, the critic's reviews, and the hidden-test result of the final code. Criticise the "
    "instruction: which general weakness of it could have led to this outcome, and what should "
    "it say instead? Be concise."
)
CONSTRAINTS = [
    "The instruction must stay general: never mention a specific problem, function name, input or test.",
    "Keep it a short instruction to the role, in the second person.",
]
MAX_FIELD_CHARS = 1500


class StepRecord(TypedDict):
    """One refinement step as ``history.json`` records it."""

    step: int
    problems: list[str]  # the minibatch's task ids
    train_pass_at_1: float
    losses: int  # runs with something to learn from
    updated: bool  # TGD changed the instruction
    error: NotRequired[str]  # why an unusable optimiser reply left the instruction as it was


@dataclass
class RefineResult:
    """The (possibly) refined program and the evidence for keeping or rejecting it."""

    program: dspy.Module
    role: str
    instruction_before: str
    instruction_after: str  # the candidate TextGrad produced (kept or not)
    kept: bool
    val_before: float
    val_after: float
    val_scores_after: dict[str, bool] = field(default_factory=dict)
    history: list[StepRecord] = field(default_factory=list)
    reason: str = ""  # why the gate kept or rejected the candidate

    @property
    def candidate(self) -> dspy.Module:
        """The program with the proposed instruction, whether or not the gate kept it."""
        return with_instruction(self.program, self.role, self.instruction_after)


def role_predictors(program: dspy.Module, role: str) -> list[Any]:
    """The predictors of ``program`` that play ``role``, as its registration declares them."""
    from critiquelab.pipelines.registry import program_roles

    return [p for _, p in program_roles(program).predictors(program, role)]


def program_roles(program: dspy.Module) -> list[str]:
    """The roles ``program``'s predictors play, sorted: every role whose prompt an optimiser can
    change: the declared roles some predictor of ``program`` serves."""
    from critiquelab.pipelines.registry import program_roles

    roles = program_roles(program)
    return sorted({roles.role_of(name) for name, _ in program.named_predictors()})


def instruction_of(program: dspy.Module, role: str) -> str:
    found = role_predictors(program, role)
    if not found:
        from critiquelab.core.errors import UserError
        from critiquelab.pipelines.registry import program_roles as declared

        roles = ", ".join(program_roles(program))
        raise UserError(f"pipeline '{declared(program).pipeline}' has no '{role}' role to refine; "
                        f"roles: {roles}")
    return str(found[0].signature.instructions)


def with_instruction(program: dspy.Module, role: str, text: str) -> dspy.Module:
    """A deep copy of ``program`` whose ``role`` predictors carry instruction ``text``."""
    copy = program.deepcopy()
    for predictor in role_predictors(copy, role):
        predictor.signature = predictor.signature.with_instructions(text)
    return copy


def _clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " […]"


def _review_text(content: str) -> str:
    try:
        review = json.loads(content)
    except (TypeError, ValueError):
        return _clip(content, 400)
    lines = [f"{review.get('verdict', '?')}: {review.get('summary', '')}".strip()]
    for finding in review.get("findings") or []:
        fix = f" (suggestion: {finding.get('suggestion')})" if finding.get("suggestion") else ""
        lines.append(f"  - {finding.get('description', '')}{fix}")
    return "\n".join(lines)


@dataclass
class RunOutcome:
    """One training run: whether it passed, whether anything went wrong, and what to learn from."""

    task_id: str
    passed: bool
    needs_work: bool
    feedback: str


def run_and_explain(
    program: dspy.Module, problems: Sequence[Problem], role: str, *, lm: dspy.BaseLM, timeout_s: float,
) -> list[RunOutcome]:
    """Run ``program`` on each problem — solved and scored as a run does
    (:func:`critiquelab.optimizers.compile.solve_as_run`) — and describe what happened from the role's point
    of view: its outputs, the critic's reviews (pool messages) and the redacted hidden-test verdict."""
    from critiquelab.optimizers.compile import private_pool, solve_as_run

    outcomes = []
    with private_pool() as pool:
        for problem in problems:
            result = solve_as_run(program, problem, lm=lm, timeout_s=timeout_s)
            history = pool.history(thread_id=result.thread_id or None, task_id=problem.task_id)
            outcomes.append(_explain(problem, result, history, role))
    return outcomes


def _explain(problem: Problem, result: ProblemResult, history: Sequence[Message], role: str) -> RunOutcome:
    """One training run as the evaluation LM reads it, redacted and checked for hidden tests."""
    from critiquelab.optimizers.compile import feedback_text, redact_hidden_tests
    from critiquelab.optimizers.training_examples import assert_no_hidden_tests, label_thread
    from critiquelab.pipelines.solve import verdict_of
    from critiquelab.runtime.pool.messages import Intent

    calls = [t for t in label_thread(history, None) if t.role == role]
    reviews = [m for m in history if m.intent == Intent.CRITIQUE]
    parts = [f"Problem statement:\n{_clip(problem.prompt)}"]
    for i, call in enumerate(calls, start=1):
        outputs = "\n".join(f"{k}: {v}" for k, v in call.outputs.items())
        parts.append(f"Output of the {role} role (call {i} of {len(calls)}):\n{_clip(outputs)}")
    if not calls:
        parts.append(f"The {role} role produced no parsed output in this run.")
    if reviews:
        rendered = "\n".join(_review_text(m.content) for m in reviews)
        parts.append(f"Critic reviews, in order:\n{rendered}")
    parts.append(f"Hidden-test result: {feedback_text(problem, verdict_of(result))}")
    text = redact_hidden_tests(problem, "\n\n".join(parts))
    assert_no_hidden_tests([{"feedback": text}], [problem])
    changes = any(m.metadata.get("verdict") not in (None, "approve") for m in reviews)
    return RunOutcome(problem.task_id, result.passed, not result.passed or changes, text)


def guarded_engine(engine: EngineLM, problems: Sequence[Problem]) -> EngineLM:
    """``engine`` behind a check that no hidden-test line of ``problems`` is in any request."""
    from critiquelab.optimizers.textgrad_engine import EngineLM
    from critiquelab.optimizers.training_examples import assert_no_hidden_tests

    class Guarded(EngineLM):
        model_string = getattr(engine, "model_string", "guarded")

        def generate(self, prompt: Any, system_prompt: str | None = None, **kwargs: Any) -> str:
            assert_no_hidden_tests([{"system": system_prompt or "", "prompt": str(prompt)}], problems)
            return str(engine(prompt, system_prompt=system_prompt, **kwargs))

        def __call__(self, prompt: Any, **kwargs: Any) -> str:
            return self.generate(prompt, **kwargs)

    return Guarded()


class _OrderedGradients(set[Any]):
    """A set that iterates in the order it was given."""

    def __init__(self, ordered: Sequence[Any]) -> None:
        super().__init__(ordered)
        self._order = list(ordered)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._order)


def _gradients_in_text_order(variable: Any) -> set[Any]:
    """``variable``'s gradients, iterated in order of their text and context. TextGrad keeps them
    in a plain set, whose order follows object ids: the optimiser's prompt listed the batch's
    feedback in another order on every run, so a refinement step could neither repeat its request
    nor be answered by the LM cache."""
    context = variable.gradients_context
    return _OrderedGradients(sorted(
        variable.gradients, key=lambda gradient: (str(gradient.value), str(context.get(gradient)))
    ))


def refine_instruction(
    program: dspy.Module,
    role: str,
    problems_train: Sequence[Problem],
    problems_val: Sequence[Problem],
    *,
    task_lm: dspy.BaseLM,
    engine: EngineLM,
    steps: int = 2,
    batch_size: int | None = None,
    seed: int = 0,
    timeout_s: float = 10.0,
    val_before: float | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> RefineResult:
    """Refine ``role``'s instruction of a copy of ``program`` with TextGrad for ``steps`` steps on
    ``problems_train``, then gate it on ``problems_val`` (see the module docstring).

    Each step runs the program with the current instruction on the training problems (a seeded
    minibatch of ``batch_size`` of them, as in TextGrad's prompt-optimisation recipe, or all of
    them when ``batch_size`` is None); only runs
    with something to learn from (final code fails, or the critic asked for changes) become
    losses, and a step with none stops early. ``val_before``: the program's validation pass@1 if
    already known (the optimisation loop has it), else it is measured here. An optimiser reply
    without the new-instruction tags (or with an empty one) is recorded in ``history`` and the
    instruction is left as it was — small models often miss the format, and that is no reason
    to abort.
    """
    from critiquelab.core.errors import UserError

    if not problems_val:  # checked first: the gate needs them, and refining takes hours locally
        raise UserError("refine: no validation problems to gate the refined instruction on")
    base = program.deepcopy()
    before = instruction_of(base, role)
    textgrad = _TextGrad.create(before, role, guarded_engine(engine, [*problems_train, *problems_val]))
    history: list[StepRecord] = []
    rng = random.Random(seed)
    for step in range(steps):
        batch = _minibatch(problems_train, batch_size, rng)
        outcomes = run_and_explain(with_instruction(base, role, textgrad.instruction.value), batch, role,
                                   lm=task_lm, timeout_s=timeout_s)
        record = _step_record(step, batch, outcomes)
        history.append(record)
        learn = [o for o in outcomes if o.needs_work]
        if not learn:
            progress(f"refine step {step}: nothing to learn from on the train split; stopping")
            break
        previous = textgrad.instruction.value
        error = textgrad.step(learn)
        if error is not None:
            record["error"] = error
        record["updated"] = textgrad.instruction.value != previous
        progress(f"refine step {step}: {record['losses']} losses, updated={record['updated']}")
    return _gated(base, role, before, textgrad.instruction.value, problems_val, history,
                  task_lm=task_lm, timeout_s=timeout_s, val_before=val_before)


def _minibatch(problems: Sequence[Problem], size: int | None, rng: random.Random) -> list[Problem]:
    """A seeded minibatch of ``size`` problems, or all of them (``size`` None or not smaller)."""
    batch = list(problems)
    return rng.sample(batch, size) if size is not None and size < len(batch) else batch


def _step_record(step: int, batch: Sequence[Problem], outcomes: Sequence[RunOutcome]) -> StepRecord:
    """What a step's history entry says before TextGrad updates anything."""
    from critiquelab.optimizers.compile import pass_at_1

    return {
        "step": step, "problems": [p.task_id for p in batch],
        "train_pass_at_1": pass_at_1({o.task_id: o.passed for o in outcomes}),
        "losses": sum(o.needs_work for o in outcomes), "updated": False,
    }


@dataclass
class _TextGrad:
    """TextGrad's pieces for one role's instruction: the trainable variable, the loss that reads
    one run's feedback, and the optimiser (TGD) that rewrites it, all on the guarded engine."""

    tg: ModuleType
    instruction: Variable
    loss_fn: MultiFieldEvaluation
    optimizer: TGD
    engine: EngineLM

    @classmethod
    def create(cls, text: str, role: str, engine: EngineLM) -> _TextGrad:
        from critiquelab.optimizers.textgrad_engine import import_textgrad

        tg = import_textgrad()
        described = f"instruction (system prompt) to the {role} role of a multi-agent code generator"
        instruction = tg.Variable(text, requires_grad=True, role_description=described)
        evaluation = tg.Variable(EVALUATION_INSTRUCTION, requires_grad=False,
                                 role_description="evaluation instruction")
        loss_fn = tg.loss.MultiFieldEvaluation(
            evaluation,
            role_descriptions=[
                instruction.get_role_description(), "what happened in one run with this instruction",
            ],
            engine=engine,
        )
        optimizer = tg.TGD(parameters=[instruction], engine=engine, constraints=CONSTRAINTS)
        return cls(tg, instruction, loss_fn, optimizer, engine)

    def step(self, learn: Sequence[RunOutcome]) -> str | None:
        """Back-propagate the losses of the runs in ``learn`` and let TGD rewrite the instruction;
        why the instruction was left as it was when the optimiser's reply was unusable."""
        tg, instruction = self.tg, self.instruction
        losses = [
            self.loss_fn([instruction, tg.Variable(o.feedback, requires_grad=False, role_description="run")])
            for o in learn
        ]
        total = losses[0] if len(losses) == 1 else tg.sum(losses)
        self.optimizer.zero_grad()
        total.backward(self.engine)
        instruction.gradients = _gradients_in_text_order(instruction)
        previous = instruction.value
        try:
            self.optimizer.step()
        except IndexError as exc:  # the optimiser LM's reply had no <IMPROVED_VARIABLE> tags
            instruction.set_value(previous)
            return str(exc)[:500]
        if not instruction.value.strip():  # tags with nothing between them: no instruction at all
            instruction.set_value(previous)
            return "the optimiser proposed an empty instruction"
        return None


def _gated(
    base: dspy.Module, role: str, before: str, after: str, problems_val: Sequence[Problem],
    history: list[StepRecord], *, task_lm: dspy.BaseLM, timeout_s: float, val_before: float | None,
) -> RefineResult:
    """The refined program if its validation pass@1 does not drop below ``val_before`` (measured
    here when not given), else ``base``; no new instruction is nothing to validate."""
    from critiquelab.optimizers.compile import evaluate, pass_at_1
    from critiquelab.optimizers.gate import gate

    if val_before is None:
        val_before = pass_at_1(evaluate(base, problems_val, lm=task_lm, timeout_s=timeout_s))
    if after == before:
        return RefineResult(base, role, before, after, False, val_before, val_before, history=history,
                            reason="TextGrad proposed no new instruction")
    candidate = with_instruction(base, role, after)
    scores = evaluate(candidate, problems_val, lm=task_lm, timeout_s=timeout_s)
    val_after = pass_at_1(scores)
    decision = gate(val_before, val_after, candidate="refined program")
    return RefineResult(
        candidate if decision.keep else base, role, before, after, decision.keep, val_before, val_after,
        scores, history, decision.reason,
    )


__all__ = [
    "RefineResult", "guarded_engine", "instruction_of", "program_roles", "refine_instruction",
    "role_predictors", "run_and_explain", "with_instruction",
]
