"""Eager execution: a primitive applied to concrete values outside any trace runs at once on XLA.

``apply_primitive`` wraps the primitive in a one-equation jaxpr, lowers and
compiles it once per (primitive, params, input types incl. weak types), and
runs the cached executable. At import it becomes the impl of every built-in
primitive (those registered so far without an impl); primitives users define
later keep no impl, so evaluating them says so.

This module also connects the runtime's arrays to the IR: the abstract value
of a ``jaxprc.Array``, and host values moved to the device with the IR's
dtype rules (Python scalars weakly typed, 64-bit narrowed unless x64).
"""
from __future__ import annotations

import functools

from . import runtime
from .ir.core import ClosedJaxpr, Eqn, Jaxpr, PRIMITIVES, Primitive, ShapedArray, Var, out_avals_of
from .ir.tracing import get_aval, pytype_aval_mappings
from .lowering import lower_jaxpr

__all__ = ["apply_primitive", "compile_closed_jaxpr", "runtime_aval", "shaped_aval", "to_device_buffer"]

Array = runtime.Array


# ------------------------------------------------------------ avals, transfers

@functools.lru_cache(maxsize=None)
def _shaped_of_runtime(aval: runtime.Aval) -> ShapedArray:
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type)


def shaped_aval(x: Array) -> ShapedArray:
    """The IR type of a device array (runtime avals are interned, so this is a dict hit)."""
    return _shaped_of_runtime(x.aval)


pytype_aval_mappings[Array] = shaped_aval


def runtime_aval(aval: ShapedArray) -> runtime.Aval:
    return runtime.Aval.get(aval.shape, aval.dtype, aval.weak_type)


def to_device_buffer(x, aval: runtime.Aval):
    """The device buffer for argument ``x`` of type ``aval`` (an Array's own buffer, or a safe copy)."""
    return x._buf if type(x) is Array else runtime.to_buffer(x, aval)


# --------------------------------------------------------------- compiling

def compile_closed_jaxpr(cj: ClosedJaxpr, name: str, donated_invars=()) -> runtime.Executable:
    """Lower a ClosedJaxpr for the current backend and compile it."""
    lowered = lower_jaxpr(cj, name=name, donated_invars=donated_invars,
                          platform=runtime.default_backend())
    return runtime.compile(lowered.module, name=name, out_avals=cj.out_avals)


class _PrimitiveExecutable:
    """One primitive compiled for one signature; ``__call__`` is the eager hot path."""

    __slots__ = ("executable", "in_avals", "multiple_results", "_execute", "_handlers")

    def __init__(self, prim: Primitive, avals: list[runtime.Aval], params):
        invars = [Var(_shaped_of_runtime(a)) for a in avals]
        outvars = [Var(a) for a in out_avals_of(prim, [v.aval for v in invars], params)]
        jaxpr = Jaxpr([], invars, outvars, [Eqn(prim, invars, outvars, params)])
        self.executable = compile_closed_jaxpr(ClosedJaxpr(jaxpr, []), prim.name)
        self.in_avals = avals
        self.multiple_results = prim.multiple_results
        self._execute = self.executable.loaded.execute_sharded
        self._handlers = self.executable.result_handlers

    def __call__(self, args):
        buffers = [x._buf if type(x) is Array else runtime.to_buffer(x, a) for x, a in zip(args, self.in_avals)]
        try:
            outs = self._execute(buffers).consume_with_handlers(self._handlers)
        except runtime.JaxRuntimeError as e:
            raise self.executable.runtime_error(e) from None
        return [Array(o) for o in outs] if self.multiple_results else Array(outs[0])


_CACHE: dict = {}


def _runtime_aval_of(x) -> runtime.Aval:
    return x.aval if type(x) is Array else runtime_aval(get_aval(x))


def apply_primitive(prim: Primitive, *args, **params):
    """Run ``prim`` on concrete values through XLA; Arrays out (a list for multiple results).

    The cache key holds the interned runtime avals of the arguments, so a hit
    on device arrays costs a tuple hash and no IR objects; params keep their
    call order (another order is only another entry).
    """
    key = (prim, tuple(params.items()), *map(_runtime_aval_of, args))
    try:
        entry = _CACHE.get(key)
    except TypeError:   # an unhashable param: compile without caching
        return _PrimitiveExecutable(prim, list(key[2:]), params)(args)
    if entry is None:
        entry = _CACHE[key] = _PrimitiveExecutable(prim, list(key[2:]), params)
    return entry(args)


def install_impls() -> None:
    """Make ``apply_primitive`` the impl of every registered primitive that has none."""
    for prim in list(PRIMITIVES.values()):
        if prim.impl_rule is None:
            prim.def_impl(functools.partial(apply_primitive, prim))


install_impls()
