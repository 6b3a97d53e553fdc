"""A JSON Schema compiled to one yes/no function: the fast path that lets valid documents skip `jsonschema`.

`jsonschema` spends about 80 microseconds per `[topic, partition]` pair building error objects nobody reads
when the document is valid (87 s for a 1,000,000-partition group). The contracts use a handful of keywords,
so each subschema is compiled once into a closure that answers "valid?" in about a microsecond, and the items
of a list (a group's million pairs, its offsets) are checked in bulk, column by column with C-level passes; only
a document that fails it goes through `jsonschema`, for the messages. Any keyword outside the subset makes
`compile_schema` return None, so a schema change can never be checked loosely: it falls back to `jsonschema`.
Keyword semantics follow draft 2020-12 as `jsonschema` implements them (a keyword applies only to the
instance types it constrains; `enum` compares with type-aware equality), with "integer" excluding floats.
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

Check = Callable[[Any], bool]
Every = Callable[[Sequence[Any]], bool]  # a check of each item of a list: all(map(check, items)), in one call

_not_none = partial(operator.is_not, None)
_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "$comment"}
_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, numbers.Number) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _all_of(checks: list[Check]) -> Check:
    """One check passing when every one of `checks` passes (a loop: about twice as fast as all() over a generator)."""
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for c in checks:  # noqa: SIM110 (all() over a generator: about twice as slow, see the docstring)
            if not c(value):
                return False
        return True

    return check


class _Unsupported(Exception):
    """A keyword or reference this compiler does not implement."""


def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """`check(instance) -> bool`, True exactly when `schema` has no errors for it; None if it cannot say."""
    try:
        return _Compiler(schema).sub(schema)
    except _Unsupported:
        return None


class _Compiler:
    """Compiles the subschemas of one schema: each into a check of one value, or of every item of a list (the form
    `items` uses, in bulk for the fused shapes); each `$defs` entry once, recursive definitions included."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.defs: dict[str, Check] = {}
        self.every_defs: dict[str, Every] = {}

    def definition(self, ref: str) -> tuple[str, Mapping[str, Any]]:
        name = ref.removeprefix("#/$defs/")
        if name == ref or name not in self.schema.get("$defs", {}):
            raise _Unsupported(ref)
        return name, self.schema["$defs"][name]

    def ref(self, ref: str) -> Check:
        name, definition = self.definition(ref)
        defs = self.defs
        if name not in defs:
            # A placeholder while compiling a recursive definition: the lambda looks defs[name] up at call time.
            defs[name] = lambda v: defs[name](v)  # noqa: PLW0108
            defs[name] = self.sub(definition)
        return defs[name]

    def sub(self, sub: Mapping[str, Any]) -> Check:
        if (fused := _fused(sub, self)) is not None:
            return fused[0]
        checks: list[Check] = []
        for keyword, arg in sub.items():
            if keyword in _ANNOTATIONS:
                continue
            builder = _KEYWORDS.get(keyword)
            if builder is None:
                raise _Unsupported(keyword)
            checks.append(builder(arg, sub, self))
        return _all_of(checks)

    def every(self, sub: Mapping[str, Any]) -> Every:
        """`every(values)`, True exactly when each of `values` passes `sub`."""
        if set(sub) - _ANNOTATIONS == {"$ref"}:
            name, definition = self.definition(sub["$ref"])
            every_defs = self.every_defs
            if name not in every_defs:
                every_defs[name] = lambda values: every_defs[name](values)  # noqa: PLW0108 (as in `ref`)
                every_defs[name] = self.every(definition)
            return every_defs[name]
        if (fused := _fused(sub, self)) is not None:
            return fused[1]
        check = self.sub(sub)
        return lambda values: all(map(check, values))


