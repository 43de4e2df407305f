"""Plain-data codec and length-prefixed framing shared by both sides of the sandbox boundary.

Why a codec of our own: the only thing a candidate may hand the trusted checker is *data*.
``pickle`` would run candidate-chosen code in the checker and ``marshal`` is not safe against
crafted input; plain JSON loses the difference between lists, tuples and sets. So values are
JSON with a small tagged form for the types JSON lacks, and the *decoder* (which runs in the
trusted process) accepts exact plain types only and rebuilds fresh builtin objects. Whatever the
candidate sends, the checker ends up holding ints, floats, strings, bytes, lists, tuples, dicts,
sets, frozensets, complex, bools and None, whose ``==`` it cannot influence.

This module must stay standard-library only: it is also loaded by the sandbox server, which runs
under the system interpreter without the project's virtualenv.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import Any

MAX_DEPTH = 100
_SMALL_INT = 1 << 62
# The encoder writes every integer past _SMALL_INT in hex, so a decimal integer this long is never
# ours. Bounded here, not left to Python's process-wide int_max_str_digits, which any code in the
# process may lift.
_MAX_DECIMAL_DIGITS = 20
_HEADER = struct.Struct(">I")


class CodecError(ValueError):
    """The value is not plain data, is too deep or too large, or the bytes are malformed."""


class TooLarge(CodecError):
    """The serialised value exceeds the size limit."""


# --------------------------------------------------------------------------- encoding


def _enc(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError(f"nested deeper than {MAX_DEPTH}")
    kind = type(value)  # exact type: subclasses (always-equal ints, str subclasses…) are refused
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -_SMALL_INT < value < _SMALL_INT else ["i", format(value, "x")]
    if kind is float:
        return value
    depth += 1
    if kind is list:
        return ["l", *(_enc(v, depth) for v in value)]
    if kind is tuple:
        return ["t", *(_enc(v, depth) for v in value)]
    if kind is dict:
        out: list[Any] = ["d"]
        for k, v in value.items():
            out.append(_enc(k, depth))
            out.append(_enc(v, depth))
        return out
    if kind is set:
        return ["s", *(_enc(v, depth) for v in value)]
    if kind is frozenset:
        return ["f", *(_enc(v, depth) for v in value)]
    if kind is bytes:
        return ["b", base64.b64encode(value).decode("ascii")]
    if kind is complex:
        return ["c", value.real, value.imag]
    raise CodecError(f"unsupported type {kind.__module__}.{kind.__qualname__}")


def encode(value: Any, max_bytes: int) -> bytes:
    """Serialise plain data; raise :class:`CodecError` for anything else or if too large."""
    try:
        text = json.dumps(_enc(value, 0), ensure_ascii=True, separators=(",", ":"))
    except RecursionError as exc:  # a self-referential container
        raise CodecError("nested too deeply") from exc
    if len(text) > max_bytes:
        raise TooLarge(f"serialised value is {len(text)} bytes, limit {max_bytes}")
    return text.encode("ascii")


# --------------------------------------------------------------------------- decoding


def _dec(node: Any, depth: int) -> Any:
    if depth > MAX_DEPTH + 1:
        raise CodecError("nested too deeply")
    kind = type(node)
    if node is None or kind is bool or kind is str or kind is int or kind is float:
        return node
    if kind is not list or not node or type(node[0]) is not str:
        raise CodecError(f"malformed node of type {kind.__name__}")
    tag, rest = node[0], node[1:]
    depth += 1
    try:
        if tag == "l":
            return [_dec(v, depth) for v in rest]
        if tag == "t":
            return tuple(_dec(v, depth) for v in rest)
        if tag == "s":
            return {_dec(v, depth) for v in rest}
        if tag == "f":
            return frozenset(_dec(v, depth) for v in rest)
        if tag == "d":
            if len(rest) % 2:
                raise CodecError("odd dict item list")
            it = iter(rest)
            return {_dec(k, depth): _dec(v, depth) for k, v in zip(it, it, strict=True)}
        if tag == "i" and len(rest) == 1 and type(rest[0]) is str:
            return int(rest[0], 16)
        if tag == "b" and len(rest) == 1 and type(rest[0]) is str:
            return base64.b64decode(rest[0].encode("ascii"), validate=True)
        if tag == "c" and len(rest) == 2 and all(type(x) in (int, float) for x in rest):
            return complex(rest[0], rest[1])
    except CodecError:
        raise
    except (TypeError, ValueError) as exc:  # unhashable key/element, bad hex or base64
        raise CodecError(f"malformed {tag!r} node: {exc}") from exc
    raise CodecError(f"unknown tag {tag!r}")


def decode_tree(tree: Any) -> Any:
    """Rebuild plain data from an already JSON-parsed tagged tree (strict)."""
    return _dec(tree, 0)


def _decimal_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DECIMAL_DIGITS:
        raise CodecError(f"a decimal integer of {len(text)} characters")
    return int(text)


def load_json(data: bytes) -> Any:
    """``json.loads`` with decimal integers bounded (raises ValueError or RecursionError)."""
    return json.loads(data, parse_int=_decimal_int)


def decode(data: bytes) -> Any:
    """Parse bytes produced by :func:`encode`; strict, raises :class:`CodecError`."""
    try:
        tree = load_json(data)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not valid JSON: {exc}") from exc
    return _dec(tree, 0)


# --------------------------------------------------------------------------- framing


class FrameError(EOFError):
    """The peer closed the stream, or sent a frame over the size limit."""


def write_frame(fd: int, payload: bytes) -> None:
    """Write one length-prefixed frame to a raw file descriptor."""
    data = _HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise FrameError("stream closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int) -> bytes:
    """Read one frame; refuse (without reading it) a frame longer than ``max_bytes``."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds limit {max_bytes}")
    return _read_exact(fd, size)
