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

from . import float_checks, runtime, segmenting
from .ir.dtypes import config as _config
from .ir.core import ClosedJaxpr, Eqn, Jaxpr, PRIMITIVES, Primitive, ShapedArray, Var, out_avals_of
from .ir.host_callback import check_callbacks_bound
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

def compile_closed_jaxpr(cj: ClosedJaxpr, name: str, donated_invars=(), options=None) -> runtime.Executable:
    """Lower a ClosedJaxpr for the current backend and compile it (as several executables when
    it is longer than XLA compiles safely: compiler/segmenting.py)."""
    max_eqns = segmenting.max_segment_eqns()
    long = max_eqns is not None and segmenting.needs_split(cj, max_eqns)
    if long:
        return segmenting.SegmentedExecutable(long, name, donated_invars, max_eqns, compile_closed_jaxpr)
    lowered = lower_jaxpr(cj, name=name, donated_invars=donated_invars,
                          platform=runtime.default_backend())
    if lowered.host_callbacks:
        check_callbacks_bound(cj)      # a program read from text: fail now, not when it runs
    return runtime.compile(lowered.module, name=name, out_avals=cj.out_avals, options=options,
                           host_callbacks=lowered.host_callbacks, runtime_token=lowered.runtime_token,
                           cache_dir=_config.jaxprc_compilation_cache_dir)


class _PrimitiveExecutable:
    """One primitive compiled for one signature (one-equation jaxpr), with what running it needs."""

    __slots__ = ("executable", "multiple_results", "execute", "handlers", "out_aval")

    def __init__(self, prim: Primitive, avals: list[runtime.Aval], params):
        invars = [Var(_shaped_of_runtime(a)) for a in avals]
        outvars = [Var(a) for a in out_avals_of(prim, [v.aval for v in invars], params)]
        jaxpr = Jaxpr([], invars, outvars, [Eqn(prim, invars, outvars, params)])
        self.executable = compile_closed_jaxpr(ClosedJaxpr(jaxpr, []), prim.name)
        self.multiple_results = prim.multiple_results
        self.execute = self.executable.loaded.execute_sharded
        self.handlers = self.executable.result_handlers
        self.out_aval = self.executable.out_avals[0] if len(outvars) == 1 else None


def _runtime_aval_of(x) -> runtime.Aval:
    return x.aval if type(x) is Array else runtime_aval(get_aval(x))


class _EagerImpl:
    """The impl of one primitive: its executables cached per (input avals, params).

    The key holds the interned runtime avals of the arguments, so a hit on
    device arrays costs a tuple hash and no IR objects; params keep their call
    order (another order is only another entry). ``__call__`` is the whole of
    an eager op's own overhead, so it is one frame: look up, transfer, run, wrap.
    """

    __slots__ = ("prim", "cache")

    def __init__(self, prim: Primitive):
        self.prim, self.cache = prim, {}

    def __call__(self, *args, **params):
        key = tuple([x.aval if type(x) is Array else _runtime_aval_of(x) for x in args])
        if params:
            key += tuple(params.items())
        try:
            entry = self.cache[key]
        except KeyError:
            entry = self.cache[key] = _PrimitiveExecutable(self.prim, list(key[:len(args)]), params)
        except TypeError:   # an unhashable param: compile without caching
            entry = _PrimitiveExecutable(self.prim, list(key[:len(args)]), params)
        # zip stops at the arguments: the key's leading entries are their avals.
        buffers = [x._buf if type(x) is Array else runtime.to_buffer(x, a) for x, a in zip(args, key)]
        try:
            outs = entry.execute(buffers).consume_with_handlers(entry.handlers)
        except runtime.JaxRuntimeError as e:
            raise entry.executable.runtime_error(e, buffers) from None
        if entry.multiple_results:
            outs = entry.executable.wrap_results(outs)
        else:
            outs = Array(outs[0], entry.out_aval)
        if _config.jax_debug_nans or _config.jax_debug_infs:
            float_checks.check_primitive(self.prim.name, outs)
        return outs


_EAGER_IMPLS: dict[Primitive, _EagerImpl] = {}


def _eager_impl(prim: Primitive) -> _EagerImpl:
    impl = _EAGER_IMPLS.get(prim)
    if impl is None:     # setdefault: racing threads share one impl (and its cache)
        impl = _EAGER_IMPLS.setdefault(prim, _EagerImpl(prim))
    return impl


def apply_primitive(prim: Primitive, *args, **params):
    """Run ``prim`` on concrete values through XLA; Arrays out (a list for multiple results)."""
    return _eager_impl(prim)(*args, **params)


def install_impls() -> None:
    """Make ``apply_primitive`` the impl of every registered primitive that has none."""
    for prim in list(PRIMITIVES.values()):
        if prim.impl_rule is None:
            prim.def_impl(_eager_impl(prim))


install_impls()
