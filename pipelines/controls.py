"""Positive controls: pipeline arms that are *meant* to see the hidden tests.

A control measures a ceiling, not a method: ``oracle_feedback`` gives a revising role what the
problem's hidden tests say about the version it revises (the failing check, what the code
returned or raised), so the run shows how far repair goes when the critique is perfect. It is the
one place hidden-test text may reach a prompt, so it is fenced: a pipeline takes it only through
its typed ``control`` param, the runner tags and labels such a run as a control, and memory,
optimisation and export refuse it (``critiquelab.experiments.controls``).

How the text gets in: the pipeline never holds a problem's hidden test. The runner binds a
feedback function for the problem being solved (:func:`using_oracle`) — only for a pipeline
whose params ask for it (:func:`control_of`) — and the revising agent calls
:func:`oracle_feedback` with the code it is about to revise. A context variable, like the role
LMs: the pipeline object is shared by problems solved at once, and parallel agents copy the
context they were started in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import Field

from critiquelab.core.errors import UserError
from critiquelab.pipelines.params import KEYED_WHEN_SET

Control = Literal["none", "oracle_feedback"]
ORACLE_FEEDBACK: Control = "oracle_feedback"
NO_CONTROL: Control = "none"
# The MLflow tag the runner puts on a control's run (value: the control); what refuses a control
# run as a source of traces or prompts reads it.
CONTROL_TAG = "critiquelab.control"
WHY_FENCED = "its prompts carry hidden-test text"

ControlArm = Annotated[Control, Field(
    default=NO_CONTROL,
    description="A positive control (not a method): 'oracle_feedback' shows the role that revises "
    "the code what the problem's HIDDEN tests say about the version it revises (the failing check, "
    "what the code returned or raised) — how far repair goes when the critique is perfect. The run "
    "is tagged and reported as a control; memory, optimisation and export refuse it. 'none': no "
    "control.",
), KEYED_WHEN_SET]
"""The ``control`` param of a pipeline that offers one; at ``none`` its checkpoint and cost keys
are those of the pipeline before controls existed."""

OracleFeedback = Callable[[str], str]
_oracle: ContextVar[OracleFeedback | None] = ContextVar("critiquelab_oracle", default=None)


@runtime_checkable
class Controlled(Protocol):
    """Params of a pipeline that offers a control (its ``control: ControlArm`` field)."""

    control: Control


def control_of(params: object) -> Control:
    """The control a pipeline's params ask for (``none`` for a pipeline that offers none)."""
    return params.control if isinstance(params, Controlled) else NO_CONTROL


@contextlib.contextmanager
def using_oracle(feedback: OracleFeedback) -> Iterator[None]:
    """Inside this block :func:`oracle_feedback` answers with ``feedback(code)``: the hidden
    tests' report on ``code`` for the problem being solved (bound by the runner)."""
    token = _oracle.set(feedback)
    try:
        yield
    finally:
        _oracle.reset(token)


def oracle_feedback(code: str) -> str:
    """What the hidden tests of the problem being solved say about ``code``. Only a pipeline run
    as the ``oracle_feedback`` control has them bound; anywhere else this is a programming error."""
    feedback = _oracle.get()
    if feedback is None:
        raise RuntimeError("oracle_feedback needs the problem's hidden tests, which only the runner binds "
                           "(critiquelab.pipelines.solve.solve_and_score) for a pipeline run as that control")
    return feedback(code)


def refuse_control_runs(runs: Iterable[tuple[str, Mapping[str, str]]], use: str) -> None:
    """:class:`UserError` naming the first control run among ``(run id, MLflow tags)``, refused
    as ``use`` (e.g. "a trace source"): what learns from runs must never learn from a control."""
    for run_id, tags in runs:
        control = tags.get(CONTROL_TAG)
        if control:
            raise UserError(f"run {run_id} is the {control} control: {WHY_FENCED}, so it is refused as {use}")
