"""How the transformations' front ends run the program a pass made of the user's function:
``simplified`` (dce, cse), then ``evaluate``d where they are called (inlined into an enclosing
trace, compiled once at top level); ``without_gc`` wraps every eager transformation's entry
(cyclic garbage collection paused, deep recursion retried on a large stack)."""
from __future__ import annotations

import functools
import gc
import threading
from typing import Any, Sequence

from ..engine.evaluate import evaluate_jaxpr
from ..ir.core import ClosedJaxpr, Eqn, Var
from ..ir.deep import deep_entry
from ..ir.tracing import JaxprBuilder, Tracer, _outside_any_trace, current_builder, get_aval
from ..passes.dce import dce_closed
from ..passes.jvp import literal_value
from ..passes.registry import run_pipeline, verify_pass_result

__all__ = ["evaluate", "simplified", "without_gc", "gc_paused", "splice", "spliceable"]


def evaluate(cj: ClosedJaxpr, args: Sequence[Any], name: str) -> list:
    """Run ``cj`` on ``args`` here: inline inside a trace, compiled once at top level."""
    builder = current_builder()
    if builder is not None and spliceable(cj, args):
        return splice(builder, cj, args)
    return evaluate_jaxpr(cj, args, name)


def spliceable(cj: ClosedJaxpr, args) -> bool:
    """Traced arguments of the types ``cj`` was made for, weak types included: its equations'
    declared types hold only for those (concrete ones go through ``bind``, which may evaluate
    them at once: ``ensure_compile_time_eval``)."""
    return any(isinstance(x, Tracer) for x in args) and all(
        a.shape == b.shape and a.dtype == b.dtype and a.weak_type == b.weak_type
        for a, b in zip(map(get_aval, args), cj.in_avals))


def splice(builder: JaxprBuilder, cj: ClosedJaxpr, args: Sequence[Any]) -> list:
    """Append ``cj``'s equations to ``builder``'s trace, on fresh variables, and return its outputs.

    The same as binding each equation again (``eval_jaxpr``), without typing every equation
    a second time: the passes made ``cj`` well typed for arguments of these types.
    """
    env: dict[Var, Any] = {}
    for v, x in zip(cj.jaxpr.constvars, cj.consts):
        env[v] = builder.to_atom(x)
    for v, x in zip(cj.jaxpr.invars, args):
        env[v] = builder.to_atom(x)
    read = lambda a: env[a] if type(a) is Var else a
    for eqn in cj.jaxpr.eqns:
        outvars = [Var(v.aval) for v in eqn.outvars]
        new = Eqn(eqn.primitive, [read(a) for a in eqn.invars], outvars, eqn.params, eqn.source_info)
        builder.eqns.append(new)
        for old, v in zip(eqn.outvars, outvars):
            env[old] = v
            builder._producer[v] = new
    return [Tracer(builder, a) if type(a) is Var else literal_value(a) for a in map(read, cj.jaxpr.outvars)]


class gc_paused:
    """Cyclic garbage collection off inside (re-entrant, and across threads). Tracing and the
    passes allocate many objects that live on (variables, equations, types) and few cycles;
    CPython's full collections, triggered by allocation counts, would traverse them all again
    and again: without this, half the time of ``grad`` of a 2000-equation program.

    The collector is process-wide, so the pause is counted: the first entry (of any thread)
    turns it off, if it was on, and the last exit turns it back on; one thread leaving does not
    turn it on under another that is still inside.
    """

    _lock = threading.Lock()
    _depth = 0
    _was_enabled = False

    def __enter__(self):
        cls = gc_paused
        with cls._lock:
            if cls._depth == 0:
                cls._was_enabled = gc.isenabled()
                gc.disable()
            cls._depth += 1

    def __exit__(self, *exc):
        cls = gc_paused
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0 and cls._was_enabled:
                gc.enable()


def without_gc(fn):
    """An entry point of the eager transformations: cyclic GC paused inside, and a call that
    fails by recursion (a function nesting hundreds of conds or loops) run again, whole, on a
    large stack (``ir.deep``) when no trace encloses it."""
    @deep_entry(retry_if=_outside_any_trace)
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with gc_paused():
            return fn(*args, **kwargs)
    return run


def simplified(cj: ClosedJaxpr, used_outputs: Sequence[bool] | None = None) -> ClosedJaxpr:
    if used_outputs is not None:
        cj = verify_pass_result("dce", dce_closed(cj, used_outputs, keep_inputs=True)[0])
    return run_pipeline(cj, "dce,cse")
