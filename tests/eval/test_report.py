"""critiquelab.eval.report renders every valid comparison: random per-problem tables (all passed, all failed,
mixed; 1–4 pipelines; 1–3 seeds; optional columns and pipeline metrics present or not) go
through the real statistics and write plots, HTML and Markdown without raising."""

import re
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from critiquelab.eval.report import ReportContext, add_memory_section, write_report
from critiquelab.eval.statistics import MIN_RESAMPLES, pairwise_tests, pipeline_summary
from critiquelab.pipelines.debate.outcome import DebateOutcome
from critiquelab.pipelines.threads import ThreadOutcome
from critiquelab.pipelines.vote.outcome import VoteOutcome

KINDS = ("plain", "revising", "debate", "vote")
# Each kind's own metrics, as compare gets them from the pipeline's registered outcome model.
FIGURES = {"revising": ThreadOutcome.table_metrics, "debate": DebateOutcome.table_metrics,
           "vote": VoteOutcome.table_metrics}


def _extras(draw, kind: str) -> dict:
    if kind == "revising":
        return {"extra.first_passed": draw(st.booleans()), "extra.changes_requested": draw(st.booleans())}
    if kind == "debate":
        first = draw(st.lists(st.booleans(), min_size=3, max_size=3))
        final = draw(st.lists(st.booleans(), min_size=3, max_size=3))
        consensus = draw(st.booleans())
        return {"extra.consensus": consensus, "extra.final_in_majority": consensus and draw(st.booleans()),
                "extra.agreement": draw(st.lists(st.sampled_from([1 / 3, 2 / 3, 1.0]), min_size=1,
                                                 max_size=3)),
                "extra.debaters_first_passed": first, "extra.debaters_final_passed": final}
    if kind == "vote":
        samples = draw(st.integers(0, 5))
        return {"extra.samples": samples, "extra.largest_group": draw(st.integers(0, samples))}
    return {}


@st.composite
def problem_frames(draw) -> tuple[pd.DataFrame, dict]:
    seeds = draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True))
    optional = {column: draw(st.booleans()) for column in ("lm_calls", "messages")}
    rows, figures = [], {}
    for index in range(draw(st.integers(1, 4))):
        outcome = draw(st.sampled_from(["all passed", "all failed", "mixed"]))
        kind = draw(st.sampled_from(KINDS))
        problems = draw(st.integers(1, 12))
        tokens = draw(st.integers(0, 3000))  # 0 tokens: no cost-normalised pass@1
        if kind in FIGURES:
            figures[f"pipeline-{index}"] = FIGURES[kind]
        for seed in seeds:
            for task in range(problems):
                passed = outcome == "all passed" or (outcome == "mixed" and draw(st.booleans()))
                row = {"task_id": f"T/{task}", "pipeline": f"pipeline-{index}", "seed": seed,
                       "status": "passed" if passed else "failed", "passed": passed,
                       "iterations": draw(st.integers(1, 4)), "prompt_tokens": tokens,
                       "completion_tokens": tokens // 2, "total_tokens": tokens + tokens // 2,
                       **_extras(draw, kind)}
                row.update({column: 3 for column, present in optional.items() if present})
                rows.append(row)
    return pd.DataFrame(rows), figures


@settings(max_examples=50, deadline=None)
@given(problem_frames(), st.integers(0, 2**32 - 1))
def test_write_report_renders_every_valid_table(drawn, seed):
    frame, figures = drawn
    table = pipeline_summary(frame, figures=figures)
    pairs = pairwise_tests(frame, seed=seed, n_resamples=MIN_RESAMPLES)
    assert (table["ci_low"].between(0, 1) & table["ci_high"].between(0, 1)).all()
    assert ((table["ci_low"] <= table["pass@1"]) & (table["pass@1"] <= table["ci_high"])).all()
    resampled = pairs[pairs["pairs"] >= 2] if len(pairs) else pairs
    if len(resampled):
        assert (resampled["ci_low"].between(-1, 1) & resampled["ci_high"].between(-1, 1)).all()
        low, high = resampled["ci_low"], resampled["ci_high"]
        assert ((low <= resampled["difference"]) & (resampled["difference"] <= high)).all()
    context = ReportContext("random table", [], seed, MIN_RESAMPLES, 0.95)
    with tempfile.TemporaryDirectory() as tmp:
        files, markdown = write_report(context, table, pairs, Path(tmp))
        assert all(path.stat().st_size > 0 for path in files.values())
        assert files["html"].read_text().count("data:image/png;base64,") == 2
    assert all(f"| {label} |" in markdown for label in table["pipeline"])
    assert not re.search(r"\bnan\b|<NA>", markdown, re.IGNORECASE)  # missing values are "–"


