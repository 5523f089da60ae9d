"""Rewrite patterns: declarative matches on equations, applied by one greedy driver.

A pattern matches an equation by its primitive, its params and the equations that produce
its operands (nested, with bindings, like MLIR's declarative rewrites), and its rewrite
builds the replacement by applying primitives to the bound values::

    from jaxprc.passes.patterns import Pat, Splat, pattern

    @pattern("my_rules", Pat(negate, Pat(negate, "x")))     # negate: a Primitive of the user's
    def _double_negation(x):
        return x

Operands of a ``Pat`` are: a name (binds the operand; a name used twice must bind the same
value), ``"_"`` (anything), a nested ``Pat`` (the operand is the result of an equation it
matches), or ``Splat(value)`` (a constant with every element bitwise equal to ``value``).
Params are matched by equality, or bound with ``bind("name")``; ``as_="name"`` binds the
matched equation itself; a last operand ``"*name"`` binds the remaining operands (a list,
maybe empty), ``...`` accepts them unnamed. ``commute=True`` tries a binary equation's operands both ways.

The rewrite gets the bindings as keyword arguments: operands as values it may pass to
primitives (tracers, or ``Literal``\\ s), and returns the replacement (a list for primitives
with several results), or None to decline. A result whose type differs from the replaced
value's only by its weak type declines too (weak types are part of a program's meaning);
any other type change is a ``PatternError`` naming the pattern. New equations take the
location of the equation they replace.

Patterns are registered in named sets (``register_pattern`` or the ``pattern`` decorator);
the ``rewrite`` pass runs a set to a fixed point: ``jaxprc opt --passes 'rewrite:set=NAME'``.
The driver replays the program, applying the first pattern of the set that matches each
equation (sub-jaxprs first), and repeats while anything changed.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jaxprc.ir.core import ClosedJaxpr, Eqn, Jaxpr, JaxprcError, Literal, Primitive, Var
from jaxprc.ir.effects import eqn_effects
from jaxprc.ir.tracing import JaxprBuilder, Tracer, no_trace, replayed_sources

from .registry import PipelineError, map_subjaxprs, register_pass


class PatternError(JaxprcError):
    """A pattern's rewrite raised, or replaced a value by one of another type."""


