"""One problem's transcript as HTML: swimlanes, agent cards, code versions with diffs and
verdicts, the pattern panels (:mod:`critiquelab.experiments.viewer.pattern_panels`) and the full message list.

Every string that came from a model or a dataset goes through :func:`html.escape`; the views
here read only generic message fields (sender, intent, in_reply_to, metadata), so a pipeline's
messages show in the lanes and the list whether or not it has a panel of its own.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from html import escape
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.viewer.data import json_text, message_trace
from critiquelab.experiments.viewer.pattern_panels import pattern_panels
from critiquelab.pipelines.registry import role_map
from critiquelab.pipelines.roles import RoleMap
from critiquelab.runtime.agents import agent_role
from critiquelab.runtime.pool.messages import Intent, Message

CODE_INTENTS = (Intent.OUTPUT_COMPLETE, Intent.FIX, Intent.PROPOSAL, Intent.ARGUMENT, Intent.VERDICT)
_LANE_HEIGHT, _LANE_LABEL, _WIDTH = 34, 150, 900


def swimlanes(messages: Sequence[Message]) -> str:
    """An SVG: one lane per agent on a time axis, a role call as a bar (its latency) ending in a
    mark, an arrow from each message to the one it answers."""
    if not messages:
        return "<p>No messages.</p>"
    lanes: list[str] = []
    for message in messages:
        if message.sender not in lanes:
            lanes.append(message.sender)
    starts = [m.created_at - float(message_trace(m).get("latency_s", 0.0)) for m in messages]
    t0, t1 = min(starts), max(m.created_at for m in messages)
    span = max(t1 - t0, 1e-6)

    def x(t: float) -> float:
        return _LANE_LABEL + 10 + (t - t0) / span * (_WIDTH - _LANE_LABEL - 30)

    def y(sender: str) -> float:
        return lanes.index(sender) * _LANE_HEIGHT + _LANE_HEIGHT / 2

    height = len(lanes) * _LANE_HEIGHT + 20
    parts = [
        f'<svg class="lanes" viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}" '
        'xmlns="http://www.w3.org/2000/svg"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" '
        'refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 '
        'L 0 10 z" fill="#888"/></marker></defs>'
    ]
    for index, sender in enumerate(lanes):
        top = index * _LANE_HEIGHT
        parts.append(f'<rect class="lane" x="0" y="{top}" width="{_WIDTH}" height="{_LANE_HEIGHT}" '
                     f'fill="{"#f7f7f7" if index % 2 else "#fff"}"/>')
        parts.append(f'<text x="4" y="{top + _LANE_HEIGHT / 2 + 4}" class="lane-label">'
                     f"{escape(agent_role(sender))}</text>")
    by_id = {m.id: m for m in messages}
    for message in messages:
        source = by_id.get(message.in_reply_to or "")
        if source is not None:
            parts.append(f'<line class="reply" x1="{x(source.created_at):.1f}" y1="{y(source.sender):.1f}" '
                         f'x2="{x(message.created_at):.1f}" y2="{y(message.sender):.1f}" stroke="#888" '
                         'marker-end="url(#arrow)"/>')
    for number, (message, start) in enumerate(zip(messages, starts, strict=True), start=1):
        cy = y(message.sender)
        if message.created_at - start > 0:
            width = max(x(message.created_at) - x(start), 1)
            parts.append(f'<rect class="call" x="{x(start):.1f}" y="{cy - 5:.1f}" '
                         f'width="{width:.1f}" height="10" fill="#cfe0f7"/>')
        title = escape(f"#{number} {message.intent} — {message.summary}")
        parts.append(f'<a href="#m{number}"><circle class="mark intent-{escape(message.intent)}" '
                     f'cx="{x(message.created_at):.1f}" cy="{cy:.1f}" r="6">'
                     f"<title>{title}</title></circle></a>")
    parts.append(f'<text x="{_LANE_LABEL}" y="{height - 4}" class="axis">0 s</text>'
                 f'<text x="{_WIDTH - 60}" y="{height - 4}" class="axis">{span:.1f} s</text></svg>')
    return "".join(parts)


def declared_roles(pipeline: str) -> RoleMap | None:
    """The roles pipeline ``pipeline`` declares; None for a run of a pipeline not installed here."""
    if not pipeline:
        return None
    try:
        return role_map(pipeline)
    except UserError:
        return None


def agent_cards(messages: Sequence[Message], roles: RoleMap | None = None) -> str:
    """Calls, tokens and wall time per agent, and the roles its calls were (as ``roles``, the
    pipeline's declaration, names them: a debater's proposal is the coder role's)."""
    cards: dict[str, dict[str, float]] = {}
    played: dict[str, list[str]] = {}
    for message in messages:
        call = str(message_trace(message).get("role") or "")
        role = (roles.role_of_call(call) if roles is not None else None) or call
        if role and role not in played.setdefault(message.sender, []):
            played[message.sender].append(role)
        card = cards.setdefault(message.sender, {"messages": 0, "calls": 0, "tokens": 0, "seconds": 0.0})
        card["messages"] += 1
        usage = message_trace(message).get("usage") or {}
        card["calls"] += int(usage.get("calls", 0))
        card["tokens"] += int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        card["seconds"] += float(message_trace(message).get("latency_s", 0.0))
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{escape(agent_role(sender))}</b>{_roles_line(played.get(sender, []))}<br>'
        f'{int(c["messages"])} messages, '
        f'{int(c["calls"])} LM calls<br>{int(c["tokens"]):,} tokens, {c["seconds"]:.1f} s</div>'
        for sender, c in cards.items()
    ) + "</div>"


