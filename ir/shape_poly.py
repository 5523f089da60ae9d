"""Symbolic dimensions: sizes that are expressions over dimension variables (``b``, ``2*b + 1``).

A dimension is an ``int`` or a ``DimExpr``: an immutable, hashable polynomial
with integer coefficients whose "variables" are atoms, either a dimension
variable or one of ``floordiv(e, d)``, ``mod(e, d)``, ``max(e, f)``,
``min(e, f)`` of dimension expressions. Expressions are kept normalised (terms
sorted, zero terms dropped), and one whose value is constant *is* an ``int``, so
shape code written for ints works on both kinds of dimension.

Every expression belongs to a ``SymbolicScope``, which holds the constraints of
its variables. Dimension variables are ``>= 1``; ``b >= 2`` or ``b <= 64``
bound them further; ``b == 2*h`` makes ``b`` an alias of ``2*h`` (the left side
must be a lone atom). ``<``, ``<=``, ``>``, ``>=`` between dimensions are
decided from interval bounds of the difference, helped by the inequality
constraints; when the bounds cannot decide they raise
``InconclusiveDimensionOperation``, as in JAX. ``==`` is True only when the
difference is provably 0, else False (never raises), also as in JAX.
"""
from __future__ import annotations

import math
import operator
import re
from typing import Iterable, Sequence

from .core import JaxprcError


class InconclusiveDimensionOperation(JaxprcError):
    """A comparison or conversion of symbolic dimensions that the constraints cannot decide."""


_INF = math.inf


# ------------------------------------------------------------------ scope