class bind:
    """In a ``Pat``'s params: bind the param's value to ``name`` instead of comparing it."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class Splat:
    """An operand that is a constant with every element equal to ``value`` (bitwise, in the
    operand's dtype: ``Splat(-0.0)`` does not match ``0.0``); ``value=None``: any such constant.
    ``name`` binds the element (a numpy scalar).

    Constants are literals, known constant arrays, and the results of primitives registered in
    ``splat_forms`` (a broadcast of a literal) applied to constants."""

    __slots__ = ("value", "name")

    def __init__(self, value=None, name: str | None = None):
        self.value, self.name = value, name


# primitive -> fn(eqn) -> the operand whose one element fills the result (or None): the
# families register the primitives that fill an array with one value (broadcast_in_dim).
splat_forms: dict[Primitive, Callable[[Eqn], Any]] = {}


class Pat:
    """Matches an equation of ``primitive``; see the module docstring."""

    def __init__(self, primitive: Primitive, *operands, as_: str | None = None, commute: bool = False,
                 **params):
        self.primitive, self.operands, self.params = primitive, operands, params
        self.as_, self.commute = as_, commute
        last = operands[-1] if operands else None
        self.rest = last[1:] if isinstance(last, str) and last.startswith("*") else None
        self.variadic = last is Ellipsis or self.rest is not None
        if self.variadic:
            self.operands = operands[:-1]
        if commute and (len(self.operands) != 2 or self.variadic):
            raise ValueError("Pat(commute=True) is for equations of exactly two operands")

    def __repr__(self):
        ops = [repr(o) if isinstance(o, Pat) else str(o) for o in self.operands]
        return f"{self.primitive.name}({', '.join(ops)}{', ...' if self.variadic else ''})"


class Pattern:
    """A registered pattern: ``root`` to match, ``rewrite`` to build the replacement."""

    def __init__(self, name: str, root: Pat, rewrite: Callable):
        self.name, self.root, self.rewrite = name, root, rewrite

    def __repr__(self):
        return f"Pattern({self.name}: {self.root!r})"


# set name -> primitive -> its patterns, tried in registration order
PATTERN_SETS: dict[str, dict[Primitive, list[Pattern]]] = {}


def register_pattern(set_name: str, root: Pat, rewrite: Callable, name: str | None = None) -> Pattern:
    """Add a pattern to the set ``set_name`` (created on first use)."""
    if not isinstance(root, Pat):
        raise TypeError(f"register_pattern: the pattern must be a Pat, got {root!r}")
    p = Pattern(name or getattr(rewrite, "__name__", repr(root)), root, rewrite)
    PATTERN_SETS.setdefault(set_name, {}).setdefault(root.primitive, []).append(p)
    return p


def pattern(set_name: str, root: Pat, name: str | None = None):
    """Decorator form of ``register_pattern``: ``@pattern("set", Pat(...))`` over the rewrite."""
    def register(rewrite):
        register_pattern(set_name, root, rewrite, name)
        return rewrite
    return register


def pattern_set(names: str | Sequence[str]) -> dict[Primitive, list[Pattern]]:
    """The patterns of one set, or of several (a tuple of names, or names joined by '+')."""
    names = names.split("+") if isinstance(names, str) else list(names)
    merged: dict[Primitive, list[Pattern]] = {}
    for n in names:
        if n not in PATTERN_SETS:
            raise PipelineError(f"no pattern set named {n!r}; the sets are: "
                                f"{', '.join(sorted(PATTERN_SETS)) or '(none)'}")
        for prim, pats in PATTERN_SETS[n].items():
            merged.setdefault(prim, []).extend(pats)
    return merged


# ------------------------------------------------------------------ matching

SPLAT_LIMIT = 1 << 16     # constants larger than this are not read to find a splat


class _Replay:
    """A program being rebuilt equation by equation: what matching may ask about its values."""

    def __init__(self, builder: JaxprBuilder, fold_limit: int, allow_consts: bool):
        self.builder, self.fold_limit, self.allow_consts = builder, fold_limit, allow_consts
        self.changed = False

    def producer(self, atom) -> Eqn | None:
        return self.builder._producer.get(atom) if type(atom) is Var else None

    def constant(self, atom, limit: int | None = None):
        """The value of a constant operand (a literal, or a known constant of at most ``limit``
        elements), else None."""
        if type(atom) is Literal:
            return np.asarray(atom.val)
        value = self.builder.known.get(atom) if type(atom) is Var else None
        if value is None or isinstance(value, Tracer) or (limit is not None and atom.aval.size > limit):
            return None
        return np.asarray(value)

    def splat(self, atom, depth: int = 0):
        """The one element of a constant operand whose elements are all equal, else None."""
        if type(atom) is Literal:
            return np.asarray(atom.val)
        value = self.constant(atom, SPLAT_LIMIT)
        if value is not None:
            flat = value.reshape(-1)
            if flat.size and (flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)).all():
                return flat[0]
            return None
        eqn = self.producer(atom)
        form = splat_forms.get(eqn.primitive) if eqn is not None and depth < 8 else None
        inner = form(eqn) if form is not None else None
        return None if inner is None else self.splat(inner, depth + 1)

    def value(self, atom):
        """What a rewrite receives for an operand: a tracer of the program, or the literal."""
        return atom if type(atom) is Literal else Tracer(self.builder, atom)

    def match(self, pat: Pat, eqn: Eqn, env: dict) -> bool:
        if eqn.primitive is not pat.primitive:
            return False
        for key, want in pat.params.items():
            if key not in eqn.params:
                return False
            if isinstance(want, bind):
                if not self._bind(env, want.name, ("param", eqn.params[key])):
                    return False
            elif not _same_param(eqn.params[key], want):
                return False
        if pat.as_ is not None and not self._bind(env, pat.as_, ("eqn", eqn)):
            return False
        n = len(pat.operands)
        if len(eqn.invars) != n and not (pat.variadic and len(eqn.invars) >= n):
            return False
        orders = [eqn.invars[:n]]
        if pat.commute:
            orders.append(eqn.invars[1::-1])
        for operands in orders:
            trial = dict(env)
            if pat.rest is not None and not self._bind(trial, pat.rest, ("atoms", tuple(eqn.invars[n:]))):
                continue
            if all(self.match_operand(p, a, trial) for p, a in zip(pat.operands, operands)):
                env.clear()
                env.update(trial)
                return True
        return False

    def match_operand(self, p, atom, env: dict) -> bool:
        if isinstance(p, str):
            return p == "_" or self._bind(env, p, ("atom", atom))
        if isinstance(p, Pat):
            eqn = self.producer(atom)
            return eqn is not None and self.match(p, eqn, env)
        if isinstance(p, Splat):
            element = self.splat(atom)
            if element is None or (p.value is not None and not _bitwise_equal(element, p.value)):
                return False
            return p.name is None or self._bind(env, p.name, ("param", element))
        raise TypeError(f"a pattern operand must be a name, '_', a Pat or a Splat, got {p!r}")

    @staticmethod
    def _bind(env: dict, name: str, entry) -> bool:
        """Bind ``name``; bound already, the two must agree (the same value)."""
        old = env.setdefault(name, entry)
        if old is entry:
            return True
        if old[0] != entry[0]:
            return False
        if old[0] == "param":
            return _same_param(old[1], entry[1])
        if old[0] == "atoms":
            return old[1] == entry[1]
        return old[1] is entry[1] or (type(old[1]) is Literal and old[1] == entry[1])


def _bitwise_equal(element: np.generic, value) -> bool:
    """Whether ``element`` is ``value`` in its dtype, bit for bit (1.5 is no integer's value)."""
    with np.errstate(all="ignore"):
        try:
            want = np.asarray(value).astype(element.dtype)
        except (TypeError, ValueError, OverflowError):
            return False
        if want.astype(np.asarray(value).dtype).tobytes() != np.asarray(value).tobytes():
            return False
    return np.asarray(element).tobytes() == want.tobytes()


def _same_param(have, want) -> bool:
    try:
        return bool(have == want)
    except Exception:  # noqa: BLE001 -- params that do not compare (arrays) do not match
        return False


# ------------------------------------------------------------------- driver

def _bindings_for(replay: _Replay, env: dict) -> dict:
    values = {"atom": replay.value, "atoms": lambda atoms: [replay.value(a) for a in atoms]}
    return {name: values[kind](v) if kind in values else v for name, (kind, v) in env.items()}


def _as_atoms(replay: _Replay, result, eqn: Eqn, pat: Pattern):
    """The rewrite's result as atoms of the program, or None when it declined."""
    outs = list(result) if eqn.primitive.multiple_results else [result]
    if len(outs) != len(eqn.outvars):
        raise PatternError(f"pattern {pat.name!r} returned {len(outs)} values for the "
                           f"{len(eqn.outvars)} results of {eqn.primitive.name}")
    atoms = []
    for x, v in zip(outs, eqn.outvars):
        atom = x if type(x) in (Var, Literal) else replay.builder.to_atom(x)
        have, want = atom.aval, v.aval
        if have != want:
            if have.shape == want.shape and have.dtype == want.dtype:
                return None                  # differs only by weak type: decline
            raise PatternError(f"pattern {pat.name!r} replaced a value of type {want.str_short()} "
                               f"by one of type {have.str_short()}")
        atoms.append(atom)
    return atoms


def _try_patterns(replay: _Replay, eqn: Eqn, patterns: list[Pattern]):
    builder = replay.builder
    for pat in patterns:
        env: dict = {}
        if not replay.match(pat.root, eqn, env):
            continue
        n_eqns, n_consts = len(builder.eqns), len(builder.consts)
        try:
            result = pat.rewrite(**_bindings_for(replay, env))
            atoms = None if result is None else _as_atoms(replay, result, eqn, pat)
        except PatternError:
            raise
        except Exception as e:
            raise PatternError(f"pattern {pat.name!r} failed on {eqn}: {type(e).__name__}: {e}") from e
        if atoms is not None and (replay.allow_consts or len(builder.consts) == n_consts):
            return atoms
        del builder.eqns[n_eqns:]                   # declined: drop what it emitted
        del builder.consts[n_consts:], builder.constvars[n_consts:]
    return None


# Primitives never evaluated at compile time even on constant operands (they draw state).
fold_exempt: set[Primitive] = set()


def _fold(replay: _Replay, eqn: Eqn):
    """The results of ``eqn`` computed now, when its operands are constants and its results
    small: scalars become literals, arrays constants (never from literals alone: a literal
    broadcast is already as small as a program can say it)."""
    limit, known = replay.fold_limit, replay.builder.known
    if limit <= 0 or any(type(a) is Var and a not in known for a in eqn.invars):
        return None                 # (the common case, decided first: an operand not constant)
    if (eqn.primitive in fold_exempt or eqn_effects(eqn)
            or any(isinstance(p, (ClosedJaxpr, Jaxpr, tuple)) and _holds_jaxpr(p) for p in eqn.params.values())
            or any(v.aval.size > limit for v in eqn.outvars)):
        return None
    values = [replay.constant(a, limit) for a in eqn.invars]
    if any(v is None for v in values):
        return None
    if not any(type(a) is Var for a in eqn.invars) and any(v.aval.shape for v in eqn.outvars):
        return None
    if not replay.allow_consts and any(v.aval.shape for v in eqn.outvars):
        return None
    args = [a.val if type(a) is Literal else v for a, v in zip(eqn.invars, values)]
    try:
        with no_trace():
            outs = eqn.primitive.bind(*args, **eqn.params)
    except Exception:  # noqa: BLE001 -- what fails now fails when the program runs: leave it there
        return None
    outs = outs if eqn.primitive.multiple_results else [outs]
    atoms = []
    for out, v in zip(outs, eqn.outvars):
        value = np.asarray(out)
        if value.shape != v.aval.shape or value.dtype != v.aval.dtype:
            return None
        if not v.aval.shape:
            atoms.append(Literal(value[()], v.aval))
            continue
        const = Var(v.aval)
        replay.builder.constvars.append(const)
        replay.builder.consts.append(value)
        replay.builder.known[const] = value
        atoms.append(const)
    return atoms


def _holds_jaxpr(p) -> bool:
    return isinstance(p, (ClosedJaxpr, Jaxpr)) or (isinstance(p, tuple) and any(map(_holds_jaxpr, p)))


def rewrite_jaxpr(cj: ClosedJaxpr, patterns: dict[Primitive, list[Pattern]], *, fold_limit: int = 0,
                  allow_consts: bool = True) -> tuple[ClosedJaxpr, bool]:
    """One sweep of the driver over ``cj`` (and its sub-jaxprs): each equation is replaced by
    the first matching pattern's rewrite, or folded (``fold_limit``: the largest constant, in
    elements, folding reads or makes; 0: no folding). Returns the program and whether it
    changed. ``allow_consts=False`` (sub-jaxprs): no rewrite may add a constant array."""
    j = cj.jaxpr
    builder = JaxprBuilder("rewrite")
    replay = _Replay(builder, fold_limit, allow_consts)
    builder.invars = list(j.invars)
    builder.constvars, builder.consts = list(j.constvars), list(cj.consts)
    builder.known = {v: c for v, c in zip(j.constvars, cj.consts)
                     if c is not None and not isinstance(c, Tracer)}
    env: dict[Var, Any] = {}
    read = lambda a: env.get(a, a) if type(a) is Var else a

    def sub(inner: ClosedJaxpr) -> ClosedJaxpr:
        new, changed = rewrite_jaxpr(inner, patterns, fold_limit=fold_limit, allow_consts=False)
        replay.changed |= changed
        return new

    with builder, replayed_sources() as location:
        for eqn in j.eqns:
            params = map_subjaxprs(eqn.params, sub) if eqn.params else eqn.params
            eqn = eqn.replace(invars=[read(a) for a in eqn.invars], params=params)
            location.source = eqn.source_info
            candidates = patterns.get(eqn.primitive)
            outs = _try_patterns(replay, eqn, candidates) if candidates else None
            if outs is None:
                outs = _fold(replay, eqn)
            if outs is None:
                builder.eqns.append(eqn)
                builder._producer.update((v, eqn) for v in eqn.outvars)
                continue
            replay.changed = True
            env.update(zip(eqn.outvars, outs))
    out = Jaxpr(builder.constvars, builder.invars, [read(a) for a in j.outvars], builder.eqns)
    return ClosedJaxpr(out, builder.consts), replay.changed


def apply_patterns(cj: ClosedJaxpr, patterns: dict[Primitive, list[Pattern]], *, fold_limit: int = 0,
                   max_iterations: int = 20) -> ClosedJaxpr:
    """Sweep until nothing changes (at most ``max_iterations`` sweeps)."""
    for _ in range(max_iterations):
        cj, changed = rewrite_jaxpr(cj, patterns, fold_limit=fold_limit)
        if not changed:
            break
    return cj


def rewrite(cj: ClosedJaxpr, set: str | tuple = "canonicalize", max_iterations: int = 20) -> ClosedJaxpr:  # noqa: A002
    """The pass: run the pattern set ``set`` (a name, names joined by '+', or a tuple of
    names) to a fixed point; no folding, no clean-up (add ``dce`` after it)."""
    return apply_patterns(cj, pattern_set(set), max_iterations=max_iterations)


register_pass("rewrite", rewrite)
