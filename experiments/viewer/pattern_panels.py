"""Panels for collaboration patterns, each shown only where a problem's messages hold its data:
debate rounds and agreement, vote groups, the scratchpad's channels over time, the architect's
session tree and the tree-search tree (:mod:`critiquelab.experiments.viewer.search_tree_panel`).

The panels rebuild what they show with the pipelines' own readers — the scratchpad's
:func:`~critiquelab.runtime.scratchpad.replay.replay_steps`, the architect's
:func:`~critiquelab.pipelines.architect.session_tree.export_session_tree` — so the viewer cannot drift from
them. Every string that came from a model goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.viewer.data import json_text, message_trace
from critiquelab.experiments.viewer.search_tree_panel import search_tree_panel
from critiquelab.pipelines.architect.session_tree import export_session_tree
from critiquelab.pipelines.debate.outcome import ConsensusFigures
from critiquelab.runtime.agents import agent_role
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.pool.store import seq_of
from critiquelab.runtime.scratchpad.channels import size_bytes
from critiquelab.runtime.scratchpad.events import (
    ConflictEvent,
    InitEvent,
    RefusedEvent,
    ScratchpadIntent,
    UpdateEvent,
)
from critiquelab.runtime.scratchpad.replay import replay_steps

# Scratchpad events that concern one channel (an init names all of them, a read several).
# The events that act on one channel, and their models (each has the channel and the agent).
_CHANNEL_EVENTS: dict[str, type[UpdateEvent | ConflictEvent | RefusedEvent]] = {
    ScratchpadIntent.UPDATE: UpdateEvent, ScratchpadIntent.CONFLICT: ConflictEvent,
    ScratchpadIntent.REFUSED: RefusedEvent,
}


def debate_panel(messages: Sequence[Message], problem: ProblemResult) -> str:
    """Rounds × debaters, the agreement per round and the judge's decision; empty if no debate."""
    cells: dict[tuple[int, int], Message] = {}
    for message in messages:
        if message.intent in (Intent.PROPOSAL, Intent.ARGUMENT) and "debater" in message.metadata:
            cells[int(message.metadata["round"]), int(message.metadata["debater"])] = message
    if not cells:
        return ""
    rounds = sorted({r for r, _ in cells})
    debaters = sorted({d for _, d in cells})
    agreement = ConsensusFigures.read(problem.extra).agreement or []
    head = "".join(f"<th>debater {d + 1}</th>" for d in debaters)
    rows = []
    for round_ in rounds:
        share = f"{agreement[round_]:.0%}" if round_ < len(agreement) else "–"
        row = "".join(
            f"<td>{escape(str(cells[round_, d].metadata.get('argument') or '(proposal)')[:300])}</td>"
            if (round_, d) in cells else "<td>–</td>" for d in debaters
        )
        rows.append(f"<tr><th>round {round_}</th>{row}<td>{share}</td></tr>")
    verdict = next((m for m in reversed(messages) if m.intent == Intent.VERDICT), None)
    decision = ""
    if verdict is not None:
        decision = (f"<p>Judge: {escape(str(verdict.metadata.get('decision', '')))} "
                    f"{escape(str(verdict.metadata.get('choice') or ''))} — "
                    f"{escape(str(verdict.metadata.get('rationale', '')))}</p>")
    return (f'<section class="panel debate"><h2>Debate</h2><table><tr><th></th>{head}<th>agreement</th></tr>'
            + "".join(rows) + f"</table>{decision}</section>")


