"""Evaluate a transformed program in the current context.

Transformations (``vmap``, ``grad``, ``jvp``, ...) trace a function, rewrite
its jaxpr with passes and then run the result where they were called:

- inside a trace (``jit``, an outer transformation) the program is inlined
  into that trace, which is how transformations compose;
- at top level it is compiled once per program structure and run as one
  executable. Structurally equal programs (``ClosedJaxpr.__eq__``/``__hash__``,
  alpha-equivalence, binder types included, so the input avals are part of the
  key) share one executable, so calling ``vmap(f)(x)`` again re-traces but
  does not re-compile. Consts become leading arguments, so programs that only
  differ in the values they captured (residuals, closures) share it too, and
  custom-derivative calls count as calls of their primal function (their rules
  are new objects on every trace);
- a program with a top-level primitive that has an impl but no lowering for
  the backend (a user primitive defined with ``def_impl`` only) runs op by op,
  each equation through its impl, as it would without the transformation.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

from .. import runtime
from ..ir.core import ClosedJaxpr, Eqn, Jaxpr
from ..ir.effects import Effect
from ..ir.tracing import close_over_consts, current_builder, eval_jaxpr
from ..lax.call import jit_p
from ..lax.custom_derivatives import as_primal_call
from .dispatch import put_on_device
from .lowering import canonical_platform, find_lowering_rule
from ..passes.registry import map_subjaxprs

__all__ = ["evaluate_jaxpr"]

# canonical program -> itself: the `jit` primitive's impl keeps one executable
# per canonical object, alive as long as the entry here.
_PROGRAMS: dict[ClosedJaxpr, ClosedJaxpr] = {}
_MAX_PROGRAMS = 1024   # oldest entries go first, which frees their executables
_PROGRAMS_LOCK = threading.Lock()   # the lookup, eviction and insertion, as one step

def evaluate_jaxpr(closed_jaxpr: ClosedJaxpr, args: Sequence[Any], name: str = "evaluate") -> list:
    """Run ``closed_jaxpr`` on ``args`` here: inlined inside a trace, compiled once at top level.

    Returns the list of outputs (device Arrays at top level).
    """
    if current_builder() is not None:
        return eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
    program, consts = close_over_consts(_primal_only(closed_jaxpr))
    args = [*consts, *args]
    canonical = _PROGRAMS.get(program)
    if canonical is None:
        if not _lowerable(program):
            return [put_on_device(x) for x in eval_jaxpr(program.jaxpr, [], *args)]
        canonical = _canonical(program)
    return list(jit_p.bind(*args, jaxpr=canonical, name=name))


def _canonical(program: ClosedJaxpr) -> ClosedJaxpr:
    """The one object standing for programs equal to ``program``, entered if there is none."""
    with _PROGRAMS_LOCK:
        canonical = _PROGRAMS.get(program)
        if canonical is None:
            if len(_PROGRAMS) >= _MAX_PROGRAMS:
                del _PROGRAMS[next(iter(_PROGRAMS))]
            canonical = _PROGRAMS[program] = program
        return canonical


def _primal_only(cj: ClosedJaxpr) -> ClosedJaxpr:
    """``cj`` with custom-derivative calls turned into plain calls of their primal function.

    At top level nothing differentiates the program any more, and the lowering
    runs only the primal function anyway. The rules (thunks, Python callables)
    are new objects on every trace and comparing them would run user code, so
    without this equal programs would not share an executable.
    """
    eqns = [_primal_eqn(e) for e in cj.jaxpr.eqns]
    if all(new is old for new, old in zip(eqns, cj.jaxpr.eqns)):
        return cj
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.outvars, eqns), cj.consts)


def _primal_eqn(e: Eqn) -> Eqn:
    call = as_primal_call(e, _primal_only)
    if call is not None:
        return call
    params = map_subjaxprs(e.params, _primal_only)
    return e if all(params[k] is v for k, v in e.params.items()) else e.replace(params=params)


_UNORDERED = frozenset({Effect.debug, Effect.io})


def _lowerable(program: ClosedJaxpr) -> bool:
    """False when a top-level equation can only run through its impl on this backend.

    Sub-jaxprs (cond branches, loop bodies, nested jit) are not looked at: their
    primitives are lowered even when evaluated op by op, so running the outer
    program op by op would not help them.
    """
    platform = canonical_platform(runtime.default_backend())
    if any(Effect.check in e.effects for e in program.jaxpr.eqns):
        return False     # a checkify.check raises where it runs (eager vmap of a check, as JAX)
    if sum(any(_UNORDERED & e.effects) for e in program.jaxpr.eqns) > 1:
        return False     # XLA may reorder unordered callbacks; eagerly JAX runs them in program order
    return not any(prim.impl_rule is not None and find_lowering_rule(prim, platform) is None
                   for prim in {e.primitive for e in program.jaxpr.eqns})
