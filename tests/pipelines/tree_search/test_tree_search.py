"""tree_search with a scripted LM (real HTTP, adapters, sandbox and pool): expansion, execution
feedback in the repairer's prompt, evaluation, reflection, backpropagation, stops, the tree."""

import dspy
import pytest
from pydantic import ValidationError
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.core.errors import UserError
from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.pipelines.tree_search.pipeline import TreeSearch, TreeSearchParams
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = ('def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n'
          '    >>> add(2, 2)\n    4\n    """\n')
SIGNATURE = "def add(a: int, b: int) -> int:\n"
GOOD = SIGNATURE + "    return a + b"
HALF = SIGNATURE + "    return 3"  # passes add(1, 2) only
BAD = SIGNATURE + "    return a - b"
RAISES = SIGNATURE + "    values = [a, b]\n    return values[a + b]"


def _sampled(body):
    return body.get("temperature", 0) > 0


def _run(scripts, **params):
    pool = MessagePool()
    meter = UsageMeter()
    with FakeOpenAIServer(role_responder(scripts, with_body=True), pass_body=True) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0, seed=7)
        pipeline = create_pipeline("tree_search", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool), metering(meter):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), list(fake.requests), meter


def _nodes(history):
    return [m for m in history if m.intent == Intent.PROPOSAL]


def _text_of(request):
    return "\n".join(str(m.get("content", "")) for m in request["messages"])


def test_search_repairs_the_best_node_with_its_real_feedback_and_reflection():
    def coder(text, body):  # greedy: BAD; samples (node 2 = seed 7002, node 3): HALF, RAISES
        if not _sampled(body):
            return {"code": BAD}
        return {"code": HALF if body["seed"] == 7002 else RAISES}

    scripts = {
        "coder": coder,
        "repairer": lambda text, body: {"repaired_code": GOOD if body["seed"] == 7005 else HALF},
        "path_reflector": lambda text, body: {"reflection": "Return the sum, not a constant."},
    }
    prediction, history, requests, _ = _run(scripts, n=3, max_expansions=4)

    assert prediction.code == GOOD
    assert prediction.outcome.stop_reason == "solved"
    assert prediction.outcome.expansions == 2 and prediction.outcome.nodes == 6
    assert prediction.outcome.reflections == 1 and prediction.outcome.visible_solved
    assert prediction.outcome.codes_to_score["nodes_passed"] == [BAD, HALF, RAISES, HALF, GOOD, HALF]

    # The reflection is about the best failing child of the first expansion (HALF, node 2) ...
    reflection = next(m for m in history if m.intent == Intent.REFLECTION)
    assert reflection.metadata["node"] == 2
    reflect_request = next(r for r in requests if "`reflection`" in str(r["messages"][0]["content"]))
    assert "return 3" in _text_of(reflect_request) and "expected: 4" in _text_of(reflect_request)

    # ... UCT then selects node 2, and the repairer sees its real feedback and the reflection.
    repairs = [r for r in requests if "`repaired_code`" in str(r["messages"][0]["content"])]
    assert len(repairs) == 3
    repair_text = _text_of(repairs[0])
    assert "return 3" in repair_text
    assert "1 of 2 visible examples pass." in repair_text
    assert "Example: add(2, 2)\n  expected: 4\n  got: 3" in repair_text
    assert "- Return the sum, not a constant." in repair_text
    assert len({r["seed"] for r in repairs}) == 3  # independent samples

    # Every node is a pool message naming its parent node and the parent's message.
    nodes = _nodes(history)
    assignment = history[0]
    by_node = {m.metadata["node"]: m for m in nodes}
    assert [m.metadata["parent_node"] for m in nodes] == [0, 0, 0, 2, 2, 2]
    for message in nodes:
        parent = message.metadata["parent_node"]
        parent_id = assignment.id if parent == 0 else by_node[parent].id
        assert message.metadata["parent_id"] == parent_id == message.in_reply_to
    assert [m.metadata["trace"]["role"] for m in nodes] == ["coder"] * 3 + ["repairer"] * 3

    # The raising sample's feedback names the exception and the line it came from.
    feedback = {m.metadata["node"]: m for m in history if m.intent == Intent.EXECUTION_FEEDBACK}
    assert "IndexError" in feedback[3].content and "raised at: return values[a + b]" in feedback[3].content
    assert [feedback[i].metadata["pass_rate"] for i in range(1, 7)] == [0.0, 0.5, 0.0, 0.5, 1.0, 0.5]

    # Backpropagation: the verdict's tree has the visits and mean values MCTS implies.
    verdict = history[-1]
    assert verdict.intent == Intent.VERDICT and verdict.metadata["chosen"] == 5
    tree = {row["node"]: row for row in verdict.metadata["tree"]}
    assert tree[0]["visits"] == 6 and tree[2]["visits"] == 4
    assert tree[2]["value"] == pytest.approx((0.5 + 0.5 + 1.0 + 0.5) / 4)
    assert tree[0]["value"] == pytest.approx((0 + 0.5 + 0 + 0.5 + 1.0 + 0.5) / 6)


def test_greedy_answer_that_solves_the_examples_costs_one_call():
    prediction, _, requests, _ = _run({"coder": lambda t, b: {"code": GOOD}}, n=3)
    assert len(requests) == 1 and not _sampled(requests[0])
    assert prediction.code == GOOD and prediction.outcome.nodes == 1
    assert prediction.outcome.stop_reason == "solved"