def _fused(sub: Mapping[str, Any], compiler: _Compiler) -> tuple[Check, Every] | None:
    """One closure for the shapes repeated throughout a snapshot (a bounded string or integer, a `[topic,
    partition]` pair, an offset object, a list of them): a call per value instead of one per keyword, and a bulk
    form for a list of values. None: another shape."""
    keywords = set(sub) - _ANNOTATIONS
    kind = sub.get("type")
    names = [kind] if isinstance(kind, str) else list(kind or ())
    if names == ["object"] and keywords <= {"type", "required", "properties"}:
        props = [(k, compiler.sub(s), compiler.every(s)) for k, s in sub.get("properties", {}).items()]
        return _object(list(sub.get("required", ())), props)
    if names == ["array"] and keywords == {"type", "items"}:
        return _list_of(compiler.every(sub["items"]))
    if names == ["array"] and keywords <= {"type", "minItems", "maxItems", "prefixItems"}:
        prefix = [(compiler.sub(s), compiler.every(s)) for s in sub.get("prefixItems", ())]
        return _array(sub.get("minItems", 0), sub.get("maxItems", math.inf), prefix)
    scalars = [n for n in names if n != "null"]
    if scalars in (["string"], ["integer"]) and keywords <= {"type", "minimum", "minLength"}:
        return _scalar(scalars[0], "null" in names, sub.get("minimum"), sub.get("minLength", 0))
    return None


# The bulk forms take a list column by column, with C-level passes (`set(map(type, ...))`, `min`, `zip`) where
# its items are all of one exact type, and fall back to one call per item otherwise (subclasses, mixed types).


def _object(required: list[str], props: list[tuple[str, Check, Every]]) -> tuple[Check, Every]:
    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for key in required:
            if key not in value:
                return False
        for key, c, _ in props:  # noqa: SIM110 (a loop: all() over a generator is about twice as slow)
            if key in value and not c(value[key]):
                return False
        return True

    checked = {key for key, _, _ in props}

    def every(values: Sequence[Any]) -> bool:
        if set(map(type, values)) != {dict}:
            return all(map(check, values))
        for key in required:
            if key not in checked and not all(map(operator.contains, values, repeat(key))):
                return False
        for key, c, every_value in props:
            column = _column(values, key, key in required, c)
            if column is None or not every_value(column):
                return False
        return True

    return check, every


def _column(values: Sequence[dict[str, Any]], key: str, required: bool, check: Check) -> list[Any] | None:
    """The values of property `key` that `check` must pass, one pass over the objects; None: a required one lacks it."""
    if required:
        try:
            return list(map(itemgetter(key), values))
        except KeyError:
            return None
    if check(None):  # an absent key passes as None does: take None for it
        return list(map(dict.get, values, repeat(key)))
    return [v[key] for v in values if key in v]


def _list_of(every_item: Every) -> tuple[Check, Every]:
    """An array whose items pass one schema; a list of them is checked as the one list of all their items."""

    def check(value: Any) -> bool:
        return isinstance(value, list) and every_item(value)

    def every(values: Sequence[Any]) -> bool:
        if set(map(type, values)) != {list}:
            return all(map(check, values))
        return every_item(list(chain.from_iterable(values)))

    return check, every


def _array(low: int, high: float, prefix: list[tuple[Check, Every]]) -> tuple[Check, Every]:
    def check(value: Any) -> bool:
        if not isinstance(value, list) or not low <= len(value) <= high:
            return False
        for (c, _), item in zip(prefix, value, strict=False):  # noqa: SIM110 (as in _object)
            if not c(item):
                return False
        return True

    def every(values: Sequence[Any]) -> bool:
        if set(map(type, values)) != {list} or len(lengths := set(map(len, values))) != 1:
            return all(map(check, values))
        if not low <= lengths.pop() <= high:
            return False
        columns = zip(*values, strict=True)
        return all(every_item(column) for (_, every_item), column in zip(prefix, columns, strict=False))

    return check, every


def _scalar(kind: str, nullable: bool, minimum: float | None, min_length: int) -> tuple[Check, Every]:
    """A string of `min_length` or an integer not below `minimum` (each keyword applies to its type only)."""
    check = _scalar_check(kind, nullable, minimum, min_length)

    def every(values: Sequence[Any]) -> bool:
        kinds = set(map(type, values))
        if nullable and type(None) in kinds:  # None passes: check the others
            kinds.discard(type(None))
            values = list(filter(_not_none, values))
        if kind == "string" and kinds == {str}:
            return min(map(len, values)) >= min_length
        if kind == "integer" and kinds == {int}:
            return minimum is None or min(values) >= minimum
        return all(map(check, values))

    return check, every


