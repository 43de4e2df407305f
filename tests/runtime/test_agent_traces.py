"""Agents' role calls join DSPy's trace turn by turn, whatever order they were made in."""

import dspy

from critiquelab.runtime.agent_traces import AgentTraces


def test_agents_calls_join_turn_by_turn_in_agent_order():
    with dspy.context(trace=["before"]):
        traces = AgentTraces(3)
        for agent, call in [(2, "c1"), (0, "a1"), (2, "c2"), (0, "a2"), (0, "a3"), (1, "b1")]:
            with traces.recording(agent):
                dspy.settings.trace.append(call)
        assert dspy.settings.trace == ["before"]  # nothing joins before the conversation ends
        traces.join()
        assert dspy.settings.trace == ["before", "a1", "b1", "c1", "a2", "c2", "a3"]


def test_nothing_is_recorded_when_tracing_is_off():
    with dspy.context(trace=None):
        traces = AgentTraces(1)
        with traces.recording(0):
            assert dspy.settings.trace is None
        traces.join()