def test_lm_value_mixes_with_the_pass_rate_through_lambda():
    scores = {BAD: 9, HALF: 2}

    def scorer(text, body):
        code = HALF if "return 3" in text else BAD
        return {"assessment": "looks right", "score": str(scores[code])}

    scripts = {
        "coder": lambda t, b: {"code": HALF if _sampled(b) else BAD},
        "scorer": scorer,
    }
    prediction, history, _, _ = _run(scripts, n=2, max_expansions=1, reflect=False, **{"lambda": 0.5})
    values = [m for m in history if m.intent == Intent.VALUE]
    assert [m.metadata["lm_score"] for m in values] == [0.9, 0.2]
    tree = {row["node"]: row for row in history[-1].metadata["tree"]}
    assert tree[1]["score"] == pytest.approx(0.5 * 0.9 + 0.5 * 0.0)
    assert tree[2]["score"] == pytest.approx(0.5 * 0.2 + 0.5 * 0.5)
    # At λ = 0.5 the value role's confidence in BAD (0.45) outweighs HALF's half pass rate (0.35).
    assert prediction.code == BAD


def test_consistency_evaluation_asks_no_value_role_and_rewards_agreeing_siblings():
    def coder(text, body):  # node 1 greedy BAD; samples 2, 3 BAD, HALF
        return {"code": HALF if body.get("seed") == 7003 else BAD}

    _, history, requests, _ = _run({"coder": coder}, n=3, max_expansions=1, reflect=False,
                                   evaluation="consistency", value_weight=0.5)
    assert not [m for m in history if m.intent == Intent.VALUE]
    assert len(requests) == 3
    tree = {row["node"]: row for row in history[-1].metadata["tree"]}
    assert tree[1]["score"] == tree[2]["score"] == pytest.approx(0.5 * 2 / 3)
    assert tree[3]["score"] == pytest.approx(0.5 * 1 / 3 + 0.5 * 0.5)


def _never_solves():
    return {
        "coder": lambda t, b: {"code": BAD},
        "repairer": lambda t, b: {"repaired_code": HALF},
        "path_reflector": lambda t, b: {"reflection": "Add."},
    }


def test_token_budget_stops_the_search_after_the_expansion_that_spends_it():
    _, _, _, one = _run(_never_solves(), n=2, max_expansions=1, greedy_first=False, reflect=False)
    per_expansion = one.total().prompt_tokens + one.total().completion_tokens
    prediction, _, _, meter = _run(_never_solves(), n=2, max_expansions=10, greedy_first=False,
                                   reflect=False, token_budget=1.5 * per_expansion)
    assert prediction.outcome.stop_reason == "token_budget"
    assert prediction.outcome.expansions == 2 and meter.total().calls == 4


def test_exhaustive_search_runs_every_expansion_and_answers_with_the_best_node():
    prediction, history, _, meter = _run(_never_solves(), n=2, max_expansions=3, stop="exhaust")
    assert prediction.outcome.stop_reason == "max_expansions"
    assert prediction.outcome.expansions == 3 and prediction.outcome.nodes == 6
    # a reflection after each expansion but the last (no repair would read that one)
    assert prediction.outcome.reflections == 2 and prediction.outcome.max_depth == 2
    # node 1 (older of two equal roots) is repaired first; its subtree's mean (1/3 over 3 visits)
    # then loses to node 2's exploration term (1 visit), so node 2 is expanded next.
    assert [m.metadata["parent_node"] for m in _nodes(history)] == [0, 0, 1, 1, 2, 2]
    assert meter.by_role["coder"].calls == 2 and meter.by_role["repairer"].calls == 4
    assert meter.by_role["path_reflector"].calls == 2
    assert prediction.code == HALF and history[-1].metadata["chosen"] == 3  # first node at 0.5


def test_repairer_reads_the_last_reflections_each_cut_short():
    scripts = _never_solves()
    count = iter(range(100))
    scripts["path_reflector"] = lambda t, b: {"reflection": f"Lesson {next(count)}. " + "Again. " * 200}
    _, _, requests, _ = _run(scripts, n=1, max_expansions=6, stop="exhaust", greedy_first=False)
    last_repair = _text_of([r for r in requests if "`repaired_code`" in str(r["messages"][0]["content"])][-1])
    assert "Lesson 1." not in last_repair
    assert all(f"- Lesson {i}. " in last_repair for i in (2, 3, 4))  # the last three before it
    cut = ("Lesson 2. " + "Again. " * 200)[:600]  # 600 characters each
    assert f"- {cut}\n- Lesson 3." in last_repair


def test_parallel_children_give_the_same_search():
    sequential = _run(_never_solves(), n=3, max_expansions=2, stop="exhaust")
    parallel = _run(_never_solves(), n=3, max_expansions=2, stop="exhaust", parallel_agents=3)
    for run in (sequential, parallel):
        assert run[0].outcome.nodes == 6
    assert sequential[0].outcome.codes_to_score == parallel[0].outcome.codes_to_score
    def tree(run):  # message ids are fresh per run
        return [dict(row, message_id="") for row in run[1][-1].metadata["tree"]]

    assert tree(sequential) == tree(parallel)
    assert sorted(r.get("seed") for r in sequential[2]) == sorted(r.get("seed") for r in parallel[2])


def test_direct_construction_checks_params_and_refuses_an_unresolved_budget_label():
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        TreeSearchParams(n=0)
    with pytest.raises(UserError, match="only an experiment run resolves it"):
        TreeSearch(TreeSearchParams(token_budget_from="baseline"))
    assert TreeSearch(TreeSearchParams.model_validate({"lambda": 0.25})).params.value_weight == 0.25
