"""One MLflow trace per problem of a child run, built from the problem's pool messages.

Why after the fact and not with live spans: pipelines never import MLflow, and every role call
already leaves its inputs, outputs, usage and latency on the pool. The runner turns a finished
problem's messages into spans with their real start and end times and writes them through an
explicit client for the run's tracking URI (MLflow's live tracer exports to the process-wide
tracking URI, which the harness never sets).

A trace holds: a root span for the problem (task id, pipeline, seed, final status and reason —
never the hidden test or its failure output), one span per role call (role, agent, inputs,
outputs, parsed, prompt/completion tokens, latency, model), one span per sandbox run on the
prompt's visible examples (verdict text and duration) and a zero-length span for every other
message, so a new pipeline's messages show up without any change here. Each span also carries its
message as JSON (``critiquelab.message``), so a run still in progress can be read back exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from eval.results import ProblemResult
from experiments.tracking import ServiceClient
from pipelines.pool.messages import Intent, Message

TASK_TAG = "critiquelab.task_id"  # on each trace: the problem it is about
MESSAGE_ATTRIBUTE = "critiquelab.message"  # a span's pool message, as JSON
RESULT_ATTRIBUTE = "critiquelab.result"  # the root span's ProblemResult, hidden-test detail removed


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def public_result(result: ProblemResult) -> dict[str, Any]:
    """The result as a trace may show it: ``detail`` (the hidden test's failure output) dropped."""
    return result.model_dump(mode="json", exclude={"detail"})


class _SpanBuilder:
    """Spans of one trace; MLflow's ``Span`` wraps a finished OpenTelemetry span."""

    def __init__(self, trace_id: str, otel_trace_id: int) -> None:
        self.trace_id, self._otel_trace_id = trace_id, otel_trace_id
        self.spans: list[Any] = []

    def add(
        self, name: str, span_id: int, parent_id: int | None, start_ns: int, end_ns: int, *,
        span_type: str, inputs: Any, outputs: Any, attributes: dict[str, Any], ok: bool = True,
    ) -> None:
        from mlflow.entities import Span
        from mlflow.tracing.constant import SpanAttributeKey
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

        encoded = {
            SpanAttributeKey.REQUEST_ID: json.dumps(self.trace_id),
            SpanAttributeKey.SPAN_TYPE: json.dumps(span_type),
            SpanAttributeKey.INPUTS: json.dumps(inputs, default=str),
            SpanAttributeKey.OUTPUTS: json.dumps(outputs, default=str),
            **{key: json.dumps(value, default=str) for key, value in attributes.items()},
        }
        context = SpanContext(self._otel_trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))
        parent = SpanContext(self._otel_trace_id, parent_id, is_remote=False) if parent_id else None
        status = Status(StatusCode.OK if ok else StatusCode.ERROR)
        self.spans.append(Span(ReadableSpan(
            name=name, context=context, parent=parent, attributes=encoded,
            start_time=start_ns, end_time=max(end_ns, start_ns), status=status,
        )))