class SymbolicScope:
    """The constraints of a set of dimension variables; expressions of different scopes don't mix.

    Scopes compare by their constraint texts, so a program parsed from text has
    the same types as the one printed.
    """

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self._constraints_str = tuple(str(c).strip() for c in constraints_str)
        self._aliases: dict[tuple, object] = {}      # atom -> the expression it equals
        self._geq: list[DimExpr] = []                # e >= 0 for each e
        self._atom_bounds: dict[tuple, tuple] = {}   # atom -> (lo, hi) from single-atom constraints
        for text in self._constraints_str:
            self._add_constraint(text)

    def _add_constraint(self, text: str) -> None:
        lhs, op, rhs = _parse_constraint(text, self)
        if op == "==":
            atom = _lone_atom(lhs)
            if atom is None:
                raise ValueError(f"Symbolic equality constraint '{text}': the left side must be a "
                                 "dimension variable or a single floordiv/mod/max/min term")
            if atom in self._aliases:
                raise ValueError(f"Symbolic equality constraint '{text}': "
                                 f"'{_atom_str(atom)}' is already constrained")
            self._aliases[atom] = rhs
            return
        diff = lhs - rhs if op == ">=" else rhs - lhs
        if type(diff) is int:
            if diff < 0:
                raise ValueError(f"Symbolic constraint '{text}' is always false")
            return
        self._geq.append(diff)
        # c*atom + k >= 0 bounds the atom itself.
        (mono, coeff), rest = diff._terms[0], diff._terms[1:]
        if len(diff._terms) <= 2 and len(mono) == 1 and mono[0][1] == 1 and all(m == () for m, _ in rest):
            atom, k = mono[0][0], (rest[0][1] if rest else 0)
            lo, hi = self._atom_bounds.get(atom, (-_INF, _INF))
            if coeff > 0:
                lo = max(lo, -(k // coeff))
            else:
                hi = min(hi, k // -coeff)
            self._atom_bounds[atom] = (lo, hi)

    @property
    def constraints(self) -> tuple[str, ...]:
        return self._constraints_str

    def __eq__(self, other):
        return self is other or (type(other) is SymbolicScope
                                 and self._constraints_str == other._constraints_str)

    def __hash__(self):
        return hash(self._constraints_str)

    def __str__(self):
        return ", ".join(self._constraints_str)

    def __repr__(self):
        return f"SymbolicScope({list(self._constraints_str)!r})"


# ------------------------------------------------------------ expressions
# An atom is a tuple: ("var", name) or (op, a, b) for op in floordiv, mod, max, min;
# a monomial is a sorted tuple of (atom, power); an expression's terms a sorted
# tuple of (monomial, coefficient), the constant's monomial being ().

FUNCTIONS = ("floordiv", "mod", "max", "min")


def _atom_key(atom):
    return atom[1] if atom[0] == "var" else "~" + _atom_str(atom)


def _mono_key(mono):
    """Higher degree first, then by the atoms' text; the constant last."""
    return (-sum(p for _, p in mono), [(_atom_key(a), -p) for a, p in mono])


class DimExpr:
    """A non-constant dimension expression (a constant one is an ``int``)."""

    __slots__ = ("_terms", "_scope", "_hash", "_bounds")

    def __init__(self, terms, scope: SymbolicScope):
        self._terms = terms
        self._scope = scope
        self._hash = hash(terms)
        self._bounds = None       # (lo, hi), computed on first use

    @property
    def scope(self) -> SymbolicScope:
        return self._scope

    # -- arithmetic
    def __add__(self, other):
        if type(other) is not DimExpr:
            other = _as_int(other)
            if other is NotImplemented:
                return _as_value_op(self, other, operator.add)
        return _sum(self._scope, (self, 1), (other, 1))

    def __radd__(self, other):
        other_int = _as_int(other)
        if other_int is NotImplemented:
            return _as_value_op(self, other, lambda v, o: o + v)
        return _sum(self._scope, (self, 1), (other_int, 1))

    def __neg__(self):
        return _sum(self._scope, (self, -1))

    def __sub__(self, other):
        if type(other) is not DimExpr:
            other = _as_int(other)
            if other is NotImplemented:
                return _as_value_op(self, other, operator.sub)
        return _sum(self._scope, (self, 1), (other, -1))

    def __rsub__(self, other):
        other_int = _as_int(other)
        if other_int is NotImplemented:
            return _as_value_op(self, other, lambda v, o: o - v)
        return _sum(self._scope, (self, -1), (other_int, 1))

    def __mul__(self, other):
        if type(other) is not DimExpr:
            other_int = _as_int(other)
            if other_int is NotImplemented:
                return _as_value_op(self, other, operator.mul)
            return _sum(self._scope, (self, other_int))
        scope = _common_scope(self, other)
        acc: dict = {}
        for m1, c1 in self._terms:
            for m2, c2 in other._terms:
                mono = _mono_mul(m1, m2)
                acc[mono] = acc.get(mono, 0) + c1 * c2
        return _normalise(acc, scope)

    __rmul__ = __mul__

    # "/" is a float division: always on the dimension's value, as in JAX
    def __truediv__(self, other):
        return _as_value_op(self, other, operator.truediv, always=True)

    def __rtruediv__(self, other):
        return _as_value_op(self, other, lambda v, o: o / v, always=True)

    def __pow__(self, power):
        if type(power) is not int or power < 0:
            return NotImplemented
        result = 1
        for _ in range(power):
            result = result * self
        return result

    def __floordiv__(self, other):
        return _divmod(self, other)[0]

    def __rfloordiv__(self, other):
        return _divmod(_as_int(other), self)[0]

    def __mod__(self, other):
        return _divmod(self, other)[1]

    def __rmod__(self, other):
        return _divmod(_as_int(other), self)[1]

    def __divmod__(self, other):
        return _divmod(self, other)

    def __rdivmod__(self, other):
        return _divmod(_as_int(other), self)

    # -- comparisons
    def __eq__(self, other):
        if type(other) is DimExpr:
            if self._terms == other._terms and self._scope == other._scope:
                return True
        elif _as_int(other) is NotImplemented:
            return False
        else:
            lo, hi = _bounds(self)
            return lo == hi == other
        lo, hi = _bounds(self - other)
        return lo == hi == 0

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return self._hash

    def __ge__(self, other):
        return _compare(self, other, ">=")

    def __le__(self, other):
        return _compare(self, other, "<=")

    def __gt__(self, other):
        return _compare(self, other, ">")

    def __lt__(self, other):
        return _compare(self, other, "<")

    # -- conversions: a symbolic dimension is no integer
    def _not_an_int(self, what: str):
        raise InconclusiveDimensionOperation(_NotAnInt(self, what))

    def __int__(self):
        self._not_an_int("a Python int")

    def __index__(self):
        # JAX's dimensions have no __index__, so Python's own TypeError is what operator.index,
        # range() and len() raise there; int() raises InconclusiveDimensionOperation in both.
        raise TypeError(f"'DimExpr' object cannot be interpreted as an integer: {_NotAnInt(self, 'an index')}")

    def __float__(self):
        raise TypeError(f"float() argument must be a string or a real number, not 'DimExpr': "
                        f"{_NotAnInt(self, 'a Python float')}")

    # -- inspection
    def bounds(self) -> tuple[float, float]:
        """Lower and upper bounds (ints, or -inf/inf) that the scope's constraints imply."""
        return _bounds(self)

    def free_vars(self) -> set[str]:
        out: set[str] = set()
        for mono, _ in self._terms:
            for atom, _ in mono:
                _atom_vars(atom, out)
        return out

    def evaluate(self, env: dict) -> int:
        """The value at dimension variables ``env`` (name -> int)."""
        total = 0
        for mono, coeff in self._terms:
            value = coeff
            for atom, power in mono:
                value *= _eval_atom(atom, env) ** power
            total += value
        return total

    def __str__(self):
        parts = []
        for mono, coeff in self._terms:
            body = "*".join(_atom_str(a) + (f"^{p}" if p > 1 else "") for a, p in mono)
            mag = abs(coeff)
            text = body if mono and mag == 1 else (f"{mag}*{body}" if mono else str(mag))
            if not parts:
                parts.append(text if coeff > 0 else "- " + text)
            else:
                parts.append(("+ " if coeff > 0 else "- ") + text)
        return " ".join(parts)

    def __repr__(self):
        return str(self)


Dim = int | DimExpr


def canonicalize_shape(shape) -> tuple:
    """A shape as a tuple of Python ints, symbolic dimensions kept as they are (JAX's
    ``core.canonicalize_shape``); ints cost nothing extra."""
    try:
        return tuple(map(operator.index, shape))
    except TypeError:
        return _keep_symbolic(shape)


def _keep_symbolic(shape) -> tuple:
    return tuple(d if type(d) is DimExpr else operator.index(d) for d in shape)


class _NotAnInt:
    """The message of a symbolic dimension converted to an int, formed only when shown (shape
    code tries int() first and keeps the dimension when that raises)."""

    def __init__(self, dim: DimExpr, what: str):
        self.dim, self.what = dim, what

    def __str__(self):
        return (f"Symbolic dimension '{self.dim}' used where {self.what} is needed; a symbolic "
                "dimension has no value until the program is called with concrete shapes.")


def is_symbolic_dim(d) -> bool:
    return type(d) is DimExpr


def is_constant_shape(shape: Iterable) -> bool:
    return all(type(d) is not DimExpr for d in shape)


def _as_int(x):
    if type(x) is int:
        return x
    try:
        return operator.index(x)
    except TypeError:
        return NotImplemented


# How a dimension becomes an array value (the compiler's ``dim_as_value``): set by the layer that
# owns arrays, used when a dimension meets a float or an array operand (JAX's ``__jax_array__``).
_to_value = None


def set_value_conversion(fn) -> None:
    global _to_value
    _to_value = fn


def _as_value_op(dim: DimExpr, other, op, always: bool = False):
    """``op(value of dim, other)`` when ``other`` is a float or an array (or always, for "/");
    NotImplemented otherwise, so Python reports the unsupported operand types."""
    arraylike = isinstance(other, (float, complex)) or hasattr(other, "dtype")
    if _to_value is None or not (always or arraylike) or isinstance(other, str):
        return NotImplemented
    return op(_to_value(dim), other)


def _same_scope(s1: SymbolicScope, s2: SymbolicScope) -> None:
    if s1 != s2:
        raise ValueError(f"Invalid mixing of symbolic scopes: {s1!r} and {s2!r}; build every "
                         "symbolic shape of a function with one scope (symbolic_shape(..., scope=...)).")


def _common_scope(*exprs) -> SymbolicScope:
    scopes = [e._scope for e in exprs if type(e) is DimExpr]
    for s in scopes[1:]:
        _same_scope(scopes[0], s)
    return scopes[0]


def _normalise(acc: dict, scope: SymbolicScope):
    terms = tuple(sorted(((m, c) for m, c in acc.items() if c != 0), key=lambda t: _mono_key(t[0])))
    if not terms:
        return 0
    if len(terms) == 1 and terms[0][0] == ():
        return terms[0][1]
    return DimExpr(terms, scope)


def _terms_of(e):
    return e._terms if type(e) is DimExpr else (((), e),)


def _sum(scope, *scaled):
    """sum(c * e for e, c in scaled), normalised."""
    acc: dict = {}
    for e, c in scaled:
        if type(e) is DimExpr and e._scope is not scope:
            _same_scope(scope, e._scope)
        for mono, coeff in _terms_of(e):
            acc[mono] = acc.get(mono, 0) + coeff * c
    return _normalise(acc, scope)


def _mono_mul(m1, m2):
    powers = dict(m1)
    for atom, p in m2:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: _atom_key(ap[0])))


def _lone_atom(e):
    """The atom of ``e`` when ``e`` is exactly one atom (coefficient 1, power 1, no constant)."""
    if type(e) is DimExpr and len(e._terms) == 1:
        (mono, coeff), = e._terms
        if coeff == 1 and len(mono) == 1 and mono[0][1] == 1:
            return mono[0][0]
    return None


def _atom_expr(atom, scope: SymbolicScope):
    """The expression of one atom; an aliased atom (``b == 2*h``) is its alias."""
    alias = scope._aliases.get(atom)
    if alias is not None:
        return alias
    return DimExpr(((((atom, 1),), 1),), scope)


def dim_var(name: str, scope: SymbolicScope) -> DimExpr:
    return _atom_expr(("var", name), scope)


def _divmod(num, den):
    if type(den) is not DimExpr:
        den = _as_int(den)
        if den is NotImplemented:
            return NotImplemented, NotImplemented
        if den == 0:
            raise InconclusiveDimensionOperation(f"Symbolic dimension '{num}' divided by 0")
    if type(num) is not DimExpr and type(den) is not DimExpr:
        return divmod(num, den)
    if type(num) is int and num == 0:      # 0 // b == 0 % b == 0, as JAX simplifies them
        return 0, 0
    scope = _common_scope(num, den)
    if type(den) is int:
        # num = den*q + r, where r holds the terms whose coefficient den does not divide.
        q, r = {}, {}
        for mono, coeff in _terms_of(num):
            if mono and coeff % den == 0:
                q[mono] = coeff // den
            else:
                r[mono] = coeff
        quotient, rest = _normalise(q, scope), _normalise(r, scope)
        if type(rest) is int:
            return quotient + rest // den, rest % den
        if den == 1:
            return num, 0
        return (quotient + _atom_expr(("floordiv", rest, den), scope),
                _atom_expr(("mod", rest, den), scope))
    if num == den:
        return 1, 0
    exact = _divide_exactly(num, den)
    if exact is not None:
        return exact, 0
    return _atom_expr(("floordiv", num, den), scope), _atom_expr(("mod", num, den), scope)


def _divide_exactly(num, den: DimExpr):
    """num / den when den is one term dividing every term of num exactly, else None."""
    if len(den._terms) != 1:
        return None
    (dmono, dcoeff), = den._terms
    dpowers = dict(dmono)
    acc = {}
    for mono, coeff in _terms_of(num):
        powers = dict(mono)
        if coeff % dcoeff or any(powers.get(a, 0) < p for a, p in dpowers.items()):
            return None
        for a, p in dpowers.items():
            powers[a] -= p
        acc[tuple(sorted(((a, p) for a, p in powers.items() if p), key=lambda ap: _atom_key(ap[0])))] = coeff // dcoeff
    return _normalise(acc, den._scope)


def slice_bounds(start, stop, step, size) -> tuple:
    """``(start, limit, stride)`` of ``slice(start, stop, step)`` on a dimension of symbolic
    ``size``, as ``slice.indices`` clamps them; positive steps only."""
    step = 1 if step is None else operator.index(step)
    if step <= 0:
        raise InconclusiveDimensionOperation(
            f"slicing a dimension of symbolic size '{size}' with step {step}: only positive steps "
            "are supported on symbolic dimensions")

    def clamp(bound, default):
        if bound is None:
            return default
        if type(bound) is not DimExpr and bound < 0:
            return max_dim(size + bound, 0)
        return min_dim(bound, size)

    start = clamp(start, 0)
    return start, max_dim(clamp(stop, size), start), step


def max_dim(a, b):
    """max of two dimensions: the larger when the constraints decide it, else a ``max`` atom."""
    return _extremum("max", a, b)


def min_dim(a, b):
    return _extremum("min", a, b)


def non_negative_dim(d):
    """max(d, 0): the size of a range that may be empty."""
    return max_dim(d, 0)


def _extremum(op, a, b):
    if type(a) is not DimExpr and type(b) is not DimExpr:
        return max(a, b) if op == "max" else min(a, b)
    lo, hi = _bounds(a - b)
    if lo >= 0:
        return a if op == "max" else b
    if hi <= 0:
        return b if op == "max" else a
    scope = _common_scope(a, b)
    if type(a) is int or (type(b) is DimExpr and str(b) < str(a)):
        a, b = b, a      # one canonical order of the operands: max(a, b) is max(b, a)
    return _atom_expr((op, a, b), scope)


# ---------------------------------------------------------------- bounds

def _iv_mul(x, y):
    products = [0 if 0 in (p, q) else p * q for p in x for q in y]
    return min(products), max(products)


def _atom_bounds(atom, scope):
    kind = atom[0]
    if kind == "var":
        lo, hi = 1, _INF
    else:
        (alo, ahi), (blo, bhi) = _bounds(atom[1]), _bounds(atom[2])
        if kind == "max":
            lo, hi = max(alo, blo), max(ahi, bhi)
        elif kind == "min":
            lo, hi = min(alo, blo), min(ahi, bhi)
        elif kind == "mod":
            lo, hi = (0, bhi - 1) if blo > 0 else (-_INF, _INF)
            if 0 <= alo and ahi < blo:
                lo, hi = alo, ahi
        elif blo > 0 and alo >= 0:   # floordiv by a positive divisor
            lo = alo // bhi if bhi != _INF else 0
            hi = ahi // blo if ahi != _INF else _INF
        elif blo > 0:
            lo = -_INF if alo == -_INF else min(alo // blo, alo // bhi if bhi != _INF else -1)
            hi = _INF if ahi == _INF else max(ahi // blo, 0)
        else:
            lo, hi = -_INF, _INF
    clo, chi = scope._atom_bounds.get(atom, (-_INF, _INF))
    return max(lo, clo), min(hi, chi)


def _bounds(e) -> tuple:
    if type(e) is not DimExpr:
        return e, e
    if e._bounds is None:
        e._bounds = _compute_bounds(e)
    return e._bounds


def _compute_bounds(e: DimExpr) -> tuple:
    lo = hi = 0
    for mono, coeff in e._terms:
        iv = (coeff, coeff)
        for atom, power in mono:
            alo, ahi = _atom_bounds(atom, e._scope)
            for _ in range(power):
                iv = _iv_mul(iv, (alo, ahi))
        lo, hi = lo + iv[0], hi + iv[1]
    return lo, hi


def _compare(a: DimExpr, b, op: str) -> bool:
    """``a op b`` as ``diff >= 0``, decided by bounds and the scope's inequality constraints."""
    if type(b) is not DimExpr:
        b = _as_int(b)
        if b is NotImplemented:
            return NotImplemented
        alo, ahi = _bounds(a)      # a >= b: decided by a's bounds alone when they can
        lo, hi = {">=": (alo - b, ahi - b), ">": (alo - b - 1, ahi - b - 1),
                  "<=": (b - ahi, b - alo), "<": (b - ahi - 1, b - alo - 1)}[op]
        if lo >= 0:
            return True
        if hi < 0:
            return False
    diff = {">=": a - b, ">": a - b - 1, "<=": b - a, "<": b - a - 1}[op]
    decided = _decide_nonnegative(diff, a._scope, ())
    if decided is not None:
        return decided
    raise InconclusiveDimensionOperation(
        f"Symbolic dimension comparison '{a}' {op} '{b}' is inconclusive.\n"
        "This error arises for comparison operations with shapes that are non-constant, and the "
        "result of the operation cannot be represented as a boolean value for all values of the "
        "symbolic dimensions involved. Add constraints (symbolic_shape(..., constraints=...)) "
        "that decide it.")


_MAX_CASE_SPLITS = 3     # max/min atoms split into cases per decision (2**3 cases at most)


def _decide_nonnegative(diff, scope: SymbolicScope, known: tuple, splits: int = 0):
    """Whether ``diff >= 0`` (None: undecided), given the scope's constraints and ``known``
    (expressions known to be >= 0). Bounds first, then each constraint g: ``diff - g >= 0``
    proves it, ``-diff - 1 - g >= 0`` disproves it. Last, a max/min atom splits the decision
    in two cases: ``max(a, b)`` is ``a`` where ``a - b >= 0``, else ``b``."""
    if type(diff) is int:
        return diff >= 0
    lo, hi = _bounds(diff)
    if lo >= 0:
        return True
    if hi < 0:
        return False
    for g in (*scope._geq, *known):
        if _bounds(diff - g)[0] >= 0:
            return True
        if _bounds(-diff - 1 - g)[0] >= 0:
            return False
    atom = next((a for mono, _ in diff._terms for a, _ in mono if a[0] in ("max", "min")), None)
    if atom is None or splits >= _MAX_CASE_SPLITS:
        return None
    op, x, y = atom
    cases = [(x, x - y), (y, y - x)] if op == "max" else [(x, y - x), (y, x - y)]
    results = set()
    for value, condition in cases:
        if type(condition) is int and condition < 0:
            continue                      # an impossible case
        extra = (condition,) if type(condition) is DimExpr else ()
        results.add(_decide_nonnegative(_substitute(diff, atom, value), scope, known + extra, splits + 1))
    return results.pop() if len(results) == 1 else None


def _substitute(e: DimExpr, atom, value):
    """``e`` with ``value`` in place of ``atom`` (at the top level of its terms)."""
    total = 0
    for mono, coeff in e._terms:
        term = coeff
        for a, power in mono:
            factor = value if a == atom else _atom_expr(a, e._scope)
            for _ in range(power):
                term = term * factor
        total = total + term
    return total


# ---------------------------------------------------------- atoms, helpers

def _atom_str(atom) -> str:
    if atom[0] == "var":
        return atom[1]
    return f"{atom[0]}({atom[1]}, {atom[2]})"


def _atom_vars(atom, out: set) -> None:
    if atom[0] == "var":
        out.add(atom[1])
    else:
        for e in atom[1:]:
            if type(e) is DimExpr:
                out |= e.free_vars()


def _eval(e, env):
    return e.evaluate(env) if type(e) is DimExpr else e


def _eval_atom(atom, env) -> int:
    if atom[0] == "var":
        try:
            return env[atom[1]]
        except KeyError:
            raise KeyError(f"no value for dimension variable '{atom[1]}'") from None
    a, b = _eval(atom[1], env), _eval(atom[2], env)
    return {"floordiv": operator.floordiv, "mod": operator.mod, "max": max, "min": min}[atom[0]](a, b)


def evaluate(d, env: dict) -> int:
    """The value of a dimension at dimension variables ``env``."""
    return d.evaluate(env) if type(d) is DimExpr else d


def free_vars(shape: Iterable) -> set[str]:
    out: set[str] = set()
    for d in shape:
        if type(d) is DimExpr:
            out |= d.free_vars()
    return out


def constraint_vars(scope: SymbolicScope) -> set[str]:
    """The dimension variables the scope's constraints name."""
    out: set[str] = set()
    for text in scope.constraints:
        lhs, _, rhs = _parse_constraint(text, SymbolicScope())
        out |= free_vars([lhs, rhs])
    return out


def shape_scope(shape: Iterable) -> SymbolicScope | None:
    for d in shape:
        if type(d) is DimExpr:
            return d._scope
    return None


def dim_str_compact(d) -> str:
    """A dimension as written inside a type: no spaces (``f32[2*b+1,4]``)."""
    return str(d) if type(d) is int else str(d).replace(" ", "")


# --------------------------------------------------------------- parsing

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|>=|<=|==|[-+*%^(),<>]))")


class _Parser:
    """Recursive descent over ``expr := term (('+'|'-') term)*``, ``term := factor (('*'|'//'|'%')
    factor)*``, ``factor := '-' factor | atom ('^' INT)?``, atom an int, a variable,
    ``floordiv|mod|max|min(expr, expr)`` or ``(expr)``."""

    def __init__(self, text: str, scope: SymbolicScope, context: str):
        self.text, self.scope, self.context = text, scope, context
        self.tokens, pos = [], 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                self.fail(f"unexpected character {text[pos:].lstrip()[:1]!r}")
            self.tokens.append(m.group(1) or m.group(2) or m.group(3))
            pos = m.end()
        self.i = 0

    def fail(self, what: str):
        raise ValueError(f"syntax error in {self.context} '{self.text}': {what}")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected=None):
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            self.fail(f"expected {expected or 'more'}, found {tok or 'the end'}")
        self.i += 1
        return tok

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.factor()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            rhs = self.factor()
            value = value * rhs if op == "*" else value // rhs if op == "//" else value % rhs
        return value

    def factor(self):
        if self.peek() == "-":
            self.take()
            return -self.factor()
        value = self.atom()
        if self.peek() == "^":
            self.take()
            tok = self.take()
            if not tok.isdigit():
                self.fail(f"expected an integer power, found {tok}")
            value = value ** int(tok)
        return value

    def atom(self):
        tok = self.take()
        if tok.isdigit():
            return int(tok)
        if tok == "(":
            value = self.expr()
            self.take(")")
            return value
        if tok[0].isalpha() or tok[0] == "_":
            if tok in FUNCTIONS and self.peek() == "(":
                self.take("(")
                a = self.expr()
                self.take(",")
                b = self.expr()
                self.take(")")
                return {"floordiv": operator.floordiv, "mod": operator.mod,
                        "max": max_dim, "min": min_dim}[tok](a, b)
            return dim_var(tok, self.scope)
        self.fail(f"unexpected '{tok}'")

    def list_of(self, item):
        """Comma-separated items (parentheses around the whole list allowed)."""
        items = []
        while self.peek() is not None:
            items.append(item())
            if self.peek() is None:
                break
            self.take(",")
        return items

    def done(self):
        if self.peek() is not None:
            self.fail(f"unexpected '{self.peek()}'")


