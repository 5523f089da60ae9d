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
- *drop outputs*, *drop unused inputs*, *dce*, *canonicalize*;
- *inline*: an equation holding a sub-jaxpr that types as the equation itself (a cond's
  branch, a call's callee, a while's body: one iteration) is replaced by that sub-jaxpr.

Not done (yet): reducing inside sub-jaxprs, shrinking shapes and params.
"""
from __future__ import annotations

import time
from typing import Callable

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprcError, Literal, Var
from jaxprc.ir.tracing import JaxprBuilder, Tracer, eval_jaxpr
from jaxprc.ir.verify import verify
from jaxprc.passes import canonicalize, count_equations, dce


def _with(cj: ClosedJaxpr, invars=None, outvars=None, eqns=None) -> ClosedJaxpr:
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars if invars is None else invars,
                             j.outvars if outvars is None else outvars, j.eqns if eqns is None else eqns),
                       cj.consts)


def observe(cj: ClosedJaxpr, start: int, stop: int) -> ClosedJaxpr | None:
    """Outputs: the results of equations ``start:stop``, and only what they need."""
    outs = [v for e in cj.jaxpr.eqns[start:stop] for v in e.outvars]
    return dce(_with(cj, outvars=outs)) if outs else None


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


def _splice(cj: ClosedJaxpr, index: int, callee: ClosedJaxpr, operands) -> ClosedJaxpr:
    """Equation ``index`` replaced by the equations of ``callee`` applied to ``operands``."""
    j = cj.jaxpr
    eqn = j.eqns[index]
    builder = JaxprBuilder("reduce")
    with builder:
        args = [a if type(a) is Literal else Tracer(builder, a) for a in operands]
        outs = eval_jaxpr(callee.jaxpr, callee.consts, *args)
    rename = {}
    for v, o in zip(eqn.outvars, outs):
        rename[v] = o._var if type(o) is Tracer else builder.to_atom(o)
    read = lambda a: rename.get(a, a) if type(a) is Var else a
    later = [e.replace(invars=[read(a) for a in e.invars]) for e in j.eqns[index + 1:]]
    return ClosedJaxpr(Jaxpr(j.constvars + builder.constvars, j.invars, [read(a) for a in j.outvars],
                             j.eqns[:index] + builder.eqns + later), list(cj.consts) + builder.consts)


def inline_candidates(cj: ClosedJaxpr):
    """For each equation holding a sub-jaxpr that types as the equation (on a suffix of its
    operands), the program with it spliced in."""
    for index, eqn in enumerate(cj.jaxpr.eqns):
        outs = [v.aval for v in eqn.outvars]
        for value in eqn.params.values():
            for sub in (value if isinstance(value, tuple) else (value,)):
                if not isinstance(sub, ClosedJaxpr) or sub.out_avals != outs:
                    continue
                n = len(sub.in_avals)
                operands = eqn.invars[len(eqn.invars) - n:] if n <= len(eqn.invars) else None
                if operands is not None and [a.aval for a in operands] == sub.in_avals:
                    yield lambda index=index, sub=sub, operands=operands: _splice(cj, index, sub, operands)


def measure(cj: ClosedJaxpr) -> tuple[int, int, int]:
    """What the reducer makes smaller: equations, then outputs, then inputs."""
    return count_equations(cj), len(cj.jaxpr.outvars), len(cj.jaxpr.invars)


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

    def reduce(self, cj: ClosedJaxpr, max_rounds: int = 20) -> ClosedJaxpr:
        if not self.accepts(cj):
            raise ValueError("the input program is not interesting: the test fails on it as it is")
        n_eqns = lambda p: len(p.jaxpr.eqns)
        for _ in range(max_rounds):
            before = str(cj)
            cj = self.chunks(cj, n_eqns, [(cut, "cut"), (observe, "observe")])
            cj = self.chunks(cj, lambda p: len(p.jaxpr.outvars), [(drop_outputs, "drop outputs")])
            for move, what in ((dce, "dce"), (drop_unused_inputs, "drop unused inputs"), (canonicalize, "canonicalize")):
                candidate = move(cj)
                if measure(candidate) < measure(cj) and self.accepts(candidate):
                    cj = candidate
                    self._say(what, cj)
            for make in inline_candidates(cj):
                candidate = make()
                if measure(candidate) < measure(cj) and self.accepts(candidate):
                    cj = candidate
                    self._say("inline", cj)
                    break
            if str(cj) == before:
                break
        return cj
