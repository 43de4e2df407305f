"""The agents of ``distinguish`` besides the sampler: the input writer, the pairwise judge and
the selector that runs the candidates and asks the other two through the pool."""

from __future__ import annotations

from typing import Any

import dspy

from critiquelab.eval import python_ast
from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.behaviour import filtered_largest_group, visible_verdicts
from critiquelab.eval.generated_inputs import parse_inputs, run_on_inputs
from critiquelab.eval.mutated_inputs import mutated_calls
from critiquelab.eval.visible_examples import visible_examples
from critiquelab.pipelines.distinguish.selection import (
    GREEDY,
    Group,
    InputSource,
    Selection,
    Tournament,
    agreement_winner,
    answer_of,
    behaviour_groups,
    combined_answer,
    describe,
    disagreements,
)
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role


def _written_items(step: RoleResult) -> list[str]:
    """The writer's inputs; from an unparsed reply, the list it holds or else its lines (a small
    model often writes the calls without the list around them)."""
    written = step.output("inputs")  # `step.inputs` is what the call was given
    if isinstance(written, list):
        return [str(item) for item in written]
    try:
        literal = python_ast.literal_eval(step.raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        literal = None
    return [str(item) for item in literal] if isinstance(literal, list) else step.raw.splitlines()


class InputWriterAgent(Agent):
    """Asked for inputs, writes ``n_inputs`` calls of the function from the prompt alone (``writer``
    source), takes ``n_inputs`` mutations of the visible examples' calls (``mutation``, no model
    call) or both, and publishes the usable ones (literal arguments the prompt's signature takes,
    none repeating a visible example's) with how many were written, mutated and dropped."""

    role = "input_writer"

    def __init__(self, ctx: TaskContext, writer: dspy.Module, *, n_inputs: int, source: InputSource) -> None:
        super().__init__(ctx)
        self.writer, self.n_inputs, self.source = writer, n_inputs, source
        self.listen([Intent.INPUT_REQUEST], to_me_only=True)

    def handle(self, message: Message) -> None:
        # The prompt only: hidden tests and the reference solution never reach this role.
        prompt, entry_point = self.ctx.prompt, self.ctx.entry_point
        known = [example.args for example in visible_examples(prompt, entry_point)]
        step = (call_role(self.writer, self.role, prompt=prompt, n_inputs=self.n_inputs)
                if self.source != "mutation" else None)
        found = parse_inputs(_written_items(step) if step is not None else [], prompt, entry_point,
                             limit=self.n_inputs, known=known)
        mutated = mutated_calls(known, entry_point, self.n_inputs) if self.source != "writer" else []
        more = parse_inputs(mutated, prompt, entry_point, limit=self.n_inputs, known=known + found.args)
        args, dropped = found.args + more.args, found.dropped + more.dropped
        made = f"{found.written} written" + (f" and {len(mutated)} mutated" if mutated else "")
        summary = f"{len(args)} usable inputs of {made} ({dropped} dropped)"
        self.ctx.publish(
            intent=Intent.GENERATED_INPUTS, sender=self.name, recipient=message.sender,
            content="\n".join(f"{entry_point}({a})" for a in args), in_reply_to=message.id, step=step,
            summary=summary, args=args, written=found.written, mutated=len(mutated), kept=len(args),
            dropped=dropped,
        )


class PairwiseJudgeAgent(Agent):
    """Asked about two outputs of one call, says which one the problem asks for (A or B; None
    when its reply has no readable choice)."""

    role = "pairwise_judge"

    def __init__(self, ctx: TaskContext, judge: dspy.Module) -> None:
        super().__init__(ctx)
        self.judge = judge
        self.listen([Intent.JUDGEMENT_REQUEST], to_me_only=True)

    def handle(self, message: Message) -> None:
        asked = message.metadata
        step = call_role(self.judge, self.role, prompt=self.ctx.prompt, call=asked["call"],
                         output_a=asked["output_a"], output_b=asked["output_b"])
        choice = step.right_output
        self.ctx.publish(
            intent=Intent.JUDGEMENT, sender=self.name, recipient=message.sender,
            content=str(step.reason or step.raw), in_reply_to=message.id, step=step,
            summary=f"output {choice} is right" if choice else "no readable choice", right_output=choice,
        )


class SelectorAgent(Agent):
    """Chooses among the greedy answer and the samples.

    Candidates passing the visible examples (all that compile if none does) are the pool; with
    fewer than two distinct programs in it there is nothing to tell apart. Otherwise it asks the
    input writer for inputs, runs the pool on the visible and the generated inputs, groups it by
    behaviour and decides: one group is the answer; several go to ``selection`` — a pairwise
    tournament of judgements it asks for one at a time, CodeT-style agreement, or both (a
    replacement of the first group needs both). With no usable input it answers as vote's
    greedy-first visible filter would (the visible-example rule)."""

    role = "selector"

    def __init__(self, ctx: TaskContext, *, selection: Selection, timeout_s: float) -> None:
        super().__init__(ctx)
        self.selection, self.timeout_s = selection, timeout_s
        self.greedy: Message | None = None
        self.samples: list[Message] = []
        self.codes: list[str] = []
        self.pool: list[int] = []
        self.visible_passing = 0  # candidates returning every visible example's expected value
        self.visible_choice = GREEDY
        self.fingerprints: list[str] = []  # per candidate: its behaviour on the visible examples
        self.inputs: list[str] = []  # argument sources: the visible examples', then the generated
        self.visible = 0  # how many of the inputs are the visible examples'
        self.groups: list[Group] = []
        self.tournament: Tournament | None = None
        self.judgements: list[dict[str, Any]] = []
        self.listen([Intent.PROPOSAL, Intent.STATUS, Intent.GENERATED_INPUTS, Intent.JUDGEMENT])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.PROPOSAL:
            if message.metadata.get("greedy"):
                self.greedy = message
            else:
                self.samples.append(message)
        elif message.intent == Intent.STATUS:
            self._candidates_drawn()
        elif message.intent == Intent.GENERATED_INPUTS:
            self._inputs_written(message)
        elif message.intent == Intent.JUDGEMENT:
            self._judged(message)

    def _candidates_drawn(self) -> None:
        assert self.greedy is not None, "the sampler draws the greedy answer first"
        prompt, entry_point = self.ctx.prompt, self.ctx.entry_point
        samples = sorted(self.samples, key=lambda m: int(m.metadata["sample"]))  # seed order
        self.codes = [self.greedy.content, *(m.content for m in samples)]
        verdicts = visible_verdicts(prompt, entry_point, self.codes)  # the sampler's rule
        self.fingerprints = [fingerprint for fingerprint, _ in verdicts]
        passed = [bool(self.greedy.metadata["visible_passed"]), *(ok for _, ok in verdicts[1:])]
        self.visible_passing = sum(passed)
        if not passed[GREEDY] and samples:  # else the greedy answer, as vote's greedy_first
            self.visible_choice = 1 + filtered_largest_group(self.fingerprints[1:], passed[1:])[0]
        self.pool = [i for i, ok in enumerate(passed) if ok] or [
            i for i, code in enumerate(self.codes) if assemble_program(prompt, code, entry_point).ok]
        if len({self.codes[i] for i in self.pool}) < 2:  # nothing to tell apart
            self._decide(answer_of(self.pool) if self.pool else self.visible_choice, "one_program",
                         groups=min(len(self.pool), 1))
            return
        writer = self.ctx.agent_name(InputWriterAgent.role)
        self.ctx.publish(intent=Intent.INPUT_REQUEST, sender=self.name, recipient=writer,
                         summary=f"{len({self.codes[i] for i in self.pool})} distinct programs to tell apart")

    def _inputs_written(self, message: Message) -> None:
        prompt, entry_point = self.ctx.prompt, self.ctx.entry_point
        if not message.metadata["args"]:  # the visible-example rule; the pool's groups on those examples
            groups = len({self.fingerprints[i] for i in self.pool})
            self._decide(self.visible_choice, "no_inputs", groups=groups)
            return
        examples = visible_examples(prompt, entry_point)
        self.inputs = [*(example.args for example in examples), *message.metadata["args"]]
        self.visible = len(examples)
        runs = run_on_inputs(prompt, entry_point, [self.codes[i] for i in self.pool], examples,
                             message.metadata["args"], timeout_s=self.timeout_s)
        # Every pool member compiles (it passed the visible examples, or the pool is those that compile).
        ran = {i: run for i, run in zip(self.pool, runs, strict=True) if run is not None}
        self.groups = behaviour_groups({i: run.outcomes for i, run in ran.items()},
                                       {i: run.visible_passed for i, run in ran.items()})
        if len(self.groups) == 1:
            self._decide(self.groups[0].answer, "one_group")
        elif self.selection == "agreement":
            self._decide(answer_of(agreement_winner(self.groups, self.visible)), "agreement")
        else:
            self.tournament = Tournament(self.groups, self.visible)
            self._ask()

    def _ask(self) -> None:
        assert self.tournament is not None
        pending = self.tournament.pending()
        if pending is None:
            chosen = self.tournament.chosen
            if self.selection == "pairwise":
                self._decide(chosen.answer, "pairwise")
            else:
                agreement = agreement_winner(self.groups, self.visible)
                self._decide(combined_answer(self.groups, chosen, agreement), "both")
            return
        a, b, shown = pending
        self.ctx.publish(
            intent=Intent.JUDGEMENT_REQUEST, sender=self.name,
            recipient=self.ctx.agent_name(PairwiseJudgeAgent.role), content=self.inputs[shown],
            summary=f"group {self.groups.index(a)} against group {self.groups.index(b)}",
            call=f"{self.ctx.entry_point}({self.inputs[shown]})", input=shown,
            output_a=describe(a.outcomes[shown]), output_b=describe(b.outcomes[shown]),
        )

    def _judged(self, message: Message) -> None:
        assert self.tournament is not None
        pending = self.tournament.pending()
        assert pending is not None, "a judgement answers the pending comparison"
        choice = message.metadata["right_output"]
        # Group indices and the input shown: a replay feeds these to its own tournament.
        self.judgements.append({"a": self.tournament.winner, "b": self.tournament.challenger,
                                "input": pending[2], "choice": choice})
        self.tournament.judged(choice)
        self._ask()

    def _decide(self, chosen: int, how: str, *, groups: int | None = None) -> None:
        """Publish the verdict with everything a replay of the selection needs; ``groups``: how
        many behaviour groups the pool has when it was not run on generated inputs."""
        several = len(self.groups) > 1
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=self.codes[chosen], chosen=chosen,
            summary=f"candidate {chosen} ({how}) of {len(self.codes)}", selection=how,
            greedy_passed_visible=bool(self.greedy and self.greedy.metadata["visible_passed"]),
            pool=self.pool, visible_passing=self.visible_passing, visible_choice=self.visible_choice,
            inputs=self.inputs,
            visible_inputs=self.visible,
            group_count=len(self.groups) if groups is None else groups,
            groups=[{"members": g.members, "outcomes": [list(o) for o in g.outcomes],
                     "visible_passed": list(g.visible_passed)} for g in self.groups],
            disagreements=disagreements(self.groups, self.visible), judgements=self.judgements,
            # What CodeT-style agreement would answer, whichever rule decided: no model call needed.
            agreement_choice=answer_of(agreement_winner(self.groups, self.visible)) if several else None,
        )
