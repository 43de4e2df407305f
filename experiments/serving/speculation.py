"""Speculative decoding on the local llama-server: tokens it does not have to generate one by one.

A draft proposes the next tokens and the model checks them all in one batch; a checked token is
the one the model would have chosen anyway, so sampling keeps its distribution — but the check's
batch sums floating-point numbers in another order than one-token steps do, and a greedy near-tie
can flip: measured at concurrency 1 (README, Models), some greedy replies differ from the
unspeculated server's, as with batching. Hence off by default. What proposes the draft:

- ``ngram``: the request's own tokens (llama.cpp's ``ngram-simple``): when the last few tokens
  occurred earlier in the prompt or the reply, what followed them there. Costs nothing when
  nothing repeats, and pays where a role copies — a fixer returning the code it was given, a
  debater keeping its solution, a judge merging proposals.
- ``draft``: a smaller model of the same family (the bundled 0.5B for the 1.5B).
- ``off``: one token per step.

The LM cache key does not include it, as it does not include concurrency: answers replayed from
one cache are the same whatever served them first; a run's params log ``serving.speculative``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Speculation = Literal["off", "ngram", "draft"]

# Chosen, not tuned (a lookup this long finds copied spans of code rather than chance matches of
# common tokens); their speed-up per role is measured with benchmarks/speculative_replay.py.
NGRAM_LOOKUP_TOKENS = 8
# Longest draft checked in one batch.
NGRAM_DRAFT_TOKENS = 16
DRAFT_MODEL_TOKENS = 8


def speculation_args(mode: Speculation, draft_model: Path | None = None) -> list[str]:
    """llama-server's command-line options for ``mode``."""
    if mode == "off":
        return []
    if mode == "ngram":
        return [
            "--spec-type", "ngram-simple",
            "--spec-ngram-simple-size-n", str(NGRAM_LOOKUP_TOKENS),
            "--spec-ngram-simple-size-m", str(NGRAM_DRAFT_TOKENS),
            "--spec-draft-n-max", str(NGRAM_DRAFT_TOKENS),
        ]
    if draft_model is None:
        raise ValueError("speculation 'draft' needs the draft model's file")
    # The draft model alone turns nothing on: llama-server's --spec-type defaults to none.
    return ["--spec-type", "draft-simple", "--spec-draft-model", str(draft_model),
            "--spec-draft-n-max", str(DRAFT_MODEL_TOKENS)]
