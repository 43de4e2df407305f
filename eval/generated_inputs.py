"""Model-written inputs without expected values (S*'s distinguishing inputs), and what candidate
programs do on them.

An input is one call of the entry point with literal arguments, ``f([1, 2], k=3)``. One that does
not parse as such a call, or whose arguments the prompt's signature of the function cannot take
(too many or too few, an unknown keyword), is dropped and counted. The arguments are literals,
checked here, and evaluated again only inside the sandbox, so nothing a model wrote runs as
trusted code. No expected value is ever needed: candidates are told apart by their own outputs.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Sequence
from dataclasses import dataclass

from critiquelab.eval import python_ast
from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.execution import call_function
from critiquelab.eval.visible_examples import VisibleExample, run_examples

Outcome = tuple[str, str]
"""What one call did, as :meth:`critiquelab.eval.execution.CallOutcome.signature` gives it: ``("returned",
repr(value))``, ``("raised", error type)``, ``("timed_out", reason)`` or ``("failed", reason)``."""


@dataclass(frozen=True)
class GeneratedInputs:
    """The usable inputs of what an input writer wrote, and how many of its items were not."""

    args: list[str]  # argument sources of the kept inputs ("[1, 2], k=3"), in the order written
    written: int  # items the writer returned
    dropped: int  # items that are no literal call of the entry point or that it cannot take

    def calls(self, entry_point: str) -> list[str]:
        return [f"{entry_point}({args})" for args in self.args]


def entry_signature(prompt: str, entry_point: str) -> inspect.Signature | None:
    """The parameters of ``entry_point`` as the prompt declares them (names, kinds, which have
    defaults); None when the prompt does not parse or declares no such function."""
    try:
        tree = python_ast.parse(prompt)
    except (SyntaxError, ValueError):
        return None
    found = [node for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point]
    if not found:
        return None
    arguments = found[0].args
    parameter = inspect.Parameter
    params: list[inspect.Parameter] = []
    positional = arguments.posonlyargs + arguments.args
    first_default = len(positional) - len(arguments.defaults)
    for index, arg in enumerate(positional):
        only = index < len(arguments.posonlyargs)
        kind = parameter.POSITIONAL_ONLY if only else parameter.POSITIONAL_OR_KEYWORD
        # The default's value does not matter here, only that there is one.
        params.append(parameter(arg.arg, kind, default=None if index >= first_default else parameter.empty))
    if arguments.vararg:
        params.append(parameter(arguments.vararg.arg, parameter.VAR_POSITIONAL))
    for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        params.append(parameter(arg.arg, parameter.KEYWORD_ONLY,
                                default=parameter.empty if default is None else None))
    if arguments.kwarg:
        params.append(parameter(arguments.kwarg.arg, parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def _literal(node: ast.expr) -> bool:
    try:
        python_ast.literal_eval(ast.unparse(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def call_arguments(text: str, entry_point: str, signature: inspect.Signature | None) -> str | None:
    """The argument source of ``text`` when it is one call of ``entry_point`` with literal
    arguments that ``signature`` can take (any arity where the signature is unknown); else None."""
    source = text.strip().removeprefix(">>>").strip()
    try:
        node = python_ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point):
        return None
    if any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
        return None  # *xs / **kw: not literal arguments
    if not all(_literal(arg) for arg in node.args) or not all(_literal(kw.value) for kw in node.keywords):
        return None
    if signature is not None:
        try:
            signature.bind(*node.args, **{str(kw.arg): kw.value for kw in node.keywords})
        except TypeError:
            return None
    parts = [ast.unparse(arg) for arg in node.args]
    parts += [f"{kw.arg}={ast.unparse(kw.value)}" for kw in node.keywords]
    return ", ".join(parts)


def parse_inputs(
    written: Sequence[str], prompt: str, entry_point: str, *, limit: int, known: Sequence[str] = ()
) -> GeneratedInputs:
    """The usable inputs among ``written`` (one call per item), at most ``limit``, in the order
    written. An input repeating another or one of ``known`` (argument sources already run, e.g.
    the visible examples') is neither kept nor dropped: it adds nothing and is no error."""
    signature = entry_signature(prompt, entry_point)
    seen, kept, dropped = set(known), list[str](), 0
    for item in written:
        args = call_arguments(str(item), entry_point, signature)
        if args is None:
            dropped += 1
        elif args not in seen and len(kept) < limit:
            seen.add(args)
            kept.append(args)
    return GeneratedInputs(kept, len(written), dropped)


@dataclass(frozen=True)
class InputRun:
    """What one candidate did on the visible examples' inputs and then on the generated ones."""

    outcomes: tuple[Outcome, ...]  # per input: the visible examples' first, then the generated
    visible_passed: tuple[bool, ...]  # per visible example: it returned the expected value


def run_on_inputs(
    prompt: str, entry_point: str, codes: Sequence[str], examples: Sequence[VisibleExample],
    inputs: Sequence[str], *, timeout_s: float = 5.0,
) -> list[InputRun | None]:
    """Per candidate, its :class:`InputRun` on the visible ``examples`` and the generated
    ``inputs`` (argument sources): each distinct program runs once, ``timeout_s`` per call;
    None for a candidate that does not assemble."""
    by_code: dict[str, InputRun | None] = {}
    for code in codes:
        if code in by_code:
            continue
        program = assemble_program(prompt, code, entry_point)
        if not program.ok:
            by_code[code] = None
            continue
        runs = run_examples(program.source, entry_point, list(examples), timeout_s=timeout_s)
        generated = (call_function(program.source, entry_point, list(inputs), timeout_s=timeout_s)
                     if inputs else [])
        by_code[code] = InputRun(
            tuple(outcome.signature() for outcome in [*(run.outcome for run in runs), *generated]),
            tuple(run.passed for run in runs),
        )
    return [by_code[code] for code in codes]
