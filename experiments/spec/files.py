"""Reading a spec file (an experiment's or an optimisation's): YAML that refuses repeated keys.

Both spec kinds go through here, so a researcher sees the same kind of message whichever they got
wrong; any problem is a :class:`UserError`, never a traceback (a value the spec's model refuses is
:func:`critiquelab.core.config.explain`'s line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from critiquelab.core.errors import UserError
from critiquelab.core.lookup import check_lookup

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