def _parse_constraint(text: str, scope: SymbolicScope):
    p = _Parser(text, scope, "symbolic constraint")
    lhs = p.expr()
    op = p.peek()
    if op not in (">=", "<=", "=="):
        p.fail("expected a comparison, one of >=, <=, ==")
    p.take()
    rhs = p.expr()
    p.done()
    return lhs, op, rhs


def parsed_constraints(scope: SymbolicScope) -> list[tuple]:
    """(text, lhs, op, rhs) of each constraint of ``scope`` (op: ``>=``, ``<=`` or ``==``)."""
    return [(text, *_parse_constraint(text, scope)) for text in scope.constraints]


def parse_dims(text: str, scope: SymbolicScope) -> tuple:
    """The dimensions of a comma-separated spec (``"b, 2*b + 1, 4"``; outer parentheses allowed)."""
    stripped = text.strip()
    if stripped.startswith("(") and stripped.endswith(")") and _balanced(stripped[1:-1]):
        stripped = stripped[1:-1]
    p = _Parser(stripped, scope, "shape")
    dims = tuple(p.list_of(p.expr))
    p.done()
    return dims


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses ("b >= 2, max(b, h) <= 8")."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: SymbolicScope | None = None) -> tuple:
    """JAX's ``jax.export.symbolic_shape``: the dimensions that ``shape_spec`` writes.

    >>> b, = jaxprc.export.symbolic_shape("b", constraints=("b >= 2",))
    >>> print(2 * b + 1, b >= 1)                       # b >= 1 follows from the constraint
    2*b + 1 True
    >>> spec = jaxprc.ShapeDtypeStruct((b, 3), jnp.float32)
    >>> print(jaxprc.make_jaxpr(lambda x: jnp.sum(x, axis=1))(spec))
    dims b where b >= 2
    { lambda ; a:f32[b,3]. let b:f32[b] = reduce_sum[axes=(1,)] a in (b,) }
    """
    if scope is not None and constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    if scope is None:
        scope = SymbolicScope(constraints)
    if shape_spec is None:
        return ()
    return parse_dims(shape_spec, scope)


