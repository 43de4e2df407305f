"""The topology measurement's debates (experiments/debate_topology.yaml): at equal debaters and
rounds each topology lets every debater read exactly its neighbourhood, and sparser graphs send
shorter requests for the same number of messages."""

import re

import pytest
from test_debate_and_vote import GOOD, _run

from critiquelab.pipelines.debate.agents import neighbours
from critiquelab.runtime.pool.messages import Intent

SCRIPTS = {
    "coder": lambda text, body: {"code": GOOD},
    "debater": lambda text, body: {"argument": "it adds", "revised_code": GOOD},
    "judge": lambda text, body: {"choice": "1", "rationale": "fine", "merged_code": ""},
}
READS = {  # debater -> the debaters (0-based) whose solutions it reads, with 4 debaters
    "full": {0: [1, 2, 3], 1: [0, 2, 3], 2: [0, 1, 3], 3: [0, 1, 2]},
    "ring": {0: [1, 3], 1: [0, 2], 2: [1, 3], 3: [0, 2]},
    "star": {0: [1, 2, 3], 1: [0], 2: [0], 3: [0]},
}


@pytest.mark.parametrize("topology", ["full", "ring", "star"])
def test_each_debater_reads_exactly_its_neighbourhood(topology):
    assert {i: neighbours(i, 4, topology) for i in range(4)} == READS[topology]
    _, history, _, _ = _run("debate", SCRIPTS, debaters=4, rounds=1, topology=topology)
    for message in (m for m in history if m.intent == Intent.ARGUMENT):
        read = re.findall(r"Debater (\d+) says", message.metadata["trace"]["inputs"]["others"])
        assert [int(n) - 1 for n in read] == READS[topology][message.metadata["debater"]]


def test_sparser_topologies_cost_fewer_prompt_tokens_for_the_same_messages():
    runs = {t: _run("debate", SCRIPTS, debaters=4, rounds=2, topology=t) for t in ("full", "ring", "star")}
    messages = {t: len(history) for t, (_, history, _, _) in runs.items()}
    prompt = {t: meter.total().prompt_tokens for t, (_, _, _, meter) in runs.items()}
    assert messages["full"] == messages["ring"] == messages["star"]
    assert prompt["full"] > prompt["ring"] and prompt["full"] > prompt["star"]