def _scalar_check(kind: str, nullable: bool, minimum: float | None, min_length: int) -> Check:
    if kind == "string":
        return lambda v: (isinstance(v, str) and len(v) >= min_length) or (nullable and v is None)
    if minimum is None:
        return lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (nullable and v is None)
    return lambda v: (isinstance(v, int) and not isinstance(v, bool) and not v < minimum) or (nullable and v is None)


def _type(arg: Any, *_: Any) -> Check:
    names = [arg] if isinstance(arg, str) else list(arg)
    if any(n not in _TYPES for n in names):
        raise _Unsupported(f"type {arg!r}")
    checks = [_TYPES[n] for n in names]
    return checks[0] if len(checks) == 1 else lambda v: any(c(v) for c in checks)


def _required(arg: list[str], *_: Any) -> Check:
    return lambda v: not isinstance(v, dict) or all(k in v for k in arg)


def _properties(arg: Mapping[str, Any], _sub: Any, compiler: _Compiler) -> Check:
    props = [(k, compiler.sub(s)) for k, s in arg.items()]

    def check(value: Any) -> bool:
        if isinstance(value, dict):
            for key, c in props:
                if key in value and not c(value[key]):
                    return False
        return True

    return check


def _additional(arg: Any, sub: Mapping[str, Any], compiler: _Compiler) -> Check:
    if "patternProperties" in sub or not isinstance(arg, Mapping):
        raise _Unsupported("additionalProperties")
    known = set(sub.get("properties", {}))
    every = compiler.every(arg)
    return lambda v: not isinstance(v, dict) or every([x for k, x in v.items() if k not in known])


def _items(arg: Any, sub: Mapping[str, Any], compiler: _Compiler) -> Check:
    if not isinstance(arg, Mapping):
        raise _Unsupported("items")
    skip = len(sub.get("prefixItems", ()))
    every = compiler.every(arg)
    if skip == 0:
        return lambda v: not isinstance(v, list) or every(v)
    return lambda v: not isinstance(v, list) or every(v[skip:])


def _prefix_items(arg: list[Any], _sub: Any, compiler: _Compiler) -> Check:
    checks = [compiler.sub(s) for s in arg]

    def check(value: Any) -> bool:
        if isinstance(value, list):
            for c, item in zip(checks, value, strict=False):
                if not c(item):
                    return False
        return True

    return check


def _min_items(arg: int, *_: Any) -> Check:
    return lambda v: not isinstance(v, list) or len(v) >= arg


def _max_items(arg: int, *_: Any) -> Check:
    return lambda v: not isinstance(v, list) or len(v) <= arg


def _minimum(arg: float, *_: Any) -> Check:
    number = _TYPES["number"]
    return lambda v: not number(v) or not v < arg  # as jsonschema: NaN is not below the minimum


def _exclusive_minimum(arg: float, *_: Any) -> Check:
    number = _TYPES["number"]
    return lambda v: not number(v) or not v <= arg


def _min_length(arg: int, *_: Any) -> Check:
    return lambda v: not isinstance(v, str) or len(v) >= arg


def _pattern(arg: str, *_: Any) -> Check:
    compiled = re.compile(arg)
    return lambda v: not isinstance(v, str) or compiled.search(v) is not None


def _enum(arg: list[Any], *_: Any) -> Check:
    if not all(isinstance(e, str) for e in arg):
        raise _Unsupported("enum of non-strings")  # jsonschema's equality of 1, 1.0 and True is not reproduced
    allowed = frozenset(arg)
    return lambda v: isinstance(v, str) and v in allowed


def _ref(arg: str, _sub: Any, compiler: _Compiler) -> Check:
    return compiler.ref(arg)


_KEYWORDS: dict[str, Callable[..., Check]] = {
    "type": _type,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
    "prefixItems": _prefix_items,
    "minItems": _min_items,
    "maxItems": _max_items,
    "minimum": _minimum,
    "exclusiveMinimum": _exclusive_minimum,
    "minLength": _min_length,
    "pattern": _pattern,
    "enum": _enum,
    "$ref": _ref,
}
