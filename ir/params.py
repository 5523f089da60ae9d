"""Param schemas: the kind, range and structure of each param of a primitive.

A primitive declares its params next to its typing rule with
``prim.def_params(name=checker, ...)``; the verifier (and so the parser, which
verifies) checks an equation's params against that schema before the typing
rule runs, so a program that verifies never hands the typing rule, a pass or
the lowering a param of the wrong kind (``axes=(0.0,)``, ``precision=7``, a
30-digit ``length``). A primitive without a schema (``param_schema`` is None,
the default for user primitives) is not checked here.

A checker is a small object: ``problem(value)`` says why ``value`` does not
fit (None when it does) and ``str(checker)`` says what fits, for messages.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from . import dtypes as dt
from .core import ClosedJaxpr, Jaxpr, JaxprTypeError, ShapedArray, Thunk
from .shape_poly import DimExpr, InconclusiveDimensionOperation

__all__ = ["ParamError", "Checker", "Int", "Size", "Bool", "Str", "Scalar", "Is", "Tuple", "Enum", "Record",
           "DType", "ClosedJaxprParam", "Rule", "Aval", "Callable", "OneOf", "Optional", "check_params"]

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


class ParamError(JaxprTypeError):
    """A param outside its primitive's schema: ``what`` is wrong, what was ``expected``;
    ``param`` names the param (None: one is missing)."""

    def __init__(self, what: str, expected: str, param: str | None = None):
        super().__init__(f"{what}; expected {expected}")
        self.what, self.expected, self.param = what, expected, param


class Checker:
    def problem(self, value) -> str | None:
        raise NotImplementedError

    def __str__(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self}>"


def _is_int(value) -> bool:
    """Real integers: Python or NumPy ints, never bools (``True`` is not an axis)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class Int(Checker):
    """An integer in ``[min, max]`` (both default to int64's range; every int param fits int64)."""

    def __init__(self, min: int | None = None, max: int | None = None):
        self.min = INT64_MIN if min is None else min
        self.max = INT64_MAX if max is None else max

    def problem(self, value):
        if not _is_int(value):
            return "not an integer"
        if not self.min <= int(value) <= self.max:
            return f"out of range [{_bound(self.min)}, {_bound(self.max)}]"
        return None

    def __str__(self):
        if self.min == INT64_MIN and self.max == INT64_MAX:
            return "an integer (int64)"
        if self.max == INT64_MAX:
            return f"an integer >= {self.min}"
        return f"an integer in [{self.min}, {self.max}]"


class Size(Int):
    """A dimension's size: an integer in range, or a symbolic dimension (``b``, ``2*b + 1``) that
    the program's constraints cannot make negative."""

    def problem(self, value):
        if type(value) is DimExpr:
            try:
                return None if value >= self.min else f"may be below {self.min}"
            except InconclusiveDimensionOperation:
                return f"may be below {self.min}"
        return super().problem(value)

    def __str__(self):
        return super().__str__().replace("an integer", "a size (an integer or a symbolic dimension)")


def _bound(n: int) -> str:
    return {INT64_MIN: "-2**63", INT64_MAX: "2**63 - 1"}.get(n, str(n))


class Bool(Checker):
    def problem(self, value):
        return None if isinstance(value, (bool, np.bool_)) else "not a bool"

    def __str__(self):
        return "a bool (True or False)"


class Str(Checker):
    def problem(self, value):
        return None if isinstance(value, str) else "not a string"

    def __str__(self):
        return "a string"


class Scalar(Checker):
    """A Python or NumPy number or bool (a fill value)."""

    def problem(self, value):
        ok = isinstance(value, (bool, int, float, complex, np.bool_, np.number))
        return None if ok else "not a number"

    def __str__(self):
        return "a number"


class Is(Checker):
    """Exactly one value (``None``)."""

    def __init__(self, value):
        self.value = value

    def problem(self, value):
        return None if value is self.value else f"not {self.value!r}"

    def __str__(self):
        return repr(self.value)


class Tuple(Checker):
    """A plain tuple (not a record) whose items each fit ``item``; ``length``: its fixed length."""

    def __init__(self, item: Checker, length: int | None = None):
        self.item, self.length = item, length

    def problem(self, value):
        if type(value) is not tuple:
            return "not a tuple"
        if self.length is not None and len(value) != self.length:
            return f"a tuple of length {len(value)}"
        for k, x in enumerate(value):
            if (why := self.item.problem(x)) is not None:
                return f"item {k} ({_show(x)}) is {why}"
        return None

    def __str__(self):
        n = "" if self.length is None else f"{self.length} "
        return f"a tuple of {n}items, each {self.item}"


