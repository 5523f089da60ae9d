"""``jaxprc reduce``: a delta-debugging test-case reducer for IR programs (as C-Reduce or
mlir-reduce).

Given a program and an interestingness test (a function from a program to bool: a user's
command, or a built-in check), the reducer tries smaller programs and keeps the first of each
kind that still verifies and is still interesting, until no move makes progress. The moves,
each over chunks that halve in size (delta debugging):

- *cut*: a chunk of equations is removed, and the values they made become program inputs (a
  failure inside a long chain is cornered in a few halvings);
- *observe*: the program's outputs become the results of a chunk of its equations (what they
  do not need is dropped: the equations after a miscompiled one, say);
- *bypass*: a chunk of equations is removed, each value they made replaced by a same-typed
  operand of its equation (what follows a failing equation goes, its result still used);
- *constants*: a chunk of equations is removed, the values they made become zeros (or ones):
  literals, broadcast for arrays;
- *drop outputs*, *drop unused inputs* (and inputs that become literals), *dce*, *canonicalize*;
- *inside*: bypass and constants applied to the equations of every branch, body and callee,
  recursively (their signatures stay as they are), but a while loop's predicate and what it
  reads (an endless loop is no test case);
- *inline*: an equation holding a sub-jaxpr that types as the equation itself (a cond's
  branch, a call's callee, a while's body: one iteration) is replaced by that sub-jaxpr;
- *extract*: a sub-jaxpr (a branch, a scan body) becomes the whole program (a failure inside a
  loop body that fails outside it too);
- *halve*: a dimension of an input is halved and the program re-traced, each equation's type
  inferred anew (a candidate whose params fix the old shape does not type and is dropped);
- *params*: an equation's integer params shrink (each integer above 1 halved, alone and all at
  once; an element dropped from a tuple: a reduction's axes, a slice's bounds, a window's
  sizes, a scan's length (its scanned inputs follow), the bound a while loop's predicate
  compares its counter with), in the program and in its bodies, and the program is re-traced;
  a candidate that does not type is dropped.

A candidate is kept when it is smaller: fewer equations that compute, then fewer outputs, then
fewer inputs and constants, then fewer input (and constant) elements, then smaller params.
"""
from __future__ import annotations

import functools
import math
import time
from typing import Callable

import numpy as np

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprcError, Literal, ShapedArray, Var
from jaxprc.ir.tracing import JaxprBuilder, Tracer, eval_jaxpr, source_info_of
from jaxprc.ir.verify import verify
from jaxprc.passes import canonicalize, count_equations, dce, emit
from jaxprc.passes.patterns import splat_forms


def _with(cj: ClosedJaxpr, invars=None, outvars=None, eqns=None) -> ClosedJaxpr:
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars if invars is None else invars,
                             j.outvars if outvars is None else outvars, j.eqns if eqns is None else eqns),
                       cj.consts)


def observe(cj: ClosedJaxpr, start: int, stop: int) -> ClosedJaxpr | None:
    """Outputs: the results of equations ``start:stop``, and only what they need (inputs too)."""
    outs = [v for e in cj.jaxpr.eqns[start:stop] for v in e.outvars]
    return drop_unused_inputs(dce(_with(cj, outvars=outs))) if outs else None


def cut(cj: ClosedJaxpr, start: int, stop: int) -> ClosedJaxpr:
    """Equations ``start:stop`` removed; the values they made are new inputs."""
    eqns = cj.jaxpr.eqns
    new_inputs = [v for e in eqns[start:stop] for v in e.outvars]
    return _with(cj, invars=cj.jaxpr.invars + new_inputs, eqns=eqns[:start] + eqns[stop:])


def drop_outputs(cj: ClosedJaxpr, start: int, stop: int) -> ClosedJaxpr | None:
    outs = cj.jaxpr.outvars
    kept = outs[:start] + outs[stop:]
    return dce(_with(cj, outvars=kept)) if kept else None


def drop_unused_inputs(cj: ClosedJaxpr) -> ClosedJaxpr:
    j = cj.jaxpr
    used = {a for e in j.eqns for a in e.invars if type(a) is Var} | {a for a in j.outvars if type(a) is Var}
    return _with(cj, invars=[v for v in j.invars if v in used])


