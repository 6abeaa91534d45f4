"""Values as plain JSON types, by exact type: what crosses the boundary for `call` tests and the tester's proxies.

A subclass of a plain type is read through the base type's own slots, so no method the program overrode ever runs.
"""

from __future__ import annotations

import base64

MAX_DEPTH = 100  # nesting of an encoded value
ENCODED_DEPTH = 3 * MAX_DEPTH + 8  # its JSON: a dict is three levels ({"$d": [[k, v]]})
BIG_INT_BITS = 4096  # larger ints travel as hex: str(int) is capped at 4300 digits


class Unserializable(Exception):
    """The value is not made of plain data (None, bool, int, float, str, bytes, list, tuple, dict, set)."""


class Malformed(ValueError):
    """An encoded value or a frame that does not follow the protocol."""


def _items(base, value, remote, depth):
    return [encode(v, remote, depth) for v in base.__iter__(value)]


_ENCODERS = (  # subclasses are read through the base type's own slots: no overridden method ever runs
    (int, lambda v, r, d: _int(int.__int__(v))),
    (float, lambda v, r, d: float.__float__(v)),
    (str, lambda v, r, d: str.__str__(v)),
    (list, lambda v, r, d: _items(list, v, r, d)),
    (tuple, lambda v, r, d: {"$t": _items(tuple, v, r, d)}),
    (dict, lambda v, r, d: {"$d": [[encode(k, r, d), encode(x, r, d)] for k, x in dict.items(v)]}),
    (set, lambda v, r, d: {"$s": _items(set, v, r, d)}),
    (frozenset, lambda v, r, d: {"$f": _items(frozenset, v, r, d)}),
    (bytes, lambda v, r, d: {"$b": base64.b64encode(bytes.__getitem__(v, slice(None))).decode()}),
)


def _int(n):
    return n if n.bit_length() <= BIG_INT_BITS else {"$i": hex(n)}


def encode(value, remote=None, depth=0):
    """Plain JSON for `value`; with `remote`, other objects become {"$r": remote(obj)}, else Unserializable."""
    if depth > MAX_DEPTH:
        raise Unserializable("value nested too deeply")
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    for base, enc in _ENCODERS:
        if kind is base or issubclass(kind, base):
            return enc(value, remote, depth + 1)
    if kind is complex:
        return {"$c": [value.real, value.imag]}
    if remote is not None:
        return {"$r": remote(value)}
    raise Unserializable(kind.__name__)


def too_deep(data, limit=ENCODED_DEPTH):
    """Is this JSON data nested deeper than `limit`? Without recursion: what a program forged may be nested as deep
    as a JSON parser allows, and the host's parser, deeper in its own stack, may refuse what S accepted."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if type(value) is dict:
            stack.extend((v, depth + 1) for v in value.values())
        elif type(value) is list:
            stack.extend((v, depth + 1) for v in value)
    return False


def decode(data, remote=None, depth=0):
    """The value `encode` produced; Malformed for anything else (with `remote`, {"$r": id} -> remote(id))."""
    try:
        return _decode(data, remote, depth)
    except Malformed:
        raise
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise Malformed(f"malformed value: {type(exc).__name__}") from None


def _decode(data, remote, depth):
    kind = type(data)
    if depth > MAX_DEPTH + 1:
        raise Malformed("value nested too deeply")
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [_decode(v, remote, depth + 1) for v in data]
    if kind is not dict or len(data) != 1:
        raise Malformed("malformed value")
    ((tag, v),) = data.items()
    if tag in ("$t", "$s", "$f") and type(v) is list:
        return {"$t": tuple, "$s": set, "$f": frozenset}[tag](_decode(x, remote, depth + 1) for x in v)
    if tag == "$d" and type(v) is list and all(type(p) is list and len(p) == 2 for p in v):
        return {_decode(k, remote, depth + 1): _decode(x, remote, depth + 1) for k, x in v}
    if tag == "$b" and type(v) is str:
        return base64.b64decode(v, validate=True)
    if tag == "$i" and type(v) is str and len(v) < 1 << 20:
        return int(v, 16)
    if tag == "$c" and type(v) is list and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(v[0], v[1])
    if tag == "$r" and remote is not None and type(v) is int:
        return remote(v)
    raise Malformed("malformed value")
