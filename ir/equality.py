"""Structural equality of jaxprs up to variable renaming, and a hash consistent with it.

Two programs are alpha-equivalent when they have the same shape of binders,
equations (same primitive objects), params and consts, with variables
corresponding one to one. Literal and float values compare bitwise, so
``-0.0`` differs from ``0.0`` while NaNs equal each other. Sub-jaxprs in
params compare recursively, each a scope of its own. Thunks compare by their
forced jaxprs when both are forced (coinductively: a rule that refers to
itself is assumed equal while it is being compared), else by identity. As in the
text form, rules nested deeper than the printer's ``MAX_DEFINITION_DEPTH`` are not
compared.

``structural_hash`` is a blake2b digest of a canonical walk (variables by
binding order): stable across processes, never based on ``id()``. Thunks
and other rules hash to a constant so a hash cannot change when a thunk gets forced.
"""
from __future__ import annotations

import enum
import hashlib
import struct

import numpy as np

from . import dtypes as dt
from .core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Thunk, Var
from .deep import deep_entry
from .printer import MAX_DEFINITION_DEPTH, definition_jaxpr, is_definition
from .tracing import Tracer


# ----------------------------------------------------------------- values

def _float_bits(x: float) -> bytes:
    return b"nan" if x != x else struct.pack("<d", x)


def _array_key(x):
    """Bitwise identity of an array value, NaNs canonical; None for values only comparable by identity."""
    if isinstance(x, Tracer) or x is None:
        return None
    a = np.asarray(x)
    if dt.is_inexact(a.dtype):
        a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a)
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()


def _values_equal(x, y) -> bool:
    kx, ky = _array_key(x), _array_key(y)
    if kx is None or ky is None:
        return x is y
    return kx == ky


def _literal_key(lit: Literal):
    return lit.aval, _array_key(lit.val)


# ------------------------------------------------------------------ equality

@deep_entry
def alpha_equivalent(a: ClosedJaxpr | Jaxpr, b: ClosedJaxpr | Jaxpr) -> bool:
    """Structural equality up to variable renaming (see the module docstring)."""
    return _Comparison().closed(a, b)


class _Comparison:
    def __init__(self):
        self.assumed: set[tuple[int, int]] = set()   # thunk pairs under comparison
        self.keep: list = []                          # keeps those thunks (and their ids) alive
        self.depth = 0                                # of the rules being compared

    def closed(self, a, b) -> bool:
        if isinstance(a, ClosedJaxpr) != isinstance(b, ClosedJaxpr):
            return False
        if isinstance(a, ClosedJaxpr):
            if len(a.consts) != len(b.consts) or not all(
                    _values_equal(x, y) for x, y in zip(a.consts, b.consts)):
                return False
            a, b = a.jaxpr, b.jaxpr
        return self.jaxpr(a, b)

    def jaxpr(self, a: Jaxpr, b: Jaxpr) -> bool:
        ab: dict[Var, Var] = {}
        ba: dict[Var, Var] = {}

        def bind(xs, ys) -> bool:
            if len(xs) != len(ys):
                return False
            for x, y in zip(xs, ys):
                if x.aval != y.aval or ab.get(x, y) is not y or ba.get(y, x) is not x:
                    return False
                ab[x], ba[y] = y, x
            return True

        def same_atoms(xs, ys) -> bool:
            if len(xs) != len(ys):
                return False
            for x, y in zip(xs, ys):
                if isinstance(x, Literal) or isinstance(y, Literal):
                    if not (isinstance(x, Literal) and isinstance(y, Literal)
                            and _literal_key(x) == _literal_key(y)):
                        return False
                elif (ab[x] if x in ab else x) is not y:
                    return False   # free variables (a faulty program) match only themselves
            return True

        if not (bind(a.constvars, b.constvars) and bind(a.invars, b.invars)
                and len(a.eqns) == len(b.eqns)):
            return False
        for ea, eb in zip(a.eqns, b.eqns):
            if (ea.primitive is not eb.primitive or not same_atoms(ea.invars, eb.invars)
                    or not self.params(ea.params, eb.params) or not bind(ea.outvars, eb.outvars)):
                return False
        return same_atoms(a.outvars, b.outvars)

    def params(self, pa: dict, pb: dict) -> bool:
        return pa.keys() == pb.keys() and all(self.param(pa[k], pb[k]) for k in pa)

    def param(self, x, y) -> bool:
        if isinstance(x, (ClosedJaxpr, Jaxpr)) or isinstance(y, (ClosedJaxpr, Jaxpr)):
            return self.closed(x, y) if type(x) is type(y) else False
        if is_definition(x) or is_definition(y):
            return self.definition(x, y)
        if isinstance(x, bool) or isinstance(y, bool):
            return type(x) is type(y) and x == y
        if isinstance(x, enum.Enum) or isinstance(y, enum.Enum):
            return x is y
        if isinstance(x, (float, np.floating)) and isinstance(y, (float, np.floating)):
            return _float_bits(float(x)) == _float_bits(float(y))
        if isinstance(x, tuple) and isinstance(y, tuple):
            return (type(x) is type(y) and len(x) == len(y)
                    and all(self.param(u, v) for u, v in zip(x, y)))
        if isinstance(x, (int, np.integer)) and isinstance(y, (int, np.integer)):
            return int(x) == int(y)
        if isinstance(x, (int, float, np.number)) or isinstance(y, (int, float, np.number)):
            return False       # 1 and 1.0 print differently
        try:
            return bool(x == y)
        except Exception:  # noqa: BLE001 -- a param type without a usable __eq__
            return x is y

    def definition(self, x, y) -> bool:
        if x is y or self.depth >= MAX_DEFINITION_DEPTH:
            return True
        if not (is_definition(x) and is_definition(y) and _available(x) and _available(y)):
            return False
        key = (id(x), id(y))
        if key in self.assumed:
            return True
        self.assumed.add(key)
        self.keep.append((x, y))
        self.depth += 1
        try:
            return self.closed(definition_jaxpr(x), definition_jaxpr(y))
        finally:
            self.depth -= 1


