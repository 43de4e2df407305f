"""Were the compared runs made the same way? Pipelines compared across experiments (explicit run
ids from several parents) can differ in more than the pipeline: another model file, another
server, another concurrency on a live server (batching flips greedy near-ties), another sandbox
isolation or another version of the code. Such a difference changes what is measured, so
`compare` names it in a notice (on screen, in the report, on the comparison's MLflow run) rather
than pooling the runs silently. It is a notice, not a refusal: comparing two models is a
legitimate question, as long as the table says that is what it compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Parent-run params that change answers or verdicts. Everything else on a parent (names,
# descriptions, the pipelines list itself) is expected to differ between experiments.
MEASURING_PARAMS = (
    "model.resolved", "model.file_sha256", "model.api_base",
    "serving.server", "serving.version", "serving.slots",
    "config.model.temperature", "config.model.max_tokens", "config.model.n_ctx",
    "config.model.send_seed", "config.concurrency",
    "config.dataset.source", "config.dataset.format", "config.dataset.challenge_tests",
    "config.execution.timeout_s", "isolation",
    "version.dspy", "version.litellm", "version.llama-cpp-python",
)
MEASURING_TAGS = ("critiquelab.code_fingerprint",)


_SHORT = 24  # values this long or shorter are shown whole
_CONTEXT = 8  # characters of the shared prefix kept before where the values differ
_SUFFIX = 16  # a shared ending this short (a file name, "/v1") is kept whole
_LONGEST = 48  # the part shown of one value; longer is shortened in its middle


def _common_prefix(values: Sequence[str]) -> int:
    first, last = min(values), max(values)  # what those two share, every value shares
    return next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b),
                min(len(first), len(last)))


def _shown(values: Sequence[str]) -> list[str]:
    """Each value, cut to the part where they differ, the whole of that part: two endpoints on
    one host read ``….0.1:8081/v1`` and ``….0.1:8082/v1``, not twice the same prefix; values that
    share nothing (``humaneval`` and a file path) are shown from their start to their end, a
    long one shortened in its middle, never cut off where it differs."""
    if all(len(v) <= _SHORT for v in values):
        return list(values)
    distinct = sorted(set(values))
    prefix = _common_prefix(distinct)
    suffix = _common_prefix([v[prefix:][::-1] for v in distinct])  # shared ending, after the prefix
    shown = []
    for value in values:
        start = max(0, prefix - _CONTEXT)
        end = len(value) if suffix <= _SUFFIX else len(value) - suffix + _CONTEXT
        part = value[start:end]
        if len(part) > _LONGEST:
            half = (_LONGEST - 1) // 2
            part = f"{part[:half]}…{part[-half:]}"
        shown.append(("…" if start else "") + part + ("…" if end < len(value) else ""))
    return shown


def provenance_notices(client: Any, parent_ids: Sequence[str]) -> list[str]:
    """One notice per setting whose value differs between the given parent runs (empty ids —
    pipeline runs with no parent — are skipped: nothing to compare them by). Values are listed
    in the order the runs were given, so the notice reads like the command line."""
    parents = list(dict.fromkeys(p for p in parent_ids if p))
    if len(parents) < 2:
        return []
    made = {}
    for parent_id in parents:
        run = client.get_run(parent_id)
        made[parent_id] = {
            **{k: run.data.params.get(k, "(not logged)") for k in MEASURING_PARAMS},
            **{k: run.data.tags.get(k, "(not logged)") for k in MEASURING_TAGS},
        }
    notices = []
    for key in (*MEASURING_PARAMS, *MEASURING_TAGS):
        values = {parent_id: made[parent_id][key] for parent_id in parents}
        if len(set(values.values())) > 1:
            shown = _shown(list(values.values()))
            listed = ", ".join(f"{v} ({p[:8]})" for p, v in zip(values, shown, strict=True))
            notices.append(
                f"the compared runs were made with different {key}: {listed}; "
                "differences in the table may come from that, not only from the pipelines"
            )
    return notices
