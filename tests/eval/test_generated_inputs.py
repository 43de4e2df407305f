"""Generated inputs: which written calls are usable (literal arguments the prompt's signature
takes), and what candidates do on them in the real sandbox."""

from critiquelab.eval.generated_inputs import call_arguments, entry_signature, parse_inputs, run_on_inputs
from critiquelab.eval.visible_examples import visible_examples

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
FLEXIBLE = (
    "from typing import List\n\n\ndef helper(x):\n    return x\n\n\n"
    'def pick(items: List[int], k: int = 1, *rest, key=None, **options) -> int:\n    """Pick."""\n'
)
STRICT = 'def f(a, /, b, *, c, d=0):\n    """Positional-only a, keyword-only c."""\n'


def test_only_literal_calls_of_the_function_with_a_fitting_arity_are_kept():
    written = [
        "add(2, 3)", ">>> add(-1, 1)", "add(0, 0)  # zeros", "add(2, 3)",  # the repeat adds nothing
        "add(1)", "add(1, 2, 3)", "add(a=1, c=2)", "sub(1, 2)", "add(x, 1)", "add(*[1, 2])",
        "add(**{'a': 1})", "add(1, 2) == 3", "print(add(1, 2))", "add(len([1]), 2)", "add(1, 2",
        "add(1, 2)",  # the visible example's own input: known already
    ]
    found = parse_inputs(written, PROMPT, "add", limit=10, known=["1, 2"])
    assert found.args == ["2, 3", "-1, 1", "0, 0"]
    assert (found.written, found.dropped) == (16, 11)
    assert found.calls("add") == ["add(2, 3)", "add(-1, 1)", "add(0, 0)"]
    assert parse_inputs(written, PROMPT, "add", limit=2).args == ["2, 3", "-1, 1"]


def test_the_signature_decides_the_arity_defaults_varargs_and_keywords_included():
    flexible = entry_signature(FLEXIBLE, "pick")
    assert call_arguments("pick([1])", "pick", flexible) == "[1]"
    assert call_arguments("pick([1], 2, 3, 4, key='x', anything=None)", "pick", flexible) is not None
    assert call_arguments("pick(k=2)", "pick", flexible) is None  # items is required
    strict = entry_signature(STRICT, "f")
    assert call_arguments("f(1, 2, c=3)", "f", strict) == "1, 2, c=3"
    assert call_arguments("f(1, b=2, c=3, d=4)", "f", strict) is not None
    assert call_arguments("f(a=1, b=2, c=3)", "f", strict) is None  # a is positional-only
    assert call_arguments("f(1, 2, 3)", "f", strict) is None  # c is keyword-only
    # A prompt without the function (or that does not parse) checks no arity.
    assert entry_signature("def other():\n    pass\n", "f") is None and entry_signature("def (", "f") is None
    assert call_arguments("f(1, 2, 3, 4, 5)", "f", None) == "1, 2, 3, 4, 5"


def test_candidates_run_on_the_visible_and_the_generated_inputs():
    examples = visible_examples(PROMPT, "add")
    codes = [
        "def add(a, b):\n    return a + b",
        "def add(a, b):\n    return 3",
        "def add(a, b):\n    return a // (b - 2)",
        "def add(a, b):\n    while True:\n        pass",
        "def add(a, b) return",
        "def add(a, b):\n    return a + b",
    ]
    runs = run_on_inputs(PROMPT, "add", codes, examples, ["2, 2", "5, 0"], timeout_s=1.0)
    assert runs[0].outcomes == (("returned", "3"), ("returned", "4"), ("returned", "5"))
    assert runs[0].visible_passed == (True,) and runs[5] == runs[0]
    assert runs[1].outcomes == (("returned", "3"),) * 3 and runs[1].visible_passed == (True,)
    assert runs[2].outcomes[1] == ("raised", "ZeroDivisionError") and runs[2].visible_passed == (False,)
    assert [kind for kind, _ in runs[3].outcomes] == ["timed_out"] * 3  # each call bounded
    assert runs[4] is None  # does not compile
