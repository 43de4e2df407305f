"""One bad value of each kind (wrong type, out of range, bad choice, unknown field) for every
registered pipeline, with the one line that must name the field and what is allowed."""

from __future__ import annotations

# (pipeline, params, the message after "pipeline 'NAME': ")
BAD_PARAMS: list[tuple[str, dict, str]] = [
    ("baseline", {"k": 1}, "params.k: unknown field; allowed: none, this pipeline takes no params"),
    ("critic_loop", {"max_iterations": 0}, "params.max_iterations: must be >= 1 (got 0)"),
    ("critic_loop", {"execution_feedback": "yes"},
     "params.execution_feedback: expected true or false, got 'yes'"),
    ("critic_loop", {"meta_critic": 1}, "params.meta_critic: expected true or false, got 1"),
    ("critic_loop", {"feedback_timeout_s": 0}, "params.feedback_timeout_s: must be > 0.0 (got 0)"),
    ("critic_loop", {"max_iteration": 2},
     "params.max_iteration: unknown field; allowed: max_iterations, execution_feedback, meta_critic, "
     "feedback_timeout_s, critics, parallel_agents"),
    ("critic_loop", {"critics": ["correctness", "speed"]},
     "params.critics.1: must be one of correctness, edge_cases, performance, readability, security "
     "(got 'speed')"),
    ("critic_loop", {"critics": "correctness"}, "params.critics: expected a list, got 'correctness'"),
    ("critic_loop", {"critics": ["edge_cases", "edge_cases"]},
     "params.critics: each kind at most once (got ['edge_cases', 'edge_cases'])"),
    ("critic_loop", {"parallel_agents": 0}, "params.parallel_agents: must be >= 1 (got 0)"),
    ("self_refine", {"max_iterations": 0}, "params.max_iterations: must be >= 1 (got 0)"),
    ("self_refine", {"max_iterations": 2.5}, "params.max_iterations: expected an integer, got 2.5"),
    ("self_refine", {"rounds": 2}, "params.rounds: unknown field; allowed: max_iterations"),
    ("debate", {"debaters": "three"}, "params.debaters: expected an integer, got 'three'"),
    ("debate", {"debaters": "3"}, "params.debaters: expected an integer, got '3'"),
    ("debate", {"debaters": 1}, "params.debaters: must be >= 2 (got 1)"),
    ("debate", {"rounds": -1}, "params.rounds: must be >= 0 (got -1)"),
    ("debate", {"topology": "mesh"}, "params.topology: must be one of full, ring, star (got 'mesh')"),
    ("debate", {"temperature": 3}, "params.temperature: must be <= 2.0 (got 3)"),
    ("debate", {"judges": 2},
     "params.judges: unknown field; allowed: debaters, rounds, topology, temperature, parallel_agents"),
    ("debate", {"parallel_agents": 0}, "params.parallel_agents: must be >= 1 (got 0)"),
    ("debate", {"parallel_agents": 17}, "params.parallel_agents: must be <= 16 (got 17)"),
    ("vote", {"k": 0}, "params.k: must be >= 1 (got 0)"),
    ("vote", {"temperature": "hot"}, "params.temperature: expected a number, got 'hot'"),
    ("vote", {"token_budget": -1}, "params.token_budget: must be >= 0.0 (got -1)"),
    ("vote", {"token_budget_from": 3}, "params.token_budget_from: expected a string, got 3"),
    ("vote", {"token_budget": 100, "token_budget_from": "baseline"},
     "params: give token_budget or token_budget_from, not both"),
    ("vote", {"samples": 3},
     "params.samples: unknown field; allowed: token_budget, token_budget_from, k, temperature, max_samples, "
     "tests, n_tests, parallel_agents"),
    ("vote", {"tests": "hidden"}, "params.tests: must be one of visible, generated, both (got 'hidden')"),
    ("vote", {"n_tests": 0}, "params.n_tests: must be >= 1 (got 0)"),
    ("vote", {"parallel_agents": 2.0}, "params.parallel_agents: expected an integer, got 2.0"),
    ("sop", {"max_iterations": 0}, "params.max_iterations: must be >= 1 (got 0)"),
    ("sop", {"n_tests": 51}, "params.n_tests: must be <= 50 (got 51)"),
    ("sop", {"max_handoff_retries": -1}, "params.max_handoff_retries: must be >= 0 (got -1)"),
    ("sop", {"reviewer": "yes"}, "params.reviewer: expected true or false, got 'yes'"),
    ("sop", {"qa": True},
     "params.qa: unknown field; allowed: max_iterations, n_tests, max_handoff_retries, reviewer, "
     "feedback_timeout_s"),
    ("role_play", {"max_turns": 0}, "params.max_turns: must be >= 1 (got 0)"),
    ("role_play", {"max_turns": 21}, "params.max_turns: must be <= 20 (got 21)"),
    ("role_play", {"execution_feedback": 1}, "params.execution_feedback: expected true or false, got 1"),
    ("role_play", {"turns": 3},
     "params.turns: unknown field; allowed: max_turns, execution_feedback, feedback_timeout_s"),
]
