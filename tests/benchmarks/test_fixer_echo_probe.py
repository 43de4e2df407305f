"""The fixer-echo probe rewords one sentence of the fixer's instruction and nothing else."""

import dspy

from benchmarks import fixer_echo_probe as probe
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.fixer import Fixer


def test_the_probe_rewords_the_fixer_s_own_instruction_and_nothing_else():
    messages = CodeAdapter().format(dspy.Predict(Fixer).signature, demos=[],
                                    inputs={"prompt": "def f():\n", "code": "def f():\n    return 1\n",
                                            "review": "Verdict: reject."})
    changed = probe.reworded(messages)
    assert probe.KEPT not in changed[0]["content"] and probe.REWORDED in changed[0]["content"]
    assert changed[0]["content"].replace(probe.REWORDED, probe.KEPT) == messages[0]["content"]
    assert changed[1:] == messages[1:]