# ---------------------------------------------------- solving at call time

def solve_dim_vars(shapes_and_sizes, scope: SymbolicScope | None) -> dict:
    """Values of the dimension variables from (symbolic shape, concrete shape) pairs.

    A dimension linear in one unknown variable (``b``, ``2*b + 1``) gives that
    variable; the rest are then checked, and so are the scope's constraints.
    Raises ValueError, in one paragraph, when the sizes break a constraint or disagree.
    """
    env: dict = {}
    pending = [(d, n, i, k) for i, (sym, conc) in enumerate(shapes_and_sizes)
               for k, (d, n) in enumerate(zip(sym, conc))]
    progress = True
    while progress:
        progress = False
        for item in list(pending):
            d, n, _, _ = item
            if type(d) is not DimExpr:
                continue
            unknown = d.free_vars() - env.keys()
            if len(unknown) != 1:
                continue
            var, = unknown
            rest, coeff = 0, 0
            for mono, c in d._terms:
                if mono == ((("var", var), 1),):
                    coeff = c
                elif any(a == ("var", var) or var in _atom_free(a) for a, _ in mono):
                    break
                else:
                    rest += c * math.prod(_eval_atom(a, env) ** p for a, p in mono)
            else:
                if coeff and (n - rest) % coeff:
                    _, _, i, k = item
                    raise ValueError(f"Input shapes do not match the symbolic shapes: dimension {k} of "
                                     f"argument {i} is {n}, but its symbolic size '{d}' is never {n}.")
                if coeff:
                    env[var] = (n - rest) // coeff
                    progress = True
    for d, n, i, k in pending:
        try:
            value = evaluate(d, env)
        except KeyError as e:
            raise ValueError(f"Cannot solve for the values of the dimension variables: dimension {k} "
                             f"of argument {i} is '{d}' ({e.args[0]}; a variable must appear alone "
                             "or linearly in some input dimension).") from None
        if value != n:
            where = ", ".join(f"{v} = {env[v]}" for v in sorted(env))
            size = f"its symbolic size '{d}' is {value} at {where}" if type(d) is DimExpr else f"its size is {d}"
            raise ValueError(f"Input shapes do not match the symbolic shapes: dimension {k} of "
                             f"argument {i} is {n}, but {size}.")
    if scope is not None:
        for atom, alias in scope._aliases.items():    # b == 2*h: the types name h, the constraints b
            if atom[0] == "var" and free_vars([alias]) <= env.keys():
                env.setdefault(atom[1], evaluate(alias, env))
        check_constraints(scope, env)
    return env


def _atom_free(atom) -> set:
    out: set = set()
    _atom_vars(atom, out)
    return out


def check_constraints(scope: SymbolicScope, env: dict) -> None:
    """ValueError naming the first constraint that ``env`` breaks (dimension variables are >= 1);
    constraints over variables that ``env`` lacks are left unchecked."""
    for name, value in env.items():
        if value < 1:
            raise ValueError(f"Dimension variable '{name}' must have an integer value >= 1; "
                             f"the arguments give {name} = {value}.")
    for text in scope.constraints:
        lhs, op, rhs = _parse_constraint(text, SymbolicScope())
        if not free_vars([lhs, rhs]) <= env.keys():
            continue      # about variables no argument's shape names
        a, b = evaluate(lhs, env), evaluate(rhs, env)
        if not {">=": a >= b, "<=": a <= b, "==": a == b}[op]:
            where = ", ".join(f"{v} = {env[v]}" for v in sorted(env))
            raise ValueError(f"Input shapes do not satisfy the constraint '{text}': at {where} it "
                             f"reads {a} {op} {b}.")
