"""JAX's tracer-leak checker (``jaxprc.checking_leaks`` / option ``jax_check_tracer_leaks``).

Without it, a leaked tracer (kept in a global, a closure or a list after its trace
has ended) raises UnexpectedTracerError only where it is used again. With it,
every trace checks when it ends that none of its tracers outlive it, and raises
JAX's error naming each leaked tracer, where it was created and what holds it.
jaxprc's transformations (jit, grad, vmap, control flow...) all trace through
``trace_to_jaxpr``, so one check there covers them all. It walks every object the
garbage collector tracks: slow, as JAX's is, and meant for debugging.
"""
from __future__ import annotations

import gc
import sys
import types

from . import dtypes as dt


def check_leaks(builder) -> None:
    """With the option on, raise if a tracer of ``builder`` (a trace that has just ended, whose
    caller holds none of its tracers any more) is still alive."""
    if not dt.config.jax_check_tracer_leaks:
        return
    from .tracing import Tracer
    gc.collect()
    leaked = [o for o in gc.get_objects() if type(o) is Tracer and o._builder is builder]
    ours = [leaked, sys._getframe()]       # this check's own references
    leaked[:] = [t for t in leaked if not _held_by_jaxprc(t, ours)]
    if not leaked:
        return
    tracer_type = builder.style.type_name        # JAX's tracer class; its trace's drops the 'r'
    lines = [f"Leaked trace {tracer_type[:-1]}. Leaked tracer(s):", ""]
    for i in range(min(len(leaked), 5)):
        tracer = leaked[i]
        eqn = builder._producer.get(tracer._var)
        origin = (f"created on line {eqn.source_info}" if eqn is not None and eqn.source_info is not None
                  else "an argument of the traced function")
        lines.append(f"{tracer!r}, {origin}, while tracing {builder.name}")
        for holder in gc.get_referrers(tracer):
            if not any(holder is o for o in ours):
                lines += _reference_chain(tracer, tracer_type, holder, ours)
        lines.append("")
    if len(leaked) > 5:
        lines.append(f"... and {len(leaked) - 5} more")
    del leaked, ours, tracer
    raise Exception("\n".join(lines).rstrip())    # JAX raises a plain Exception


def _node(obj) -> str:
    return f"<{type(obj).__name__} {id(obj)}>"


def _edge(holder, obj) -> str:
    """How ``holder`` refers to ``obj``, as JAX's chain writes it: ``[0]``, ``['key']``, ``.attr``."""
    if isinstance(holder, (list, tuple)):
        return next((f"[{i}]" for i, v in enumerate(holder) if v is obj), "")
    if isinstance(holder, dict):
        return next((f"[{k!r}]" for k, v in list(holder.items()) if v is obj), "")
    attrs = getattr(holder, "__dict__", None)
    if isinstance(attrs, dict):
        return next((f".{k}" for k, v in list(attrs.items()) if v is obj), "")
    return ""


def _reference_chain(tracer, tracer_type: str, holder, ours) -> list[str]:
    """JAX's lines for one holder of a leaked tracer: what holds the tracer, and the module global
    that keeps the holder, where one does. An instance's ``__dict__`` is named as the instance."""
    owners = [o for o in gc.get_referrers(holder)
              if getattr(o, "__dict__", None) is holder and not any(o is x for x in ours)]
    if isinstance(holder, dict) and owners:
        holder = owners[0]
    lines = [f"<{tracer_type} {id(tracer)}> is referred to by {_node(holder)}{_edge(holder, tracer)}"]
    globals_of = {id(vars(m)): name for name, m in list(sys.modules.items()) if hasattr(m, "__dict__")}
    lines += [f"{_node(holder)} is referred to by {globals_of[id(d)]}.{k}" for d in gc.get_referrers(holder)
              if id(d) in globals_of and not any(d is o for o in ours)
              for k, v in list(d.items()) if v is holder]
    return lines


def _held_by_jaxprc(tracer, ours, depth: int = 6) -> bool:
    """Whether jaxprc's own objects keep ``tracer``: custom_jvp and custom_vjp rules, traced
    lazily, keep the arguments of their call, and programs keep those rules (thunks in their
    equations); they read the tracers' types and known values and never bind them again.
    Walks the holders up to ``depth`` steps; frames, modules and module globals end a path."""
    frontier, seen = [tracer], {id(tracer)}
    for _ in range(depth):
        above = []
        for holder in gc.get_referrers(*frontier):      # one walk of the heap per level
            if (id(holder) in seen or holder is frontier or holder is above or any(holder is o for o in ours)
                    or isinstance(holder, (types.FrameType, types.ModuleType))):
                continue
            seen.add(id(holder))
            module = (holder.__module__ if isinstance(holder, types.FunctionType)
                      else type(holder).__module__) or ""
            if module.startswith("jaxprc."):
                return True
            if isinstance(holder, dict) and "__name__" in holder and "__builtins__" in holder:
                continue      # a module's globals
            above.append(holder)
        if not above:
            return False
        frontier = above
    return False
