"""Reading a spec file (an experiment's or an optimisation's): YAML that refuses repeated keys,
and pydantic's validation errors as one line naming the file and the field.

Both spec kinds go through here, so a researcher sees the same kind of message whichever they got
wrong; any problem is a :class:`UserError`, never a traceback.
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core.errors import UserError
from core.lookup import check_lookup
from core.yaml_numbers import NUMBER_TYPE_ERRORS, number_as_text_hint


def _path_part(part: Any) -> str:
    """A field path element as written, or quoted when it is not a plain name (a key holding a
    line break or spaces must neither split the line nor read as two fields)."""
    text = str(part)
    return text if text.replace("_", "a").replace("-", "a").isalnum() else repr(text)


# Type errors of strict fields, as a spec's reader would say them.
_EXPECTED = {
    "int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
    "string_type": "a string", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "finite_number": "a finite number",
}


# Range errors as a pipeline param's read (pipelines.params.explain): "must be >= 1 (got 0)".
_BOUNDS = {
    "greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="), "less_than": ("lt", "<"),
}


def _short_repr(value: Any) -> str:
    shortened = reprlib.Repr()
    shortened.maxlevel, shortened.maxstring, shortened.maxother = 2, 60, 60
    shortened.maxlist = shortened.maxtuple = shortened.maxdict = shortened.maxset = 4
    return shortened.repr(value)


def _as_written(value: Any) -> str:
    """A value as YAML writes it (strings quoted, so '0.5' reads as text), shortened: a message is
    one line, whatever was written (a list that YAML aliases expand to millions of items too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else _short_repr(value)


def format_validation_error(error: ValidationError, source: str) -> str:
    """One line: the first problem, with its field path, plus a count of the others. An unknown
    field comes first: a misspelled key also leaves its field missing, and the key is what to fix."""
    problems = error.errors()
    first = next((p for p in problems if p["type"] == "extra_forbidden"), problems[0])
    where = ".".join(_path_part(part) for part in first["loc"]) or "(top level)"
    message = " ".join(str(first["msg"]).split())  # a value's own line breaks must not split it
    if first["type"] == "extra_forbidden":
        message = "unknown field (check its spelling)"
    elif first["type"] in _EXPECTED:  # strict: a value of another type is refused, never converted
        message = f"expected {_EXPECTED[first['type']]}, got {_as_written(first.get('input'))}"
        if first["type"] in NUMBER_TYPE_ERRORS:
            message += number_as_text_hint(first.get("input"))
    elif first["type"] == "string_too_short" and first["ctx"].get("min_length") == 1:
        message = "must not be empty (leave the field out for its default)"
    elif first["type"] in _BOUNDS:
        key, symbol = _BOUNDS[first["type"]]
        message = f"must be {symbol} {first['ctx'][key]} (got {_as_written(first.get('input'))})"
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{source}: {where}: {message}{suffix}"


MAX_VALUES = 100_000  # far above any spec; an alias "billion laughs" expands far beyond it
MAX_INT_CHARS = 100  # far above any count, seed or budget a spec holds


def _expanded_values(root: yaml.Node) -> int:
    """How many values the document holds once every alias is expanded (counted per node once,
    so the count itself costs no expansion); a node that contains itself is refused."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]  # iterative: a deep document is no recursion
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_VALUES + 1)
            continue
        if id(node) in open_nodes:
            raise yaml.composer.ComposerError(None, None, "an alias refers to the value it is in",
                                              node.start_mark)
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (YAML's "last one wins" would
    silently drop a setting the researcher wrote) and a document whose aliases expand to more
    than :data:`MAX_VALUES` values (every later step — validation, logging the config — would
    walk the expansion)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        # Bounded here rather than by Python's process-wide int_max_str_digits, which any code in
        # the process may lift (and converting a huge decimal string is quadratic).
        if len(str(node.value)) > MAX_INT_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of more than {MAX_INT_CHARS} characters", node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None and _expanded_values(node) > MAX_VALUES:
            raise yaml.composer.ComposerError(
                None, None, f"its aliases expand to more than {MAX_VALUES:,} values", None)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: no setting has such a name
                raise yaml.constructor.ConstructorError(
                    None, None, "a key that is a list or mapping (keys are names)", key_node.start_mark)
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# SafeLoader maps tags to functions, not method names: the override must be registered.
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def load_yaml(path: Path) -> Any:
    """Read a YAML file; a missing or unreadable file, text that is not UTF-8, malformed YAML or a
    repeated key is one clear UserError line."""
    check_lookup(path, str(path))
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a spec file")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if not path.is_file():  # a FIFO or a device would block or never end
        raise UserError(f"{path}: not a regular file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); save the spec as UTF-8") from exc
    except OSError as exc:
        raise UserError(f"{path}: cannot be read: {exc.strerror}") from exc
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except RecursionError:
        raise UserError(f"{path}: malformed YAML: nested too deeply") from None
    except ValueError as exc:  # a constructor's own, e.g. a date that does not exist
        problem = " ".join(str(exc).split(":")[0].split())[:200]
        raise UserError(f"{path}: malformed YAML: {problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}") from exc
    except (IndexError, KeyError, AttributeError, TypeError) as exc:
        # PyYAML's constructors fail this way on a tag they cannot apply (`!!int ''`, `!!bool
        # foo`, `!!set` on a list): the spec's mistake, not ours.
        raise UserError(f"{path}: malformed YAML: a tagged value that cannot be read "
                        f"({type(exc).__name__}: {str(exc)[:100]})") from None