class Enum(Checker):
    def __init__(self, cls: type[enum.Enum]):
        self.cls = cls

    def problem(self, value):
        return None if isinstance(value, self.cls) else f"not a {self.cls.__name__}"

    def __str__(self):
        return f"a {self.cls.__name__} ({', '.join(f'{self.cls.__name__}.{m}' for m in self.cls.__members__)})"


class Record(Checker):
    """A registered NamedTuple param type, each field checked."""

    def __init__(self, cls: type, **fields: Checker):
        self.cls, self.fields = cls, fields

    def problem(self, value):
        if not isinstance(value, self.cls):
            return f"not a {self.cls.__name__}"
        for name, checker in self.fields.items():
            field = getattr(value, name)
            if (why := checker.problem(field)) is not None:
                return f"field {name} ({_show(field)}) is {why}"
        return None

    def __str__(self):
        return f"a {self.cls.__name__}({', '.join(f'{k}={v}' for k, v in self.fields.items())})"


class DType(Checker):
    """One of the IR's dtypes; ``accepts(dtype)`` narrows the kinds, ``what`` names them."""

    def __init__(self, accepts=None, what: str = "a dtype"):
        self.accepts, self.what = accepts, what

    def problem(self, value):
        if isinstance(value, type) and issubclass(value, np.generic):
            value = np.dtype(value)
        if not isinstance(value, np.dtype) or value not in dt.ALL_DTYPES or value == dt.token:
            return "not a dtype"
        if self.accepts is not None and not self.accepts(value):
            return "a dtype of another kind"
        return None

    def __str__(self):
        return f"{self.what} (f32, i32, ...)" if self.what == "a dtype" else self.what


class ClosedJaxprParam(Checker):
    """A sub-program; ``open_ok``: an open Jaxpr (no consts) is accepted too."""

    def __init__(self, open_ok: bool = False):
        self.open_ok = open_ok

    def problem(self, value):
        kinds = (ClosedJaxpr, Jaxpr) if self.open_ok else ClosedJaxpr
        return None if isinstance(value, kinds) else "not a jaxpr"

    def __str__(self):
        return "a jaxpr ({ lambda ... } or @name)"


class Rule(Checker):
    """A custom rule: a thunk forming its jaxpr on demand (``@name`` in text) or a callable."""

    def problem(self, value):
        return None if isinstance(value, Thunk) or callable(value) else "not a rule"

    def __str__(self):
        return "a rule (@name of a rule definition)"


class Callable(Checker):
    def problem(self, value):
        return None if callable(value) else "not callable"

    def __str__(self):
        return "a callable"


class Aval(Checker):
    def problem(self, value):
        return None if isinstance(value, ShapedArray) else "not a type"

    def __str__(self):
        return "a type like f32[3]"


class OneOf(Checker):
    """The first alternative that fits; ``None`` among them stands for ``Is(None)``."""

    def __init__(self, *alternatives):
        self.alternatives = [Is(None) if a is None else a for a in alternatives]

    def problem(self, value):
        whys = [a.problem(value) for a in self.alternatives]
        return None if any(w is None for w in whys) else "none of the accepted kinds"

    def __str__(self):
        return " or ".join(map(str, self.alternatives))


class Optional(Checker):
    """A param an equation may leave out (as JAX leaves ``accuracy=None`` out of ``exp``): absent
    means the default, so programs without it print and parse as before."""

    def __init__(self, checker: Checker):
        self.checker = checker

    def problem(self, value):
        return self.checker.problem(value)

    def __str__(self):
        return f"{self.checker} (optional)"


def required_params(schema: dict) -> set:
    return {name for name, checker in schema.items() if not isinstance(checker, Optional)}


def _show(value, limit: int = 60) -> str:
    """A param value for a message, cut short (a jaxpr's repr is its whole text)."""
    if isinstance(value, (ClosedJaxpr, Jaxpr)):
        return "a jaxpr"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_params(prim, params: dict) -> None:
    """Raise ParamError when ``params`` do not fit ``prim.param_schema`` (names, then each value)."""
    schema = prim.param_schema
    if schema is None:
        return
    given, expected = set(params), set(schema)
    takes = f"exactly the params ({', '.join(sorted(expected))})" if expected else "no params"
    if extra := sorted(given - expected):
        raise ParamError(f"{prim.name} got unexpected param(s) {', '.join(map(repr, extra))}", takes,
                         extra[0])
    if missing := sorted(required_params(schema) - given):
        raise ParamError(f"{prim.name} lacks param(s) {', '.join(map(repr, missing))}", takes)
    for name in given:
        checker, value = schema[name], params[name]
        if (why := checker.problem(value)) is not None:
            raise ParamError(f"{prim.name}: param {name}={_show(value)}: {why}",
                             f"{name} to be {checker}", name)
