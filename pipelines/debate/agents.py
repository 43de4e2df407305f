"""The agents of a debate: debaters who propose and then argue in rounds with the neighbours
their topology lets them see, and a judge who decides once the last round is in."""

from __future__ import annotations

from typing import Any, Literal, get_args

import dspy

from critiquelab.eval.assembly import assemble_program, extract_code
from critiquelab.pipelines.debate.grounding import Grounding, rule_override, with_results
from critiquelab.runtime.agents import Agent, TaskContext, sampling_config
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role, fell_back

Topology = Literal["full", "ring", "star"]
TOPOLOGIES: tuple[str, ...] = get_args(Topology)


def neighbours(index: int, count: int, topology: str) -> list[int]:
    """Whose solutions debater ``index`` reads: everyone (full), the two adjacent debaters
    (ring), or, in a star, the hub (debater 0) reads everyone and the others read the hub."""
    others = [j for j in range(count) if j != index]
    if topology == "full" or count <= 2:
        return others
    if topology == "ring":
        return sorted({(index - 1) % count, (index + 1) % count})
    if topology == "star":
        return others if index == 0 else [0]
    raise ValueError(f"unknown topology '{topology}'; use one of {TOPOLOGIES}")


def prose(argument: str) -> str:
    """An argument as others read it: its text before any code block. Small debaters often paste
    their whole function (docstring and all) into the argument; the function is read beside it
    anyway, and each copy would grow every later request (the judge's transcript holds them all).
    The step's trace keeps the reply as written."""
    text = argument.split("```", 1)[0].strip()
    return text or argument.strip()


def debater_name(ctx: TaskContext, index: int) -> str:
    return ctx.agent_name(f"debater{index}")


class DebaterAgent(Agent):
    """Proposes a solution, then each round revises it after reading its neighbours'."""

    role = "debater"

    def __init__(
        self, ctx: TaskContext, index: int, count: int, *, rounds: int, topology: str,
        proposer: dspy.Module, debater: dspy.Module, temperature: float,
        grounding: Grounding | None = None,
    ) -> None:
        super().__init__(ctx)
        self.index = index
        self.grounding = grounding  # None: debaters read code and prose only
        self.name = debater_name(ctx, index)
        self.rounds = rounds
        self.proposer = proposer
        self.debater = debater
        self.temperature = temperature
        self.sees = {debater_name(ctx, j) for j in neighbours(index, count, topology)}
        self.code: str | None = None
        self.done_rounds = 0
        self.heard: dict[int, dict[str, Message]] = {}  # round -> neighbour -> message
        self.listen([Intent.TASK_ASSIGNMENT, Intent.PROPOSAL, Intent.ARGUMENT])

    def _config(self, round_: int) -> dict[str, float | int]:
        return sampling_config(self.index + 100 * round_, self.temperature)

    def _code(self, reply: str | None) -> str:
        """The code of a debater's reply, as it is scored: a model often fences its code field and
        echoes the results it read after it, which its neighbours and the judge would otherwise
        read as code (fence in fence) beside a stale report."""
        return extract_code(reply, self.ctx.entry_point) if reply else ""

    def _results(self) -> dict[str, Any]:
        """Grounded: what the current code did on the visible examples, for its message."""
        assert self.code is not None
        return self.grounding.results(self.code).metadata() if self.grounding is not None else {}

    def _read(self, message: Message) -> str:
        """A neighbour's solution as this debater reads it (grounded: with its results)."""
        report = message.metadata.get("visible_report") if self.grounding is not None else None
        argument = message.metadata.get("argument") or "(proposal)"
        solution = with_results(message.content, report)
        return f"Debater {message.metadata['debater'] + 1} says: {argument}\n{solution}"

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_ASSIGNMENT:
            step = call_role(self.proposer, "coder", config=self._config(0), prompt=self.ctx.prompt)
            self.code = self._code(step.code or step.raw)
            self.ctx.publish(
                intent=Intent.PROPOSAL, sender=self.name, content=self.code, in_reply_to=message.id,
                summary=f"debater {self.index}: initial proposal", step=step, round=0,
                debater=self.index, **self._results(),
            )
        elif message.sender in self.sees:
            self.heard.setdefault(int(message.metadata["round"]), {})[message.sender] = message
        self._argue_when_ready()

    def _argue_when_ready(self) -> None:
        while (
            self.code is not None and self.done_rounds < self.rounds
            and len(self.heard.get(self.done_rounds, {})) == len(self.sees)
        ):
            others = "\n\n".join(
                self._read(m)
                for m in sorted(self.heard[self.done_rounds].values(), key=lambda m: m.metadata["debater"])
            )
            round_ = self.done_rounds + 1
            # Grounded, the signature has the own_results field (appended: the shared prefix stays).
            own: dict[str, Any] = {}
            if self.grounding is not None:
                own["own_results"] = self.grounding.results(self.code).report
            step = call_role(
                self.debater, self.role, config=self._config(round_), prompt=self.ctx.prompt,
                own_code=self.code, others=others, **own,
            )
            self.code = self._code(step.revised_code) or self.code
            self.done_rounds = round_
            argument = prose(step.argument or ("(unparsed reply)" if not step.parsed else ""))
            self.ctx.publish(
                intent=Intent.ARGUMENT, sender=self.name, content=self.code,
                summary=f"debater {self.index}, round {round_}: {argument[:120]}", step=step,
                round=round_, debater=self.index, argument=argument, **self._results(),
            )