def vote_panel(messages: Sequence[Message]) -> str:
    """The greedy answer (greedy_first) and the samples, the chosen one marked; empty if no vote."""
    samples = [m for m in messages if m.intent == Intent.PROPOSAL and "sample" in m.metadata]
    greedy = next((m for m in messages if m.intent == Intent.PROPOSAL and m.metadata.get("greedy")), None)
    verdicts = [m for m in messages if m.intent == Intent.VERDICT and "largest_group" in m.metadata]
    verdict = verdicts[-1] if verdicts else None
    if (not samples and greedy is None) or verdict is None:
        return ""
    chosen = int(verdict.metadata.get("chosen", 0))  # -1: the greedy answer

    def tokens(message: Message) -> int:
        return int((message_trace(message).get("usage") or {}).get("completion_tokens", 0))

    items = "".join(
        f"<li>{'<b>chosen</b> ' if i == chosen else ''}sample {i + 1}: {tokens(m)} completion tokens</li>"
        for i, m in enumerate(samples)
    )
    if greedy is not None:
        verdict_on_examples = "passes" if greedy.metadata.get("visible_passed") else "fails"
        items = (f"<li>{'<b>chosen</b> ' if chosen == -1 else ''}greedy answer: {tokens(greedy)} "
                 f"completion tokens; {verdict_on_examples} the visible examples</li>") + items
    return (f'<section class="panel vote"><h2>Vote</h2><p>{escape(verdict.summary)}</p>'
            f"<ul>{items}</ul></section>")


def _operation(event: Any, intent: Intent) -> tuple[str, str]:
    """A row's CSS class and what the event did to its channel, in words."""
    if intent == ScratchpadIntent.REFUSED:
        return "refused", f"refused ({event.reason}): {event.detail}"
    if intent == ScratchpadIntent.CONFLICT:
        keys = f", kept others' {', '.join(event.conflicting_keys)}" if event.conflicting_keys else ""
        return "conflict", (f"conflict: read v{event.read_version}, now v{event.current_version}; "
                            f"{event.policy} → {event.resolution}{keys}")
    dropped = f" (dropped {event.dropped} oldest)" if event.dropped else ""
    return "update", f"{event.operation}{dropped}"


def _scratchpad(messages: Sequence[Message], scratchpad_id: str) -> str:
    """One scratchpad: a table per channel, a row per event on it with the state after it."""
    mine = sorted((m for m in messages if m.metadata.get("scratchpad_id") == scratchpad_id), key=seq_of)
    init = InitEvent.model_validate_json(next(m for m in mine if m.intent == ScratchpadIntent.INIT).content)
    rows: dict[str, list[str]] = {channel.name: [] for channel in init.channels}
    t0 = mine[0].created_at
    # The state right after each event, as the scratchpad's own replay rebuilds it (one pass).
    steps = ((m, state) for m, state in replay_steps(mine, scratchpad_id) if m.intent in _CHANNEL_EVENTS)
    for step, (message, state) in enumerate(steps, start=1):
        event = _CHANNEL_EVENTS[message.intent].model_validate_json(message.content)
        kind, operation = _operation(event, message.intent)
        value = state.values.get(event.channel)
        # A string (code, on a replace channel) reads best as itself, not as a JSON literal.
        shown = value if isinstance(value, str) else json_text(value)
        rows.setdefault(event.channel, []).append(
            f'<tr class="pad-event {kind}"><td>{step}</td><td>{message.created_at - t0:.2f} s</td>'
            f"<td>{escape(agent_role(event.agent))}</td><td>{escape(operation)}</td>"
            f"<td>{state.versions.get(event.channel, '–')}</td><td>{size_bytes(state.values):,} B</td>"
            f"<td><pre>{escape(shown)}</pre></td></tr>"
        )
    kinds = {channel.name: f"{channel.type}, {channel.conflict_policy}" for channel in init.channels}
    tables = "".join(
        f'<h3>channel {escape(name)} <small>({escape(kinds.get(name, "unknown channel"))})</small></h3>'
        f'<table class="channel" data-channel="{escape(name)}"><tr><th>step</th><th>time</th><th>agent</th>'
        f"<th>operation</th><th>version</th><th>size after</th><th>value after</th></tr>"
        f"{''.join(found)}</table>"
        for name, found in rows.items()
    )
    return (f'<div class="scratchpad" data-scratchpad="{escape(scratchpad_id)}"><p>scratchpad '
            f"{escape(scratchpad_id)}: cap {init.max_size_kb:g} KiB ({escape(init.on_overflow)})</p>"
            f"{tables}</div>")


