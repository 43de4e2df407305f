"""critiquelab.eval.python_ast: parsing that survives CPython 3.11's shared AST recursion counter."""

import ast

import pytest

from critiquelab.eval import python_ast


def test_parses_and_evaluates_like_the_ast_module():
    assert ast.dump(python_ast.parse("x = [1, 2]")) == ast.dump(ast.parse("x = [1, 2]"))
    assert isinstance(python_ast.parse("f(1)", mode="eval"), ast.Expression)
    assert python_ast.literal_eval("{'a': (1, 2.5)}") == {"a": (1, 2.5)}
    with pytest.raises(SyntaxError):
        python_ast.parse("def broken(:")
    with pytest.raises(ValueError):
        python_ast.literal_eval("open('x')")


def test_the_spurious_recursion_depth_error_is_retried_and_others_are_not(monkeypatch):
    real, calls = ast.parse, []

    def flaky(source, mode="exec", **kwargs):
        calls.append(source)
        if len(calls) == 1:  # what a collision with another thread raises (python/cpython#106905)
            raise SystemError("AST constructor recursion depth mismatch (before=36, after=37)")
        return real(source, mode=mode, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky)
    assert isinstance(python_ast.parse("x = 1"), ast.Module) and len(calls) == 2

    def broken(source, mode="exec", **kwargs):
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        python_ast.parse("x = 1")

