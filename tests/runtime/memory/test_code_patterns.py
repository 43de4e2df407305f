"""code_pattern entries: only code that passed every visible example, described by the function
name and the prompt's first line, without docstrings."""

from critiquelab.runtime.memory.code_patterns import MAX_CODE_CHARS, code_pattern
from critiquelab.runtime.memory.reflection import VisibleOutcome

PROMPT = 'def count_vowels(s):\n    """Count the vowels in a string.\n    >>> count_vowels("abe")\n' \
         '    2\n    """\n'
CODE = PROMPT + "    # vowels only\n    return sum(c in 'aeiou' for c in s)\n"
PASSED = VisibleOutcome("PASS count_vowels('abe')", True)


def pattern(code=CODE, outcome=PASSED):
    return code_pattern(role="fixer", task_id="T/7", run_id="r1", prompt=PROMPT, entry_point="count_vowels",
                        code=code, outcome=outcome)


def test_passing_code_is_stored_under_its_description_as_the_solution_alone():
    entry = pattern()
    assert (entry.role, entry.type, entry.task_id, entry.run_id) == ("fixer", "code_pattern", "T/7", "r1")
    assert entry.tags == ["string"]
    assert entry.context["description"] == "count_vowels: Count the vowels in a string."
    assert entry.content == ("Solved 'count_vowels: Count the vowels in a string.' with:\n"
                             "def count_vowels(s):\n    return sum((c in 'aeiou' for c in s))")
    assert ">>>" not in entry.content


def test_failing_unknown_unparsable_or_long_code_is_not_stored():
    assert pattern(outcome=VisibleOutcome("FAIL", False)) is None
    assert pattern(outcome=VisibleOutcome("no runnable examples", None)) is None
    assert pattern(code="def count_vowels(s:\n    return 0\n") is None
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_CODE_CHARS // 10))
    assert pattern(code="def count_vowels(s):\n" + long_body + "    return 0\n") is None


def test_only_the_entry_point_and_what_it_uses_is_stored():
    # A small coder shown memories answers with earlier tasks' functions beside its own: storing
    # them would hand every later task all the earlier code.
    code = ("import re\nfrom typing import List\n\nVOWELS = 'aeiou'\n\n"
            "def is_vowel(c):\n    return c in VOWELS\n\n"
            "def sum_product(numbers: List[int]):\n    return (sum(numbers), 0)\n\n"
            "def count_vowels(s):\n    return sum(is_vowel(c) for c in s)\n\n"
            "def palindrome(s):\n    return s == s[::-1]\n")
    stored = pattern(code=code).content.split(" with:\n", 1)[1]
    assert stored == ("import re\nfrom typing import List\nVOWELS = 'aeiou'\n\n"
                      "def is_vowel(c):\n    return c in VOWELS\n\n"
                      "def count_vowels(s):\n    return sum((is_vowel(c) for c in s))")


def test_code_without_the_entry_point_is_not_stored():
    # The entry point misnamed and another task's function beside it: nothing to recall it by.
    code = PROMPT + "\ndef filter_by_substring(strings, substring):\n    return strings\n"
    assert pattern(code=code.replace("def count_vowels(s):", "def count_vowel(s):")) is None
