"""Mutations of the prompt's examples: one argument changed at a time, by type, in turn over the
arguments and the examples, never repeating an example or another mutation."""

from critiquelab.eval.mutated_inputs import mutated_calls


def test_each_argument_is_mutated_in_turn_by_its_type():
    calls = mutated_calls(["[3, 1, 2], 'ab', True"], "f", 30)
    assert calls[:3] == ["f([], 'ab', True)", "f([3, 1, 2], '', True)", "f([3, 1, 2], 'ab', False)"]
    assert "f([3], 'ab', True)" in calls and "f([1, 2, 3], 'ab', True)" in calls  # cut, sorted
    assert "f([3, 1, 2], 'ba', True)" in calls and "f([3, 1, 2], 'AB', True)" in calls
    assert len(calls) == len(set(calls)) == 5 + 5 + 1  # list, str, bool


def test_examples_take_turns_and_none_is_repeated_or_an_example():
    calls = mutated_calls(["1", "0", "x=2"], "g", 6)
    # 1 -> 0 and 0 -> 1 are the other example; 1 - 1 and -0 are 0 again.
    assert calls == ["g(x=0)", "g(2)", "g(x=3)", "g(-1)", "g(x=1)", "g(x=-2)"]
    assert mutated_calls(["1"], "g", 0) == [] and mutated_calls(["not literal(1)"], "g", 5) == []
