"""The outcome contract: the typed per-problem figures every pipeline declares when it registers.

A pipeline's ``forward`` returns ``dspy.Prediction(code=..., outcome=MyOutcome(...))``, where
``MyOutcome`` is the :class:`Outcome` subclass it registered with
(``register_pipeline(name, params=..., outcome=MyOutcome)``, model beside the pipeline). The
outcome says how the solve went (iterations, parsed, thread), which codes the scorer judges on
the hidden tests once the pipeline has returned (first version, samples, tree nodes …), and the
pipeline's figures. Figures are validated when the outcome is built: an undeclared figure
(``extra="forbid"``) or a value of the wrong type (``strict``) is an error, never dropped.

Stored shape (unchanged, so checkpoints and ``problems.parquet`` written before load as they
are): :meth:`Outcome.figures` is what ``ProblemResult.extra`` holds — one flat key per figure
that was measured; ``None`` means not measured and is left out, never stored as 0.

Summaries: figures that one summary reads together form a :class:`FigureGroup` (all optional,
since a stored result may lack some). A pipeline's outcome model inherits the groups whose
metrics apply to it, and :meth:`Outcome.run_metrics` (the run's MLflow metrics) and
:meth:`Outcome.table_metrics` (compare's table, pooled over seeds) are the union of their
summaries. Which summaries apply comes from the pipeline's registered model, never from which
keys a stored result happens to hold.

Type checking: pydantic's mypy plugin gives every model a ``model_construct`` typed by its own
fields, so an outcome inheriting a figure group (two models with fields of their own) is reported
as an incompatible redefinition (``misc``) — a false positive of the plugin, nothing to fix in the
models; such a class statement carries ``# type: ignore[misc]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Self, TypeVar

from pydantic import ConfigDict, Field, model_validator

from critiquelab.core.config import StrictModel
from critiquelab.eval.results import ProblemResult

G = TypeVar("G", bound="FigureGroup")
# The type of a figure the scorer fills from ``codes_to_score``: each code passed the hidden tests?
PASSED_FLAGS = list[bool] | None


class Figures(StrictModel):
    """Base of every model of per-problem figures: unknown names and wrong types are errors, and
    so is assigning one (``outcome.figure = value`` is validated like construction). A figure is
    measured, not written: a ratio over nothing may be NaN and is stored as it is."""

    model_config = ConfigDict(validate_assignment=True, allow_inf_nan=True)


@dataclass(frozen=True)
class Scored(Generic[G]):
    """One problem's figures of a group, with whether its final code passed the hidden tests."""

    passed: bool
    figures: G