def test_plots_accept_bounds_a_rounding_error_past_the_estimate(tmp_path):
    """Error bars are non-negative by construction, whatever table they are given."""
    table = pd.DataFrame({
        "pipeline": ["all passed", "all failed", "no interval"], "seeds": [1, 1, 1], "problems": [20, 3, 1],
        "pass@1": [1.0, 0.0, 0.5], "ci_low": [0.84, 5.551115123125783e-17, float("nan")],
        "ci_high": [0.9999999999999999, 0.56, float("nan")], "tokens/problem": [100.0, 200.0, float("nan")],
    })
    files, markdown = write_report(ReportContext("edge", [], 0, MIN_RESAMPLES, 0.95), table,
                                   pd.DataFrame(), tmp_path)
    assert files["pass_plot"].stat().st_size > 0 and files["cost_plot"].stat().st_size > 0
    assert "| no interval | 1 | 1 | 0.5 | [–, –] |" in markdown


def _critic_rows(label, passed, first_passed):
    return [{"task_id": f"T/{i}", "pipeline": label, "seed": 0, "passed": p, "iterations": 2,
             "status": "passed" if p else "failed",
             "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
             "extra.first_passed": f, "extra.changes_requested": True}
            for i, (p, f) in enumerate(zip(passed, first_passed, strict=True))]


def test_metrics_that_do_not_apply_show_as_dash():
    """A critic that never saw a passing first draft has no harmful-revision rate: "–", not 0;
    a baseline has no critique metrics at all."""
    rows = _critic_rows("never-first", [True, True, False, False], [False] * 4)
    rows += _critic_rows("sometimes-first", [True, False, True, False], [True, True, False, False])
    rows += [{**row, "pipeline": "baseline", "extra.first_passed": None, "extra.changes_requested": None}
             for row in rows[:4]]
    figures = dict.fromkeys(("never-first", "sometimes-first", "baseline"), ThreadOutcome.table_metrics)
    table = pipeline_summary(pd.DataFrame(rows), figures=figures)
    by_label = table.set_index("pipeline")
    assert by_label.loc["never-first", "critique_success_rate"] == 0.5
    assert pd.isna(by_label.loc["never-first", "harmful_revision_rate"])
    assert by_label.loc["sometimes-first", "harmful_revision_rate"] == 0.5
    assert by_label.loc["baseline", ["first_pass@1", "critique_success_rate"]].isna().all()
    with tempfile.TemporaryDirectory() as tmp:
        _, markdown = write_report(ReportContext("dash", [], 0, MIN_RESAMPLES, 0.95), table,
                                   pd.DataFrame(), Path(tmp))
    behaviour = markdown.split("## Critique and consensus")[1].split("##")[0]
    assert "| never-first | 0 | 0.5 | – |" in behaviour  # first_pass@1, critique success, harmful
    assert "| sometimes-first | 0.5 | 0.5 | 0.5 |" in behaviour
    assert "baseline" not in behaviour


def test_every_report_column_is_named_once() -> None:
    # A repeated name makes pandas hand back a Series for that cell: the table prints garbage.
    from critiquelab.eval.report import BEHAVIOUR_COLUMNS, PAIR_COLUMNS, SUMMARY_COLUMNS

    for columns in (SUMMARY_COLUMNS, BEHAVIOUR_COLUMNS, PAIR_COLUMNS):
        assert len(set(columns)) == len(columns)


def test_memory_section_goes_into_report_html_escaped_before_the_method(tmp_path):
    table = pd.DataFrame({"pipeline": ["baseline", "baseline+memory"], "seeds": [1, 1], "problems": [4, 4],
                          "pass@1": [0.5, 0.75], "ci_low": [0.1, 0.3], "ci_high": [0.9, 0.95],
                          "tokens/problem": [100.0, 150.0]})
    files, _ = write_report(ReportContext("memory", [], 0, MIN_RESAMPLES, 0.95), table, pd.DataFrame(),
                            tmp_path)
    plot = tmp_path / "learning_curve.png"
    plot.write_bytes(files["pass_plot"].read_bytes())
    memory = pd.DataFrame([{"pipeline": "<b>mem</b>", "seed": 0, "reuse_rate": 0.75, "entries": 12.0,
                            "recall_precision_at_k": float("nan"), "not_shown": 1.0}])
    curves = pd.DataFrame([{"pipeline": "baseline+memory", "problems": 4, "block": 4,
                            "pass@1_first_block": 0.5, "pass@1_last_block": 0.75}])
    add_memory_section(files["html"], memory, curves, plot)
    page = files["html"].read_text()
    assert page.index("<h2>Memory</h2>") < page.index("<h2>Method</h2>")
    section = page.split("<h2>Memory</h2>")[1].split("</section>")[0]
    assert "&lt;b&gt;mem&lt;/b&gt;" in section and "<b>mem</b>" not in page  # names are escaped
    assert "<th>reuse_rate</th>" in section and "<td>0.75</td>" in section and "<td>12</td>" in section
    assert "recall_precision_at_k" not in section and "not_shown" not in section  # empty, unlisted
    assert "<td>baseline+memory</td>" in section and "pass@1_last_block" in section
    assert section.count("data:image/png;base64,") == 1
