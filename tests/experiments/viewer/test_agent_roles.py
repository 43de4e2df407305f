"""The viewer names what each agent's calls were by its pipeline's declared roles."""

from critiquelab.experiments.viewer.problem_page import agent_cards, declared_roles
from critiquelab.runtime.pool.messages import Message


def _message(sender, role):
    return Message(task_id="T", thread_id="t", intent="proposal", sender=sender, content="", run_id="r",
                   metadata={"trace": {"role": role, "usage": {"calls": 1}}})


def test_an_agent_card_names_the_declared_roles_its_calls_were():
    debate = [_message("debater0@t", "coder"), _message("debater0@t", "debater"),
              _message("judge@t", "judge")]
    cards = agent_cards(debate, declared_roles("debate"))
    assert "<b>debater0</b><br>roles: coder, debater<br>" in cards
    assert "<b>judge</b><br>role: judge<br>" in cards
    panel = agent_cards([_message("critic_edge_cases@t", "critic_edge_cases")], declared_roles("critic_loop"))
    assert "role: critic<br>" in panel  # a panel critic's call is the critic role


def test_a_pipeline_not_installed_here_shows_the_call_names():
    assert declared_roles("no_such_pipeline") is None and declared_roles("") is None
    assert "role: critic_edge_cases<br>" in agent_cards([_message("c@t", "critic_edge_cases")], None)