class FigureGroup(Figures):
    """Figures one summary reads together. Every field is optional: ``None`` is "not measured"
    (a stored result from other code, or a figure the pipeline records only sometimes).

    A group defines, in its own class body, ``summarise_run`` (metrics of one run, logged to
    MLflow) and/or ``summarise_table`` (compare's metrics over all seeds of a pipeline); only
    summaries a group defines itself count, so a group that extends another (to read its fields)
    does not repeat the other's metrics. A metric whose denominator is empty is left out (the
    rule in :mod:`critiquelab.eval.summary`).

    A group whose figures say where a problem ended (:mod:`critiquelab.pipelines.attribution`) defines
    ``attribute`` and lists the places it can answer in ``ENDS``; a pipeline's outcome is
    attributed by the most derived such group it inherits."""

    ENDS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def read(cls, extra: Mapping[str, Any]) -> Self:
        """The group's figures as a stored ``ProblemResult.extra`` holds them: the ones it has
        (others absent: ``None``); keys of other groups are not this group's to read. Types are
        taken as stored tables give them back (a count read from a column with gaps is 3.0)."""
        return cls.model_validate({k: v for k, v in extra.items() if k in cls.model_fields}, strict=False)

    @classmethod
    def rows(cls, results: Sequence[ProblemResult]) -> list[Scored[Self]]:
        return [Scored(result.passed, cls.read(result.extra)) for result in results]

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        return {}

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        return {}

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Where the problem ended, one of ``ENDS``; None: the group cannot tell for this row."""
        return None


class Outcome(Figures):
    """Base of every pipeline's outcome model: what its ``forward`` reports besides the code.

    The fields declared here are the same for every pipeline; a subclass adds the pipeline's
    figures (and the figure groups it summarises). Fields marked "not a figure" go into the
    result's own columns or to the scorer, never into ``extra``.
    """

    iterations: int = Field(
        default=1, ge=1, exclude=True,
        description="Not a figure: rounds the pipeline ran (reviews, turns, expansions …), at least 1.",
    )
    parsed: bool = Field(
        default=True, exclude=True, description="Not a figure: False if a role's reply was unparseable."
    )
    thread_id: str = Field(default="", exclude=True, description="Not a figure: the solve's pool thread.")
    first_code: str | None = Field(
        default=None, exclude=True,
        description="Not a figure: the pipeline's first version, scored on the hidden tests after it "
        "returned (the figure first_passed); None: the pipeline has no first version.",
    )
    codes_to_score: dict[str, list[str]] = Field(
        default_factory=dict, exclude=True,
        description="Not a figure: intermediate codes (debaters' solutions, samples, tree nodes) by the "
        "figure that holds their hidden-test results (declared ``list[bool] | None``), scored after "
        "the pipeline returned — hidden tests never reach a pipeline.",
    )
    generated_test_code: str | None = Field(
        default=None, exclude=True,
        description="Not a figure: tests a role wrote (assert lines); after the pipeline returned the "
        "scorer counts them and checks them against the dataset's reference solution (the figures "
        "generated_tests, generated_tests_correct).",
    )

    @classmethod
    def _passed_flag_lists(cls) -> list[str]:
        """The figures declared ``PASSED_FLAGS``: where the scorer puts ``codes_to_score``'s results."""
        return [name for name, info in cls.model_fields.items()
                if not info.exclude and info.annotation == PASSED_FLAGS]

    @classmethod
    def hidden_test_figures(cls) -> list[str]:
        """The figures the scorer fills from the hidden tests for code a result does not keep: the
        first version's ``first_passed`` (where declared) and each list of ``codes_to_score``."""
        first = ["first_passed"] if "first_passed" in cls.model_fields else []
        return first + cls._passed_flag_lists()
    # False for a pipeline whose inherited groups' places do not apply to it (the baseline's one
    # version is no draft that a review let through): its problems are not attributed.
    attributed: ClassVar[bool] = True

    @model_validator(mode="after")
    def _scored_codes_have_a_figure(self) -> Self:
        """Whatever the scorer is to score must have a declared figure to go into."""
        fields, lists = type(self).model_fields, type(self)._passed_flag_lists()
        for name in self.codes_to_score:
            if name not in lists:
                raise ValueError(f"codes_to_score: '{name}' is no list[bool] figure of {type(self).__name__}")
        if self.first_code is not None and "first_passed" not in fields:
            raise ValueError(f"first_code given, but {type(self).__name__} declares no first_passed")
        if self.generated_test_code is not None and "generated_tests" not in fields:
            raise ValueError(
                f"generated_test_code given, but {type(self).__name__} declares no generated_tests"
            )
        return self

    def figures(self) -> dict[str, Any]:
        """The measured figures, flat, as ``ProblemResult.extra`` stores them."""
        return self.model_dump(exclude_none=True)

    def with_scores(self, scored: Mapping[str, Any]) -> Self:
        """This outcome with the figures the scorer measured on the hidden tests, validated."""
        return self.model_validate({**dict(self), **scored})

    @classmethod
    def _summaries(cls, kind: str, results: Sequence[ProblemResult]) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for group in reversed(cls.__mro__):  # the groups in declaration order, bases first
            if isinstance(group, type) and issubclass(group, FigureGroup) and group is not FigureGroup \
                    and kind in vars(group):
                metrics.update(getattr(group, kind)(group.rows(results)))
        return metrics

    @classmethod
    def _attributing_group(cls) -> type[FigureGroup] | None:
        """The most derived figure group of this outcome that attributes problems, if any."""
        if not cls.attributed:
            return None
        for group in cls.__mro__:
            if isinstance(group, type) and issubclass(group, FigureGroup) and group is not FigureGroup \
                    and "attribute" in vars(group):
                return group
        return None

    @classmethod
    def attribution_ends(cls) -> tuple[str, ...]:
        """Where this pipeline's problems can end (empty: it attributes none)."""
        group = cls._attributing_group()
        return group.ENDS if group is not None else ()

    @classmethod
    def attributions(cls, results: Sequence[ProblemResult]) -> list[str | None]:
        """Where each problem ended, in order (None: not attributable); compare's failure
        attribution."""
        group = cls._attributing_group()
        if group is None:
            return [None] * len(results)
        return [group.attribute(row) for row in group.rows(results)]

    @classmethod
    def run_metrics(cls, results: Sequence[ProblemResult]) -> dict[str, float]:
        """The metrics one run of the pipeline logs from its problems' figures."""
        return cls._summaries("summarise_run", results)

    @classmethod
    def table_metrics(cls, results: Sequence[ProblemResult]) -> dict[str, float]:
        """The pipeline's own columns of compare's table, over all its runs' problems."""
        return cls._summaries("summarise_table", results)