def _roles_line(roles: list[str]) -> str:
    return f"<br>role{'s' if len(roles) > 1 else ''}: {escape(', '.join(roles))}" if roles else ""


def code_versions(messages: Sequence[Message]) -> list[Message]:
    """Messages that carry a version of the code, oldest first."""
    return [m for m in messages if m.intent in CODE_INTENTS and m.content.strip()]


def _verdicts(version: Message, messages: Sequence[Message]) -> list[str]:
    """What was said about one version: reviews, sandbox feedback on the visible examples."""
    found = []
    for message in messages:
        if message.in_reply_to != version.id and message.metadata.get("code_message_id") != version.id:
            continue
        if "verdict" in message.metadata:
            found.append(f"{agent_role(message.sender)}: {message.metadata['verdict']}")
        elif message.intent == Intent.EXECUTION_FEEDBACK:
            found.append(f"visible examples: {message.content.splitlines()[0] if message.content else ''}")
    return found


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2)
    rows = []
    for line in lines:
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        rows.append(f'<span class="{kind}">{escape(line)}</span>')
    return "\n".join(rows) if rows else '<span class="ctx">(unchanged)</span>'


def versions_panel(messages: Sequence[Message], problem: ProblemResult) -> str:
    """Each version with its verdicts and its diff against the same agent's previous version
    (else the previous version of anyone)."""
    versions = code_versions(messages)
    if not versions:
        return "<p>No code versions.</p>"
    # The final code is the last version it was built from (later versions may repeat earlier ones).
    final_index = max((i for i, v in enumerate(versions, start=1) if v.content.strip() in problem.final_code),
                      default=0)
    items = []
    last_by_agent: dict[str, Message] = {}
    previous: Message | None = None
    for number, version in enumerate(versions, start=1):
        base = last_by_agent.get(version.sender, previous)
        verdicts = _verdicts(version, messages)
        final = " final" if number == final_index else ""
        items.append(
            f'<details class="version{final}"><summary>v{number} · {escape(agent_role(version.sender))} · '
            f'{escape(version.intent)} · {escape(version.summary)}'
            + (f' · <i>{escape("; ".join(verdicts))}</i>' if verdicts else "")
            + (" · <b>final</b>" if final else "")
            + "</summary>"
            + (f'<pre class="diff">{_diff(base.content, version.content)}</pre>' if base is not None else "")
            + f'<pre class="code">{escape(version.content)}</pre></details>'
        )
        last_by_agent[version.sender] = version
        previous = version
    return "".join(items)


