"""Property tests: whatever a researcher writes into a spec, parsing either gives a spec or one
UserError line — never another exception (a traceback)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.errors import UserError
from experiments.spec import parse_spec
from pipelines.registry import params_model

FIELDS = ["name", "dataset", "model", "pipelines", "seeds", "execution", "pool", "tracking",
          "prompts", "concurrency", "source", "limit", "task_ids", "format", "id", "temperature",
          "max_tokens", "timeout_s", "num_retries", "params", "label", "k", "debaters", "topology",
          "max_iterations", "uri", "persist", "fields", "challenge_tests", "rounds"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["baseline", "critic_loop", "debate", "vote", "self_refine", "humaneval", "mbpp",
                     "local", "openai/x", "ring", "../../x", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _one_line(error: UserError) -> bool:
    text = str(error)
    return bool(text.strip()) and "\n" not in text.strip()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), values, max_size=6))
@example({"name": "0", "dataset": {"\n": None}})  # found by this test: a key holding a line break
def test_any_mapping_is_a_spec_or_one_line(data):
    try:
        parse_spec(data, "spec.yaml")
    except UserError as error:
        assert _one_line(error), str(error)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(FIELDS), values, max_size=4), max_size=3), values)
def test_any_pipeline_list_is_checked_up_front(pipelines, seeds):
    try:
        spec = parse_spec({"name": "x", "pipelines": pipelines, "seeds": seeds}, "spec.yaml")
    except UserError as error:
        assert _one_line(error), str(error)
    else:  # accepted: every pipeline's params are complete and typed: its own model
        assert all(type(p.params) is params_model(p.name) for p in spec.pipelines)
        assert all(0 <= seed <= 2**31 - 1 for seed in spec.seeds)
