"""MIPROv2 that survives an instruction proposal the prompt model's reply does not parse into.

DSPy's ``GroundedProposer`` asks the prompt model for each candidate instruction and parses the
reply with the adapter. A reply that cannot be parsed — small local models often miss the
format — raises ``AdapterParseError`` out of ``MIPROv2.compile``, losing the bootstrapped demos
and every proposal that did parse; re-running does not help, since the cached reply comes back.
Here such a proposal is recorded as failed and the predictor's current instruction stands in
for it (MIPROv2 always keeps that one as candidate 0 anyway), so the search goes on over the
candidates that did parse. DSPy's proposer already treats a failed dataset or program summary
the same way. The caller reports the failures (a warning and a metric on the compile run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dspy
from dspy.propose import GroundedProposer
from dspy.teleprompt.mipro_optimizer_v2 import BOOTSTRAPPED_FEWSHOT_EXAMPLES_IN_CONTEXT
from dspy.teleprompt.utils import get_signature
from dspy.utils.exceptions import AdapterParseError

from critiquelab.optimizers.optimizer_params import MiproParams


@dataclass(frozen=True)
class FailedProposal:
    predictor: int  # index in ``program.predictors()``
    reply: str  # the prompt model's unparseable reply (clipped)


class _TolerantProposer(GroundedProposer):
    def __init__(self, failures: list[FailedProposal], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.failures = failures

    def propose_instruction_for_predictor(
        self, program: Any, predictor: Any, pred_i: int, demo_candidates: Any, demo_set_i: int,
        trial_logs: Any, tip: str | None = None,
    ) -> str:
        try:
            instruction: str = super().propose_instruction_for_predictor(
                program=program, predictor=predictor, pred_i=pred_i, demo_candidates=demo_candidates,
                demo_set_i=demo_set_i, trial_logs=trial_logs, tip=tip,
            )
            return instruction
        except AdapterParseError as exc:
            self.failures.append(FailedProposal(pred_i, str(exc.lm_response)[:500]))
            return str(get_signature(predictor).instructions)


class TolerantMIPROv2(dspy.MIPROv2):
    """``dspy.MIPROv2`` whose proposer records unparseable proposals in ``failed_proposals``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed_proposals: list[FailedProposal] = []

    def _propose_instructions(  # DSPy 3.4.1's method, with the tolerant proposer
        self, program: Any, trainset: list[dspy.Example], demo_candidates: Any, view_data_batch_size: int,
        program_aware_proposer: bool, data_aware_proposer: bool, tip_aware_proposer: bool,
        fewshot_aware_proposer: bool, num_instruct_candidates: int,
    ) -> dict[int, list[str]]:
        proposer = _TolerantProposer(
            self.failed_proposals, program=program, trainset=trainset, prompt_model=self.prompt_model,
            view_data_batch_size=view_data_batch_size, program_aware=program_aware_proposer,
            use_dataset_summary=data_aware_proposer, use_task_demos=fewshot_aware_proposer,
            num_demos_in_context=BOOTSTRAPPED_FEWSHOT_EXAMPLES_IN_CONTEXT, use_tip=tip_aware_proposer,
            set_tip_randomly=tip_aware_proposer, use_instruct_history=False, set_history_randomly=False,
            verbose=self.verbose, rng=self.rng, init_temperature=self.init_temperature,
        )
        candidates: dict[int, list[str]] = proposer.propose_instructions_for_program(
            trainset=trainset, program=program, demo_candidates=demo_candidates, N=num_instruct_candidates,
            trial_logs={},
        )
        for i, predictor in enumerate(program.predictors()):
            candidates[i][0] = get_signature(predictor).instructions  # as DSPy: the current one competes
        return candidates


def compile_mipro(
    student: dspy.Module, params: MiproParams, metric: Any, trainset: list[dspy.Example],
    valset: list[dspy.Example] | None, task_lm: dspy.BaseLM | None, teacher: dspy.BaseLM | None, seed: int,
) -> tuple[dspy.Module, list[FailedProposal]]:
    """MIPROv2 with ``auto`` (light/medium/heavy), or with ``auto: null`` and explicit
    ``num_candidates``/``num_trials`` — the cheap setting for a local model. ``teacher`` (None:
    the task LM) both proposes the instructions and runs the pipeline that bootstraps the demo
    candidates: MIPROv2 takes the two apart (``prompt_model`` and ``teacher_settings``), and
    without the latter its demos would be the task model's own answers. The trials evaluate each
    candidate with ``task_lm``. Returns the compiled program and the proposals that failed to
    parse."""
    optimizer = TolerantMIPROv2(
        metric=metric, prompt_model=teacher, task_model=task_lm, auto=params.auto,
        teacher_settings={"lm": teacher} if teacher is not None else None,
        num_candidates=None if params.auto else (params.num_candidates or 3),
        max_bootstrapped_demos=params.max_bootstrapped_demos, max_labeled_demos=0,
        num_threads=params.num_threads, seed=seed,
    )
    options: dict[str, Any] = {}
    if not params.auto:  # DSPy's default minibatch (35) would exceed a small validation split
        size = len(valset or trainset)
        minibatch_size = min(params.minibatch_size or 35, size)
        options = {"num_trials": params.num_trials or 4, "minibatch": minibatch_size < size,
                   "minibatch_size": minibatch_size}
    compiled = optimizer.compile(student, trainset=trainset, valset=valset, **options)
    return compiled, optimizer.failed_proposals
