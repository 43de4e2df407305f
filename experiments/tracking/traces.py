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
import queue
import random
import threading
from collections.abc import Sequence
from typing import Any

from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.tracking.store import ServiceClient
from critiquelab.runtime.pool.messages import Intent, Message

TASK_TAG = "critiquelab.task_id"  # on each trace: the problem it is about
MESSAGE_ATTRIBUTE = "critiquelab.message"  # a span's pool message, as JSON
RESULT_ATTRIBUTE = "critiquelab.result"  # the root span's ProblemResult, hidden-test detail removed
_LINKS_PER_CALL = 100  # MLflow's limit on traces linked to a run in one request


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
    from mlflow.tracing.constant import SpanAttributeKey, TraceMetadataKey, TraceTagKey

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
            # Trace tags a span-keeping store takes from the root span.
            f"{SpanAttributeKey.TRACE_TAG_PREFIX}{TraceTagKey.TRACE_NAME}": result.task_id,
            f"{SpanAttributeKey.TRACE_TAG_PREFIX}{TASK_TAG}": result.task_id,
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
    """Writes the traces of one child run to its tracking store, linked to the run.

    :meth:`submit` only queues: a writer thread stores what has queued up in one batch (one
    ``log_spans`` for all its spans), so the solving threads never wait for the store's commits.
    :meth:`close` waits until everything is stored and raises what the writer met.
    """

    def __init__(self, uri: str, experiment_id: str, run_id: str, model: str) -> None:
        from mlflow.tracing.client import TracingClient
        from mlflow.tracking import MlflowClient

        self._client = ServiceClient(TracingClient(uri), uri)
        self._runs = ServiceClient(MlflowClient(tracking_uri=uri), uri)
        self.experiment_id, self.run_id, self.model = experiment_id, run_id, model
        self._queue: queue.Queue[tuple[ProblemResult, list[Message], float] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, result: ProblemResult, messages: Sequence[Message], finished_at: float) -> None:
        """Queue one problem's trace (``finished_at``: when its result came back)."""
        if self._writer is None:
            # A daemon: a run stopped by an error or Ctrl-C does not wait for it; the problems it
            # had not stored get their traces when the run resumes (see trace_checkpointed).
            self._writer = threading.Thread(target=self._drain, name="trace-writer", daemon=True)
            self._writer.start()
        self._queue.put((result, list(messages), finished_at))

    def _drain(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            items = [item for item in batch if item is not None]
            if items and self._error is None:
                try:
                    self.write(items)
                except BaseException as exc:  # raised to the runner by close()
                    self._error = exc
            if len(items) < len(batch):
                return

    def close(self) -> None:
        """Wait until every submitted trace is stored; raise what the writer met."""
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None
        if self._error is not None:
            raise self._error

    def write(self, items: Sequence[tuple[ProblemResult, Sequence[Message], float]]) -> list[str]:
        """Store the traces of ``(result, messages, finished_at)`` now; returns their ids."""
        built = [
            build_trace(result, messages, experiment_id=self.experiment_id, run_id=self.run_id,
                        model=self.model, finished_at=finished_at)
            for result, messages, finished_at in items
        ]
        spans = [span for _, trace_spans in built for span in trace_spans]
        ids = [info.trace_id for info, _ in built]
        try:
            # A store that keeps spans itself creates the traces from them (tags from the root
            # span's trace-tag attributes) in one transaction; links to the run go 100 at a time.
            self._client.log_spans(self.experiment_id, spans)
        except NotImplementedError:  # e.g. an older tracking server: trace by trace, spans as artifacts
            from mlflow.entities import TraceData

            for info, trace_spans in built:
                self._client._upload_trace_data(self._client.start_trace(info), TraceData(spans=trace_spans))
            return ids
        for start in range(0, len(ids), _LINKS_PER_CALL):
            self._runs.link_traces_to_run(ids[start : start + _LINKS_PER_CALL], self.run_id)
        return ids

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
    items = []
    for result in results:
        if result.task_id in traced:
            continue
        messages = history(thread_id=result.thread_id) if result.thread_id else []
        finished = max([m.created_at for m in messages], default=0.0) or result.latency_s
        items.append((result, messages, finished))
    if items:
        tracer.write(items)
    return len(items)