def _rewire(cj: ClosedJaxpr, before: list, builder: JaxprBuilder, rename: dict, after: list) -> ClosedJaxpr:
    """The program ``before + builder's equations + after``, uses renamed by ``rename`` (old
    variable -> variable, tracer or value) in ``after`` and the outputs."""
    atom = lambda o: o._var if type(o) is Tracer else o if type(o) is Var else builder.to_atom(o)
    rename = {v: atom(o) for v, o in rename.items()}
    read = lambda a: rename.get(a, a) if type(a) is Var else a
    j = cj.jaxpr
    later = [e.replace(invars=[read(a) for a in e.invars]) for e in after]
    return ClosedJaxpr(Jaxpr(j.constvars + builder.constvars, j.invars, [read(a) for a in j.outvars],
                             before + builder.eqns + later), list(cj.consts) + builder.consts)


def _splice(cj: ClosedJaxpr, index: int, callee: ClosedJaxpr, operands) -> ClosedJaxpr:
    """Equation ``index`` replaced by the equations of ``callee`` applied to ``operands``."""
    eqns = cj.jaxpr.eqns
    builder = JaxprBuilder("reduce")
    with builder:
        args = [a if type(a) is Literal else Tracer(builder, a) for a in operands]
        outs = eval_jaxpr(callee.jaxpr, callee.consts, *args)
    return _rewire(cj, eqns[:index], builder, dict(zip(eqns[index].outvars, outs)), eqns[index + 1:])


def _constant(aval: ShapedArray, value: int):
    """``value`` as a constant of type ``aval``: a literal, broadcast for arrays."""
    scalar = Literal(value, ShapedArray((), aval.dtype, aval.weak_type))
    return scalar if aval.shape == () else emit.broadcast_in_dim(scalar, aval.shape, ())


def _constants(variables, value: int):
    """A builder holding ``value`` as a constant of each variable's type, and the map from the
    variables to them (None: a type with no such constant, a key or a token)."""
    builder = JaxprBuilder("reduce")
    try:
        with builder:
            return builder, {v: _constant(v.aval, value) for v in variables}
    except (TypeError, ValueError, AttributeError, JaxprcError):
        return None


def stub(cj: ClosedJaxpr, start: int, stop: int, value: int) -> ClosedJaxpr | None:
    """Equations ``start:stop`` removed; the values they made become the constant ``value``
    (the signature is kept, so this also reduces bodies and branches)."""
    eqns = cj.jaxpr.eqns
    made = _constants([v for e in eqns[start:stop] for v in e.outvars], value)
    return None if made is None else _rewire(cj, eqns[:start], *made, eqns[stop:])


def bypass(cj: ClosedJaxpr, start: int, stop: int) -> ClosedJaxpr | None:
    """Equations ``start:stop`` removed; each value they made is replaced by an operand of its
    equation of the same type (what follows a failing equation goes, its result kept in use)."""
    eqns, rename = cj.jaxpr.eqns, {}
    for eqn in eqns[start:stop]:
        operands = [rename.get(a, a) if type(a) is Var else a for a in eqn.invars]
        for v in eqn.outvars:
            same = [a for a in operands if a.aval == v.aval]
            if not same:
                return None
            rename[v] = same[0]
    return _rewire(cj, eqns[:start], JaxprBuilder("reduce"), rename, eqns[stop:])


def constant_inputs(cj: ClosedJaxpr, start: int, stop: int, value: int) -> ClosedJaxpr | None:
    """Inputs ``start:stop`` replaced by the constant ``value``."""
    invars = cj.jaxpr.invars
    made = _constants(invars[start:stop], value)
    if made is None:
        return None
    program = _rewire(cj, [], *made, cj.jaxpr.eqns)
    return _with(program, invars=invars[:start] + invars[stop:])


def inline_candidates(cj: ClosedJaxpr):
    """For each equation holding a sub-jaxpr that types as the equation (on a suffix of its
    operands), the program with it spliced in."""
    for index, eqn in enumerate(cj.jaxpr.eqns):
        outs = [v.aval for v in eqn.outvars]
        for _, sub in _children(eqn):
            n = len(sub.in_avals)
            if sub.out_avals != outs or n > len(eqn.invars):
                continue
            operands = eqn.invars[len(eqn.invars) - n:]
            if [a.aval for a in operands] == sub.in_avals:
                yield functools.partial(_splice, cj, index, sub, operands)


def _halvable(size) -> bool:
    return type(size) is int and size > 1       # a symbolic dimension stays as it is