def _available(rule) -> bool:
    """A rule's jaxpr can be compared without running user code: a forced thunk, or a
    ``to_jaxpr()`` object that does not say otherwise (``forced = False``)."""
    return rule.forced if isinstance(rule, Thunk) else getattr(rule, "forced", True)


# --------------------------------------------------------------------- hash

@deep_entry
def structural_hash(cj: ClosedJaxpr | Jaxpr) -> int:
    """A stable hash with ``alpha_equivalent(a, b)`` implying equal hashes."""
    h = hashlib.blake2b(digest_size=8)
    _Hasher(h).closed(cj)
    return int.from_bytes(h.digest(), "little", signed=True)


class _Hasher:
    def __init__(self, h):
        self.h = h

    def put(self, *parts) -> None:
        for p in parts:
            self.h.update(p if isinstance(p, bytes) else str(p).encode())
            self.h.update(b"\x00")

    def closed(self, cj) -> None:
        if isinstance(cj, ClosedJaxpr):
            self.put("closed", len(cj.consts))
            for c in cj.consts:
                key = _array_key(c)
                self.put("const", *(key if key is not None else ("opaque", type(c).__name__)))
            cj = cj.jaxpr
        self.jaxpr(cj)

    def jaxpr(self, j: Jaxpr) -> None:
        numbers: dict[Var, int] = {}

        def bind(vs):
            for v in vs:
                numbers.setdefault(v, len(numbers))
                self.put("bind", v.aval.str_short())

        def atoms(xs):
            for x in xs:
                if isinstance(x, Literal):
                    self.put("lit", x.aval.str_short(), *_array_key(x.val))
                else:
                    self.put("var", numbers.get(x, -1))

        self.put("jaxpr", len(j.constvars), len(j.invars), len(j.eqns))
        bind(j.constvars)
        bind(j.invars)
        for e in j.eqns:
            self.put("eqn", e.primitive.name, len(e.invars), len(e.outvars))
            atoms(e.invars)
            for k in sorted(e.params):
                self.put("param", k)
                self.param(e.params[k])
            bind(e.outvars)
        self.put("out", len(j.outvars))
        atoms(j.outvars)

    def param(self, x) -> None:
        if isinstance(x, type) and issubclass(x, np.generic):
            x = np.dtype(x)
        if isinstance(x, (ClosedJaxpr, Jaxpr)):
            self.closed(x)
        elif is_definition(x):
            self.put("rule")
        elif isinstance(x, bool) or x is None:
            self.put(repr(x))
        elif isinstance(x, enum.Enum):
            self.put("enum", type(x).__qualname__, x.name)
        elif isinstance(x, (float, np.floating)):
            self.put("float", _float_bits(float(x)))
        elif isinstance(x, (int, np.integer)):
            self.put("int", int(x))
        elif isinstance(x, tuple):
            self.put("tuple", type(x).__qualname__, len(x))
            for v in x:
                self.param(v)
        elif isinstance(x, (str, np.dtype, ShapedArray)):
            self.put(type(x).__name__, x)
        else:   # callables and other objects: their kind only (equality decides the rest)
            self.put("object", getattr(x, "__qualname__", None) or type(x).__qualname__)