def scratchpad_panel(messages: Sequence[Message]) -> str:
    """Every scratchpad of the problem, its channels over time; empty if it has none."""
    pads = [str(m.metadata.get("scratchpad_id")) for m in messages if m.intent == ScratchpadIntent.INIT]
    if not pads:
        return ""
    body = "".join(_scratchpad(messages, pad) for pad in dict.fromkeys(pads))
    return f'<section class="panel scratchpad-panel"><h2>Scratchpad</h2>{body}</section>'


def _session_facts(session: dict[str, Any], triggers: dict[str, dict[str, Any]]) -> str:
    """What one session did, from the contracts its messages (and its trigger) carry."""
    facts: list[str] = []
    trigger = triggers.get(session.get("trigger_message_id") or "") or {}
    if trigger.get("contract") == "DeveloperInput":
        task = trigger["payload"]["task"]
        attempt = trigger["payload"]["attempt"]
        facts.append(f"task {task['task_id']} ({task['function_name']}), attempt {attempt}")
    for message in session["messages"]:
        payload = message.get("payload") or {}
        contract = message.get("contract")
        if contract == "ArchitectPlan":
            tasks = (f"{t['task_id']} ({t['function_name']})" for t in payload["tasks"])
            facts.append("plan: " + ", ".join(tasks))
        elif contract == "ArchitectDecision":
            facts.append(f"decision on {payload['task_id']}: {payload['action']} ({payload['reason']})")
        elif contract == "DeveloperOutput":
            facts.append(f"status {payload['status']}: {payload['summary']}")
        elif contract == "ReviewerOutput":
            check = payload["verification"]
            facts.append(f"verdict {payload['verdict']}: {payload['summary']} "
                         f"(visible examples {check['passed']}/{check['examples']})")
        elif message["intent"] == Intent.CRITIQUE:
            facts.append(f"review unparsed: {message['summary']}")
    return "".join(f'<li class="fact">{escape(fact)}</li>' for fact in facts)


def _session(session: dict[str, Any], triggers: dict[str, dict[str, Any]]) -> str:
    children = "".join(_session(child, triggers) for child in session["children"])
    count = len(session["messages"])
    return (f'<li class="session session-{escape(session["kind"])}" '
            f'data-session="{escape(session["session_id"])}">'
            f'<b>{escape(session["kind"])}</b> {escape(agent_role(session["agent"]))} · '
            f'{escape(session["session_id"])} · {count} message{"" if count == 1 else "s"}'
            f"<ul>{_session_facts(session, triggers)}{children}</ul></li>")


def architect_panel(messages: Sequence[Message]) -> str:
    """The architect's session tree: the orchestrator, a sub-session per delegation (task,
    developer, status) and per review (verdict); empty if no message belongs to a session."""
    if not any(m.metadata.get("session_kind") for m in messages):
        return ""
    tree = export_session_tree(messages)
    triggers: dict[str, dict[str, Any]] = {}
    pending = [tree["root"]]
    while pending:
        session = pending.pop()
        triggers.update((m["id"], m) for m in session["messages"])
        pending.extend(session["children"])
    return (f'<section class="panel architect"><h2>Session tree</h2><ul class="session-tree">'
            f"{_session(tree['root'], triggers)}</ul></section>")


def pattern_panels(messages: Sequence[Message], problem: ProblemResult) -> str:
    """The panels whose data the problem's messages hold, in a fixed order."""
    return "".join([
        debate_panel(messages, problem), vote_panel(messages), scratchpad_panel(messages),
        architect_panel(messages), search_tree_panel(messages),
    ])