def _exchange(number: int, index: int, exchange: dict[str, Any]) -> str:
    """One LM call of a role call: its rendered prompt, message by message, and its raw reply."""
    request = exchange.get("request")
    if isinstance(request, list):
        prompt = "\n\n".join(f"[{m.get('role', '')}]\n{m.get('content', '')}" for m in request
                             if isinstance(m, dict))
    else:
        prompt = str(request or "")
    replies = "\n\n".join(str(r) for r in exchange.get("replies") or [])
    return (f'<h4>LM call {index}: rendered prompt</h4><pre class="prompt" id="m{number}-prompt{index}">'
            f'{escape(prompt)}</pre><h4>LM call {index}: raw reply</h4>'
            f'<pre class="reply">{escape(replies)}</pre>')


def message_list(messages: Sequence[Message]) -> str:
    """Every message; opening one shows its full content, the role's inputs, each LM call's
    rendered prompt and raw reply, the parsed outputs, usage and the remaining metadata."""
    items = []
    for number, message in enumerate(messages, start=1):
        trace = message_trace(message)
        rest = {k: v for k, v in message.metadata.items() if k != "trace"}
        body = [f"<h4>content</h4><pre>{escape(message.content)}</pre>"]
        if trace:
            body.append(f"<h4>role {escape(str(trace.get('role', '')))}: inputs of its prompt</h4>"
                        f"<pre>{escape(json_text(trace.get('inputs')))}</pre>")
            body.extend(_exchange(number, index, exchange)
                        for index, exchange in enumerate(trace.get("exchanges") or [], start=1))
            if trace.get("parsed", True):
                body.append(f"<h4>parsed reply</h4><pre>{escape(json_text(trace.get('outputs')))}</pre>")
            else:
                body.append(f"<h4>raw reply (unparsed)</h4><pre>{escape(str(trace.get('raw', '')))}</pre>")
            body.append(f"<h4>usage</h4><pre>{escape(json_text(trace.get('usage')))} "
                        f"latency {float(trace.get('latency_s', 0.0)):.2f} s</pre>")
        if rest:
            body.append(f"<h4>metadata</h4><pre>{escape(json_text(rest))}</pre>")
        recipient = agent_role(message.recipient) if message.recipient else "all"
        items.append(
            f'<details class="message" id="m{number}" data-intent="{escape(message.intent)}"><summary>'
            f'#{number} <span class="intent">{escape(message.intent)}</span> '
            f"{escape(agent_role(message.sender))} → {escape(recipient)}: {escape(message.summary)}"
            f"</summary>{''.join(body)}</details>"
        )
    return "".join(items) or "<p>No messages were logged for this problem.</p>"


def problem_sections(problem: ProblemResult, messages: Sequence[Message], pipeline: str = "") -> str:
    """The body of a problem page (also one column of a paired view); ``pipeline``: the registered
    pipeline the run ran, whose declared roles name what each agent's calls were."""
    detail = f"<pre>{escape(problem.detail)}</pre>" if problem.detail else ""
    return "".join([
        f'<p class="status-{escape(problem.status)}"><b>{escape(problem.status)}</b> '
        f"{escape(problem.reason)} · {problem.total_tokens:,} tokens · {problem.lm_calls} LM calls · "
        f"{problem.latency_s:.1f} s</p>{detail}",
        f"<h2>Swimlanes</h2>{swimlanes(messages)}",
        f"<h2>Agents</h2>{agent_cards(messages, declared_roles(pipeline))}",
        pattern_panels(messages, problem),
        f"<h2>Code versions</h2>{versions_panel(messages, problem)}",
        f'<h2>Final code</h2><pre class="code">{escape(problem.final_code)}</pre>',
        f"<h2>Messages</h2>{message_list(messages)}",
    ])