def _message_span(
    builder: _SpanBuilder, message: Message, span_id: int, root_id: int, model: str
) -> None:
    from mlflow.tracing.constant import SpanAttributeKey

    end = _ns(message.created_at)
    common = {
        "intent": message.intent, "agent": message.sender, "recipient": message.recipient or "",
        "summary": message.summary, MESSAGE_ATTRIBUTE: message.model_dump(mode="json"),
    }
    trace = message.metadata.get("trace")
    if trace:  # a role call: its span covers the call
        usage = trace.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        completion_tokens = int(usage.get("completion_tokens", 0))
        outputs = trace.get("outputs") if trace.get("parsed", True) else {"raw": trace.get("raw", "")}
        builder.add(
            f"{trace.get('role', 'role')}: {message.intent}", span_id, root_id,
            end - _ns(float(trace.get("latency_s", 0.0))), end, span_type="LLM",
            inputs=trace.get("inputs"), outputs=outputs, ok=bool(trace.get("parsed", True)),
            attributes={
                **common, "role": trace.get("role", ""), "parsed": bool(trace.get("parsed", True)),
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "lm_calls": int(usage.get("calls", 0)), "cached_lm_calls": int(usage.get("cached_calls", 0)),
                "latency_s": float(trace.get("latency_s", 0.0)), "model": model,
                SpanAttributeKey.MODEL: model,
                SpanAttributeKey.CHAT_USAGE: {
                    "input_tokens": prompt_tokens, "output_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
                **({"error": trace["error"]} if trace.get("error") else {}),
            },
        )
    elif message.intent == Intent.EXECUTION_FEEDBACK:  # the sandbox on the visible examples only
        duration = float(message.metadata.get("duration_s", 0.0))
        builder.add(
            "sandbox: visible examples", span_id, root_id, end - _ns(duration), end, span_type="TOOL",
            inputs={"code_message_id": message.in_reply_to}, outputs={"feedback": message.content},
            attributes={**common, "duration_s": duration},
        )
    else:
        builder.add(
            message.intent, span_id, root_id, end, end, span_type="UNKNOWN",
            inputs={"in_reply_to": message.in_reply_to}, outputs={"content": message.content},
            attributes=common,
        )


def build_trace(
    result: ProblemResult, messages: Sequence[Message], *, experiment_id: str, run_id: str,
    model: str, finished_at: float,
) -> tuple[Any, list[Any]]:
    """The ``TraceInfo`` and spans of one problem: ``finished_at`` is when its result came back,
    so the root span covers ``result.latency_s`` before it."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import TraceMetadataKey, TraceTagKey

    otel_trace_id = random.getrandbits(128) or 1
    builder = _SpanBuilder(f"tr-{otel_trace_id:032x}", otel_trace_id)
    end = _ns(finished_at)
    start = min([end - _ns(result.latency_s)] + [_ns(m.created_at) for m in messages[:1]])
    summary = {"status": result.status.value, "reason": result.reason}
    builder.add(
        result.task_id, 1, None, start, end, span_type="AGENT",
        inputs={"task_id": result.task_id, "pipeline": result.pipeline, "seed": result.seed},
        outputs=summary, ok=result.passed,
        attributes={
            "task_id": result.task_id, "pipeline": result.pipeline, "seed": result.seed,
            **summary, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "lm_calls": result.lm_calls,
            "thread_id": result.thread_id, RESULT_ATTRIBUTE: public_result(result),
        },
    )
    for index, message in enumerate(messages, start=2):
        _message_span(builder, message, index, 1, model)
    info = TraceInfo(
        trace_id=builder.trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=start // 1_000_000, execution_duration=(end - start) // 1_000_000,
        state=TraceState.OK if result.passed else TraceState.ERROR,
        request_preview=json.dumps({"task_id": result.task_id, "pipeline": result.pipeline}),
        response_preview=json.dumps(summary),
        trace_metadata={TraceMetadataKey.SOURCE_RUN: run_id},
        tags={TraceTagKey.TRACE_NAME: result.task_id, TASK_TAG: result.task_id},
    )
    return info, builder.spans


class ProblemTracer:
    """Writes the traces of one child run to its tracking store, linked to the run."""

    def __init__(self, uri: str, experiment_id: str, run_id: str, model: str) -> None:
        from mlflow.tracing.client import TracingClient

        self._client = ServiceClient(TracingClient(uri), uri)
        self.experiment_id, self.run_id, self.model = experiment_id, run_id, model

    def log(self, result: ProblemResult, messages: Sequence[Message], finished_at: float) -> str:
        """Write one problem's trace; returns its id."""
        info, spans = build_trace(
            result, messages, experiment_id=self.experiment_id, run_id=self.run_id, model=self.model,
            finished_at=finished_at,
        )
        # Spans first: a store that keeps spans itself marks the trace so, and start_trace then
        # only adds the run link and tags (MLflow's own exporter does the same).
        try:
            self._client.log_spans(self.experiment_id, spans)
            stored_spans = True
        except NotImplementedError:
            stored_spans = False
        stored = self._client.start_trace(info)
        if not stored_spans:  # e.g. an older tracking server: spans go to the trace's artifacts
            from mlflow.entities import TraceData

            self._client._upload_trace_data(stored, TraceData(spans=spans))
        return str(stored.trace_id)

    def traced_tasks(self) -> set[str]:
        """Task ids that already have a trace in this run (a resumed run does not log them again)."""
        found = run_traces(self._client, self.run_id, spans=False)
        return {t.info.tags.get(TASK_TAG, "") for t in found}


def run_traces(client: Any, run_id: str, *, spans: bool = True) -> list[Any]:
    """Every trace linked to ``run_id`` (``client``: a ``TracingClient``), oldest first."""
    experiment_id = client.store.get_run(run_id).info.experiment_id
    found: list[Any] = []
    token = None
    while True:
        page = client.search_traces(
            locations=[experiment_id], run_id=run_id, include_spans=spans, max_results=500, page_token=token,
            order_by=["timestamp_ms ASC"],
        )
        found.extend(page)
        token = page.token
        if not token:
            return found


def trace_checkpointed(
    tracer: ProblemTracer, results: Sequence[ProblemResult], history: Any, traced: set[str]
) -> int:
    """Trace the problems of a resumed run that came from checkpoints and have no trace in this run
    yet (``history(thread_id)`` gives a problem's messages). Their times are their messages'
    times; returns how many were traced."""
    count = 0
    for result in results:
        if result.task_id in traced:
            continue
        messages = history(thread_id=result.thread_id) if result.thread_id else []
        finished = max([m.created_at for m in messages], default=0.0) or result.latency_s
        tracer.log(result, messages, finished)
        count += 1
    return count