def halve(cj: ClosedJaxpr, index: int, axis: int) -> ClosedJaxpr | None:
    """The program re-traced with dimension ``axis`` of input ``index`` halved: each equation
    is bound again, so its type is inferred anew (None: an equation does not type, its params
    fixing the old shape, say)."""
    avals = [v.aval for v in cj.jaxpr.invars]
    shape = list(avals[index].shape)
    shape[axis] //= 2
    avals[index] = avals[index].update(shape=tuple(shape))
    builder = JaxprBuilder("reduce")
    try:
        with builder:
            outs = eval_jaxpr(cj.jaxpr, cj.consts, *[builder.new_arg(a) for a in avals])
        return builder.build(outs)
    except (JaxprcError, TypeError, ValueError):
        return None


# Integer params that say how an equation's operands and sub-jaxprs are split: changing one
# re-types nothing and only breaks the equation.
_STRUCTURAL_PARAMS = frozenset({"num_consts", "num_carry", "cond_nconsts", "body_nconsts", "unroll"})
_LOOP_TESTS = frozenset({"lt", "le"})


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _int_param(value) -> bool:
    """An int, or a (nested) tuple of ints, non-empty at every level."""
    if _is_int(value):
        return True
    return isinstance(value, tuple) and bool(value) and all(map(_int_param, value))


def _ints(value) -> list[int]:
    return [int(value)] if _is_int(value) else [i for v in value for i in _ints(v)]