class JudgeAgent(Agent):
    """Waits for every debater's final-round solution, then chooses (or merges) the answer."""

    role = "judge"

    def __init__(
        self, ctx: TaskContext, judge: dspy.Module, *, count: int, rounds: int,
        grounding: Grounding | None = None, show_results: bool = False, rule: bool = False,
    ) -> None:
        super().__init__(ctx)
        self.judge = judge
        self.count = count
        self.rounds = rounds
        # show_results: the judge reads each solution's visible-example results beside it; rule:
        # an answer failing those examples is replaced by a final solution passing them all.
        self.grounding = grounding
        self.show_results = show_results and grounding is not None
        self.rule = rule and grounding is not None
        self.final: dict[int, Message] = {}
        # (round, debater) -> argument: the transcript is read in that order, never in order of
        # arrival, which depends on how the debaters' calls were scheduled.
        self.arguments: dict[tuple[int, int], str] = {}
        self.listen([Intent.PROPOSAL, Intent.ARGUMENT])

    def handle(self, message: Message) -> None:
        round_, debater = int(message.metadata["round"]), int(message.metadata["debater"])
        if message.intent == Intent.ARGUMENT:
            self.arguments[round_, debater] = message.metadata["argument"]
        if round_ == self.rounds:
            self.final[debater] = message
        if len(self.final) == self.count:
            self._decide()

    def _decide(self) -> None:
        codes = [self.final[i].content for i in range(self.count)]
        reports = [self._report(c) for c in codes]
        proposals = "\n\n".join(
            f"Solution {i + 1}:\n{with_results(code, report)}"
            for i, (code, report) in enumerate(zip(codes, reports, strict=True))
        )
        transcript = "\n".join(
            f"Round {round_}, debater {debater + 1}: {argument}"
            for (round_, debater), argument in sorted(self.arguments.items())
        )
        step = call_role(
            self.judge, self.role, prompt=self.ctx.prompt, proposals=proposals,
            transcript=transcript or "(no debate rounds)",
        )
        choice = step.choice
        merged = (step.merged_code or "").strip()
        # A "merge" that leaves the function unimplemented (small judges often copy the prompt's
        # stub or an example output into the field) is no verdict; the choice stands.
        if merged and assemble_program(self.ctx.prompt, merged, self.ctx.entry_point).implements(
            self.ctx.entry_point
        ):
            final, how = merged, "merged"
        elif isinstance(choice, int) and 1 <= choice <= self.count:
            final, how = codes[choice - 1], "chosen"
        else:
            # An unusable verdict is recorded as such; the first debater's solution stands in.
            final, how = codes[0], "fallback"
            fell_back(self.role)  # counted and warned about (critiquelab.runtime.role_call)
        final, override = self._apply_rule(final, codes)
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=final, step=step,
            summary=f"judge: {how} {choice if how == 'chosen' else ''}".strip()
            + (f"; rule: solution {override + 1}" if override is not None else ""),
            choice=choice if how == "chosen" else None, decision=how,
            rationale=step.rationale or "",
            **self._rule_metadata(override),
        )

    def _rule_metadata(self, override: int | None) -> dict[str, Any]:
        """Under the rule, which final solution replaced the judge's answer (None: none did)."""
        return {"rule_override": override} if self.rule else {}

    def _report(self, code: str) -> str | None:
        return self.grounding.results(code).report if self.show_results and self.grounding else None

    def _apply_rule(self, verdict: str, codes: list[str]) -> tuple[str, int | None]:
        """The answer under the visible_pass rule, and the index of the final solution that
        replaced the judge's (None: the judge's answer stands)."""
        if not self.rule or self.grounding is None:
            return verdict, None
        grounding = self.grounding
        finals = [grounding.results(code).passed for code in codes]
        override = rule_override(grounding.results(verdict).passed, finals)
        return (verdict, None) if override is None else (codes[override], override)