def _halved(value, which=None):
    """``value`` with its ints above 1 halved (only the ``which``-th of them, when given)."""
    counter = iter(range(len(_ints(value))))

    def go(v):
        if _is_int(v):
            k = next(counter)
            return type(v)(v // 2) if v > 1 and which in (None, k) else v
        return tuple(go(x) for x in v)
    return go(value)


def _loop_bounds(eqn) -> list[tuple[int, int]]:
    """For a while loop, (equation, operand) positions in its predicate of the integer literals
    a counter is compared with (``lt i 10``): its trip count."""
    if eqn.primitive.name != "while":
        return []
    cond = eqn.params["cond_jaxpr"].jaxpr
    return [(i, 1) for i, e in enumerate(cond.eqns) if e.primitive.name in _LOOP_TESTS
            and type(e.invars[1]) is Literal and e.invars[1].aval.dtype.kind in "iu" and e.invars[1].val > 1]


def param_candidates(eqn):
    """Smaller versions of ``eqn`` (same operands): each int param halved, a tuple's ints halved
    all together or one at a time or one dropped, a while loop's bound halved."""
    for name, value in eqn.params.items():
        if name in _STRUCTURAL_PARAMS or not _int_param(value):
            continue
        seen, n = [], len(_ints(value))
        options = [_halved(value)] + ([_halved(value, k) for k in range(n)] if n > 1 else [])
        if type(value) is tuple and all(map(_is_int, value)):
            options += [value[:k] + value[k + 1:] for k in range(len(value))]
        for option in options:
            if option != value and option not in seen:
                seen.append(option)
                yield eqn.replace(params={**eqn.params, name: option})
    for i, k in _loop_bounds(eqn):
        cond = eqn.params["cond_jaxpr"]
        test = cond.jaxpr.eqns[i]
        bound = test.invars[k]
        invars = list(test.invars)
        invars[k] = Literal(bound.val // 2, bound.aval)
        eqns = list(cond.jaxpr.eqns)
        eqns[i] = test.replace(invars=invars)
        yield eqn.replace(params={**eqn.params, "cond_jaxpr": _with(cond, eqns=eqns)})


def _scanned_inputs(cj: ClosedJaxpr, eqn) -> dict:
    """For a scan of another length than its scanned operands, the program inputs among them
    retyped to that length (the other operands cannot follow: the candidate will not type)."""
    if eqn.primitive.name != "scan":
        return {}
    length = eqn.params["length"]
    xs = eqn.invars[eqn.params["num_consts"] + eqn.params["num_carry"]:]
    return {v: v.aval.update(shape=(length, *v.aval.shape[1:])) for v in xs
            if type(v) is Var and v in cj.jaxpr.invars and v.aval.shape and v.aval.shape[0] != length}


def retrace(cj: ClosedJaxpr, index: int, eqn) -> ClosedJaxpr | None:
    """``cj`` with equation ``index`` replaced by ``eqn`` and every equation bound again (types
    inferred anew; None: one does not type)."""
    retyped = _scanned_inputs(cj, eqn)
    builder = JaxprBuilder("reduce")
    env = {}
    read = lambda a: a if type(a) is Literal else env[a]
    try:
        with builder:
            for v, x in zip(cj.jaxpr.constvars, cj.consts):
                env[v] = x
            for v in cj.jaxpr.invars:
                env[v] = builder.new_arg(retyped.get(v, v.aval))
            for k, e in enumerate(cj.jaxpr.eqns):
                e = eqn if k == index else e
                with source_info_of(e.source_info):
                    outs = e.primitive.bind(*map(read, e.invars), **e.params)
                env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
            return builder.build([read(a) if type(a) is Var else a.val for a in cj.jaxpr.outvars])
    except (JaxprcError, TypeError, ValueError, IndexError, KeyError):
        return None


def _empty_values(j: Jaxpr) -> int:
    """Values of no elements (a slice's bounds halved to meet, say): no test case wants more."""
    return sum(0 in v.aval.shape for e in j.eqns for v in e.outvars if hasattr(v.aval, "shape")) + sum(
        _empty_values(sub.jaxpr) for e in j.eqns for _, sub in _children(e))


def _param_weight(j: Jaxpr) -> int:
    """How large the params are: their ints (and one per int, so dropping a 0 counts), and
    while loops' bounds, sub-jaxprs' included."""
    weight = 0
    for eqn in j.eqns:
        for name, value in eqn.params.items():
            if name not in _STRUCTURAL_PARAMS and _int_param(value):
                weight += sum(abs(i) + 1 for i in _ints(value))
        cond = eqn.params.get("cond_jaxpr")
        weight += sum(int(cond.jaxpr.eqns[i].invars[k].val) for i, k in _loop_bounds(eqn))
        for _, sub in _children(eqn):
            weight += _param_weight(sub.jaxpr)
    return weight


def _is_constant(eqn) -> bool:
    splat = splat_forms.get(eqn.primitive)
    return splat is not None and type(splat(eqn)) is Literal


def _sizes(j: Jaxpr) -> tuple[int, int]:
    """Equations (sub-jaxprs' included) that compute, and those that make a constant."""
    computing = constant = 0
    for eqn in j.eqns:
        if _is_constant(eqn):
            constant += 1
        else:
            computing += 1
        for _, sub in _children(eqn):
            c, k = _sizes(sub.jaxpr)
            computing, constant = computing + c, constant + k
    return computing, constant


def measure(cj: ClosedJaxpr) -> tuple[int, int, int, int, int]:
    """What the reducer makes smaller: equations that compute, then outputs, then inputs and
    constants (a constant in place of a computation is as good as an input; an input becomes a
    constant only as a literal, or where that folds away), then the elements of the inputs and
    constants, then the params' ints."""
    computing, constant = _sizes(cj.jaxpr)
    values = cj.jaxpr.invars + [v for e in cj.jaxpr.eqns if _is_constant(e) for v in e.outvars]
    elements = sum(math.prod(d for d in v.aval.shape if type(d) is int) for v in values)
    return (computing, len(cj.jaxpr.outvars), len(cj.jaxpr.invars) + constant, elements,
            _param_weight(cj.jaxpr))


def _needs(eqns, outs) -> set:
    """The variables ``outs`` are computed from (``outs`` included)."""
    live = {v for v in outs if type(v) is Var}
    for eqn in reversed(eqns):
        if any(v in live for v in eqn.outvars):
            live |= {a for a in eqn.invars if type(a) is Var}
    return live


def _frozen(eqn, key) -> set[int] | None:
    """Indices of the equations of ``eqn``'s sub-jaxpr at ``key`` that the reducer leaves as
    they are (None: the whole sub-jaxpr). A while loop's predicate, and the body's equations
    that the carries it reads depend on (through other carries too): changing them could make
    the loop endless."""
    if eqn.primitive.name != "while":
        return set()
    if key[0] != "body_jaxpr":
        return None
    cond, body = eqn.params["cond_jaxpr"].jaxpr, eqn.params["body_jaxpr"].jaxpr
    read = _needs(cond.eqns, cond.outvars)
    carries = {k for k, v in enumerate(cond.invars[eqn.params["cond_nconsts"]:]) if v in read}
    while True:
        needed = _needs(body.eqns, [body.outvars[k] for k in carries])
        more = carries | {k for k, v in enumerate(body.invars[eqn.params["body_nconsts"]:]) if v in needed}
        if more == carries:
            return {i for i, e in enumerate(body.eqns) if any(v in needed for v in e.outvars)}
        carries = more


def frozen_at(cj: ClosedJaxpr, path: tuple) -> set[int] | None:
    """The equations of the sub-jaxpr at ``path`` that the reducer leaves as they are."""
    if not path:
        return set()
    i, key = path[-1]
    return _frozen(at(cj, path[:-1]).jaxpr.eqns[i], key)


def _children(eqn):
    """``(key, sub)`` for the ClosedJaxprs among an equation's params; key is (name, position)."""
    for name, value in eqn.params.items():
        if isinstance(value, ClosedJaxpr):
            yield (name, None), value
        elif isinstance(value, tuple):
            for k, sub in enumerate(value):
                if isinstance(sub, ClosedJaxpr):
                    yield (name, k), sub


def children_paths(cj: ClosedJaxpr, path: tuple = ()) -> list[tuple]:
    """Paths (from ``path``) to the sub-jaxprs one level below ``at(cj, path)`` that are reduced."""
    frozen = frozen_at(cj, path)
    return [path + ((i, key),) for i, eqn in enumerate(at(cj, path).jaxpr.eqns) if i not in frozen
            for key, _ in _children(eqn) if _frozen(eqn, key) is not None]


def all_paths(cj: ClosedJaxpr, path: tuple = ()) -> list[tuple]:
    """Paths to every reduced sub-jaxpr, outermost first."""
    return [p for child in children_paths(cj, path) for p in (child, *all_paths(cj, child))]


def at(cj: ClosedJaxpr, path: tuple) -> ClosedJaxpr:
    """The sub-jaxpr at ``path``, a sequence of (equation index, (param name, position))."""
    for i, (name, k) in path:
        value = cj.jaxpr.eqns[i].params[name]
        cj = value if k is None else value[k]
    return cj


def replace_at(cj: ClosedJaxpr, path: tuple, sub: ClosedJaxpr) -> ClosedJaxpr:
    """``cj`` with the sub-jaxpr at ``path`` replaced by ``sub``."""
    if not path:
        return sub
    (i, (name, k)), rest = path[0], path[1:]
    eqns = list(cj.jaxpr.eqns)
    value = eqns[i].params[name]
    inner = replace_at(value if k is None else value[k], rest, sub)
    value = inner if k is None else value[:k] + (inner,) + value[k + 1:]
    eqns[i] = eqns[i].replace(params={**eqns[i].params, name: value})
    return _with(cj, eqns=eqns)


def inside(path: tuple, move: Callable) -> Callable:
    """``move(sub, start, stop)`` applied to the sub-jaxpr at ``path`` (then dead code dropped)."""
    def moved(cj, start, stop):
        if frozen_at(cj, path) & set(range(start, stop)):
            return None
        sub = move(at(cj, path), start, stop)
        return None if sub is None else replace_at(cj, path, dce(sub))
    return moved


PARAMS_LIMIT = 100


class Reducer:
    """Delta debugging of ``program`` against ``interesting(program) -> bool``."""

    def __init__(self, interesting: Callable[[ClosedJaxpr], bool], progress: Callable[[str], None] | None = None):
        self.interesting, self.progress = interesting, progress
        self.tests = 0
        self.start = time.perf_counter()

    def _say(self, what: str, cj: ClosedJaxpr) -> None:
        if self.progress is not None:
            self.progress(f"reduce: {count_equations(cj)} equations after {what} "
                          f"({self.tests} tests, {time.perf_counter() - self.start:.1f}s)")

    def accepts(self, candidate: ClosedJaxpr | None) -> bool:
        """Whether the candidate verifies and is still interesting."""
        if candidate is None:
            return False
        try:
            verify(candidate)
        except JaxprcError:
            return False
        self.tests += 1
        return bool(self.interesting(candidate))

    def chunks(self, cj: ClosedJaxpr, size: Callable, moves: list[tuple[Callable, str]]) -> ClosedJaxpr:
        """Apply each ``move(cj, start, stop)`` over chunks of ``size(cj)`` items, keeping the
        candidates that pass; the chunk length halves once no move makes progress at it (the
        moves take turns at each length, so one that cannot shrink a part (cutting the
        equations after a miscompiled one) costs few tests before another can)."""
        chunk = max(size(cj) // 2, 1)
        while chunk >= 1 and size(cj):
            for move, what in moves:
                i = 0
                while i < size(cj):
                    candidate = move(cj, i, min(i + chunk, size(cj)))
                    if candidate is not None and measure(candidate) < measure(cj) and self.accepts(candidate):
                        cj = candidate
                        self._say(f"{what} ({chunk} at a time)", cj)
                    else:
                        i += chunk
            chunk //= 2
        return cj

    def reduce_inside(self, cj: ClosedJaxpr, path: tuple = ()) -> ClosedJaxpr:
        """Bypass chunks of equations, or make their results constants, in each sub-jaxpr below
        ``path``, depth first (a change inside one sub-jaxpr leaves its siblings' paths as
        they were)."""
        for child in children_paths(cj, path):
            moves = [(inside(child, bypass), "bypass in a body")]
            moves += [(inside(child, lambda sub, i, j, value=value: stub(sub, i, j, value)), f"{value}s in a body")
                      for value in (0, 1)]
            cj = self.chunks(cj, lambda p: len(at(p, child).jaxpr.eqns), moves)
            cj = self.reduce_inside(cj, child)
        return cj

    def shrink_shapes(self, cj: ClosedJaxpr) -> ClosedJaxpr:
        """Halve each dimension of each input while the program still types and is interesting."""
        for index in range(len(cj.jaxpr.invars)):
            for axis in range(len(cj.jaxpr.invars[index].aval.shape)):
                while _halvable(cj.jaxpr.invars[index].aval.shape[axis]):
                    candidate = halve(cj, index, axis)
                    if candidate is None or not self.accepts(candidate):
                        break
                    cj = candidate
                    self._say("halving a dimension", cj)
        return cj

    def shrink_params(self, cj: ClosedJaxpr) -> ClosedJaxpr:
        """Shrink each equation's params (in the program and its bodies), while it still types
        and is interesting. Only on programs of at most ``PARAMS_LIMIT`` equations: each
        candidate re-traces the program."""
        if count_equations(cj) > PARAMS_LIMIT:
            return cj
        for path in [(), *all_paths(cj)]:
            frozen = frozen_at(cj, path)
            index = -1
            while (index := index + 1) < len(at(cj, path).jaxpr.eqns):
                if index in frozen:
                    continue
                progress = True
                while progress:
                    progress = False
                    for eqn in param_candidates(at(cj, path).jaxpr.eqns[index]):
                        sub = retrace(at(cj, path), index, eqn)
                        candidate = None if sub is None else replace_at(cj, path, sub)
                        if (candidate is not None and measure(candidate) < measure(cj)
                                and _empty_values(candidate.jaxpr) <= _empty_values(cj.jaxpr)
                                and self.accepts(candidate)):
                            cj, progress = candidate, True
                            self._say(f"shrinking the params of {eqn.primitive.name}", cj)
                            break
        return cj

    def reduce(self, cj: ClosedJaxpr, max_rounds: int = 20) -> ClosedJaxpr:
        if not self.accepts(cj):
            raise ValueError("the input program is not interesting: the test fails on it as it is")
        n_eqns = lambda p: len(p.jaxpr.eqns)
        n_ins = lambda p: len(p.jaxpr.invars)
        for _ in range(max_rounds):
            before = str(cj)
            cj = self.chunks(cj, n_eqns, [(cut, "cut"), (observe, "observe")])
            # Then (on what is left, for few tests) the moves that keep the values in the program.
            cj = self.chunks(cj, n_eqns, [(bypass, "bypass"), (lambda p, i, j: stub(p, i, j, 0), "zeros"),
                                          (lambda p, i, j: stub(p, i, j, 1), "ones")])
            cj = self.chunks(cj, lambda p: len(p.jaxpr.outvars), [(drop_outputs, "drop outputs")])
            cj = self.reduce_inside(cj)
            for move, what in ((dce, "dce"), (drop_unused_inputs, "drop unused inputs"), (canonicalize, "canonicalize")):
                candidate = move(cj)
                if measure(candidate) < measure(cj) and self.accepts(candidate):
                    cj = candidate
                    self._say(what, cj)
            cj = self.chunks(cj, n_ins, [(lambda p, i, j: constant_inputs(p, i, j, 0), "zero inputs"),
                                         (lambda p, i, j: constant_inputs(p, i, j, 1), "one inputs")])
            extracted = [functools.partial(at, cj, path) for path in all_paths(cj)]
            for make in [*inline_candidates(cj), *extracted]:
                candidate = make()
                if measure(candidate) < measure(cj) and self.accepts(candidate):
                    cj = candidate
                    self._say("inline or extract", cj)
                    break
            cj = self.shrink_shapes(cj)
            cj = self.shrink_params(cj)
            if str(cj) == before:
                break
        return cj
