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

import contextlib
import functools
import operator

import numpy as np

from . import cpp_dispatch, float_checks, segmenting
from .. import runtime
from .compile_guards import check_tracing, execution_refused
from .traceback_filtering import api_boundary
from ..ir.dtypes import ALL_DTYPES as _DTYPES, config as _config
from ..ir.core import ClosedJaxpr, Eqn, Jaxpr, PRIMITIVES, Primitive, ShapedArray, Var, out_avals_of
from ..ir import params as params_schema
from ..ir.host_callback import check_callbacks_bound
from ..ir.tracing import Tracer, _outside_any_trace, get_aval, pytype_aval_mappings
from .lowering import lower_jaxpr
from ..passes.reproducer import write_reproducer
from ..runtime.sharded import ShardedArray
from ..ir.sharding_type import AxisType

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


def sharded_aval(x: ShardedArray) -> ShapedArray:
    """The IR type of an array over several devices: its NamedSharding's Explicit axes are
    written in the type (``f32[8@x,4]``)."""
    plain = _shaped_of_runtime(x.aval)
    s = x.sharding
    if s is None or not hasattr(s, "spec") or all(t is not AxisType.Explicit for t in s.mesh.axis_types):
        return plain
    return plain.update(sharding=s)


pytype_aval_mappings[ShardedArray] = sharded_aval


def runtime_aval(aval: ShapedArray) -> runtime.Aval:
    return runtime.Aval.get(aval.shape, aval.dtype, aval.weak_type)


def put_on_device(x):
    """``x`` as ``device_put(x)`` returns one value: tracers and Arrays as they are, host values
    (canonical dtypes) on the default device by an explicit transfer (for the transfer guard)."""
    if isinstance(x, (Tracer, Array)):
        return x
    aval = runtime_aval(get_aval(x))
    if runtime.carries_no_data(aval.dtype):       # float0 and tokens stay host values, as in JAX
        return runtime.array.host_value_without_data(aval)
    with runtime.array.explicit_transfers("device_put"):
        return Array(runtime.to_buffer(x, aval), aval)


def to_device_buffer(x, aval: runtime.Aval):
    """The device buffer for argument ``x`` of type ``aval`` (an Array's own buffer, or a safe copy)."""
    return x._buf if type(x) is Array else runtime.to_buffer(x, aval)


# --------------------------------------------------------------- compiling

def compile_closed_jaxpr(cj: ClosedJaxpr, name: str, donated_invars=(), options=None) -> runtime.Executable:
    """Lower a ClosedJaxpr for the current backend and compile it (as several executables when
    it is longer than XLA compiles safely: compiler/engine/segmenting.py)."""
    max_eqns = segmenting.max_segment_eqns()
    long = max_eqns is not None and segmenting.needs_split(cj, max_eqns)
    if long:
        return segmenting.SegmentedExecutable(long, name, donated_invars, max_eqns, compile_closed_jaxpr)
    with reproducer_on_failure(cj, "lower"):
        lowered = lower_jaxpr(cj, name=name, donated_invars=donated_invars,
                              platform=runtime.default_backend())
    if lowered.host_callbacks:
        check_callbacks_bound(cj)      # a program read from text: fail now, not when it runs
    with reproducer_on_failure(cj, "compile"):
        return runtime.compile(lowered.module, name=name, out_avals=cj.out_avals, options=options,
                               host_callbacks=lowered.host_callbacks, runtime_token=lowered.runtime_token,
                               cache_dir=_config.jaxprc_compilation_cache_dir)


@contextlib.contextmanager
def reproducer_on_failure(cj: ClosedJaxpr, stage: str):
    """With ``jaxprc_reproducer_dir`` set, a failure of ``stage`` writes a reproducer there (its
    path is added to the error's notes)."""
    try:
        yield
    except Exception as e:
        if _config.jaxprc_reproducer_dir:
            e.add_note(f"reproducer: {write_reproducer(_config.jaxprc_reproducer_dir, cj, stage, e)}")
        raise


class _PrimitiveExecutable:
    """One primitive compiled for one signature (one-equation jaxpr), with what running it needs."""

    __slots__ = ("executable", "multiple_results", "execute", "handlers", "out_aval")

    def __init__(self, prim: Primitive, avals: list[runtime.Aval], params):
        check_tracing(prim.name)       # JAX's eager ops are jitted functions: building one is a trace
        invars = [Var(_shaped_of_runtime(a)) for a in avals]
        outvars = [Var(a) for a in out_avals_of(prim, [v.aval for v in invars], params)]
        jaxpr = Jaxpr([], invars, outvars, [Eqn(prim, invars, outvars, params)])
        self.executable = compile_closed_jaxpr(ClosedJaxpr(jaxpr, []), prim.name)
        self.multiple_results = prim.multiple_results
        self.execute = self.executable.loaded.execute_sharded
        self.handlers = self.executable.result_handlers
        self.out_aval = self.executable.out_avals[0] if len(outvars) == 1 else None




# An eager primitive types its operands when it is compiled: an ill-typed call (lax.add of shapes
# (3,) and (4,)) leaves through a traceback boundary there, as JAX's eager primitives (jitted) do.
_new_entry = api_boundary(_PrimitiveExecutable)

class _OnDevices(Exception):
    """An operand lives on other devices than the default one: the op runs there (SPMD)."""


def _runtime_aval_of(x) -> runtime.Aval:
    if type(x) is Array:
        return x.aval
    if isinstance(x, ShardedArray):
        raise _OnDevices
    return runtime_aval(get_aval(x))


def _hashable(checker) -> bool:
    """Whether every value ``checker`` (a param schema entry) accepts is hashable."""
    if isinstance(checker, params_schema.Tuple):
        return _hashable(checker.item)
    if isinstance(checker, params_schema.OneOf):
        return all(map(_hashable, checker.alternatives))
    return isinstance(checker, (params_schema.Int, params_schema.Bool, params_schema.Str, params_schema.Enum,
                                params_schema.DType, params_schema.Is))


class _EagerImpl:
    """The impl of one primitive: its executables cached per (input avals, params).

    A call runs through jaxlib's C++ dispatch (compiler/engine/cpp_dispatch.py: one
    ``PjitFunction`` per primitive, its params static), whose misses run
    ``python``, the Python path; that hands C++ the executable where C++ runs it
    as Python would. A primitive whose params may be unhashable (jaxlib raises
    on those) calls C++ through ``_guarded``, which takes them to Python.

    In Python, the key holds the interned runtime avals of the arguments, so a
    hit on device arrays costs a tuple hash and no IR objects; params keep their
    call order (another order is only another entry). ``python`` is the whole
    of an eager op's own overhead there, so it is one frame: look up, transfer,
    run, wrap.
    """

    __slots__ = ("prim", "cache", "cpp", "static_params", "call")

    def __init__(self, prim: Primitive):
        self.prim, self.cache = prim, {}
        self.cpp = self.static_params = None
        self.call = self._first_call

    # Python finds ``__call__`` through this property, whose getter is C code: once chosen, a call
    # goes straight to the C++ function.
    __call__ = property(operator.attrgetter("call"))

    def _first_call(self, *args, **params):
        # Chosen at the first call: the params are known once the family declared them (def_params).
        if cpp_dispatch.enabled():
            schema = self.prim.param_schema or {}
            self.static_params = frozenset(schema)
            self.cpp = runtime.cpp_jit.make_function(self.prim.name, None, self._cache_miss, (),
                                                     sorted(schema), self.prim, cpp_dispatch.dispatch_registry)
            self.call = self.cpp if all(map(_hashable, schema.values())) else self._guarded
        else:
            self.call = self.python
        return self.call(*args, **params)

    def _guarded(self, *args, **params):
        try:
            return self.cpp(*args, **params)
        except ValueError as e:    # jaxlib hashes static params first: an unhashable one
            if not str(e).startswith("Non-hashable static arguments"):
                raise
        return self.python(*args, **params)

    def _cache_miss(self, *args, **params):
        outs, entry = self.python(*args, _entry=True, **params)
        fast = None
        if self.static_params is None:      # reached from eager_function before any call of its own
            self.static_params = frozenset(self.prim.param_schema or ())
        if (entry is not None and cpp_dispatch.fast_context() and self.static_params.issuperset(params)
                and not entry.executable.effectful and not entry.executable.dataless_outputs
                and cpp_dispatch.c_leaves(args)):
            tree = cpp_dispatch.result_tree(outs, len(entry.executable.out_avals))
            if tree is not None:
                avals = [x.aval if type(x) is Array else _runtime_aval_of(x) for x in args]
                fast = runtime.cpp_jit.fastpath(entry.executable.loaded, tree, avals, entry.executable.out_avals)
        return outs, fast, False

    def python(self, *args, _entry=False, **params):
        try:
            key = tuple([x.aval if type(x) is Array else _runtime_aval_of(x) for x in args])
        except _OnDevices:
            from .spmd import apply_on_devices
            outs = apply_on_devices(self.prim, args, params)
            return (outs, None) if _entry else outs
        if params:
            key += tuple(params.items())
        try:
            entry = self.cache.get(key)
        except TypeError:   # an unhashable param: compile without caching
            entry = _new_entry(self.prim, list(key[:len(args)]), params)
        if entry is None:   # (outside an except clause: a typing error has no KeyError as context)
            entry = self.cache[key] = _new_entry(self.prim, list(key[:len(args)]), params)
        if _config.jax_no_execution:
            raise execution_refused(entry.executable.name)
        # zip stops at the arguments: the key's leading entries are their avals.
        buffers = [x._buf if type(x) is Array else runtime.to_buffer(x, a) for x, a in zip(args, key)]
        if entry.executable.effectful:      # host callbacks (a control-flow body's): ordered, waited for
            outs = entry.executable.execute_effectful(buffers)
        else:
            try:
                outs = entry.execute(buffers).consume_with_handlers(entry.handlers)
            except runtime.JaxRuntimeError as e:
                raise entry.executable.runtime_error(e, buffers) from None
        if entry.multiple_results:
            outs = entry.executable.wrap_results(outs)
        else:
            outs = Array(outs[0], entry.out_aval)
        if _config.jax_debug_nans or _config.jax_debug_infs:
            float_checks.check_primitive(self.prim, args, params, outs)
        return (outs, entry) if _entry else outs


_EAGER_IMPLS: dict[Primitive, _EagerImpl] = {}


def eager_function(fn, prim: Primitive, direct, jit):
    """``fn`` (a public function that binds ``prim``) as a C++ function, as jax.numpy's functions are
    jitted in JAX. Outside traces, a call on array or scalar arguments runs one executable in C++
    from the second call of its signature on: ``prim``'s eager one where ``direct(*args)`` says
    ``fn`` binds ``prim`` on exactly its arguments (device Arrays already of the right types),
    else ``jit(fn)``'s, which also takes in Python scalars and numpy arrays. Any other call
    (tracers, other argument types, keywords, a live trace, NaN checks) runs ``fn`` itself.
    ``jit`` makes a ``JitFunction`` (the API's, passed in: the engine sits below the API)."""
    if not cpp_dispatch.enabled():
        return fn
    impl = _eager_impl(prim)
    jitted = []      # jit(fn), made when first needed

    def cache_miss(*args, **kwargs):
        if kwargs or not _outside_any_trace() or not cpp_dispatch.fast_context():
            return fn(*args, **kwargs), None, False
        if direct(*args):
            return impl._cache_miss(*args)
        if not _jittable(args):
            return fn(*args), None, False
        if not jitted:
            jitted.append(jit(fn))
        return jitted[0]._cache_miss(*args)

    cpp = runtime.cpp_jit.make_function(fn.__name__, fn, cache_miss, (), (), prim, cpp_dispatch.dispatch_registry)
    return functools.wraps(fn)(cpp)


def _jittable(args) -> bool:
    """Whether ``jit(fn)`` takes ``args`` as ``fn`` would: live device Arrays, numpy arrays and
    scalars of jaxprc dtypes, Python scalars; Python ints only where no conversion of theirs is
    range-checked (they fit the default int, and every array operand is inexact or a signed int at
    least as wide: jit checks no Python int converted to a narrower type, eager ops do)."""
    ints = narrow = False
    for x in args:
        t = type(x)
        if t is int:
            if not _INT_RANGE[_config.jax_enable_x64][0] <= x <= _INT_RANGE[_config.jax_enable_x64][1]:
                return False
            ints = True
            continue
        if t in (bool, float, complex):
            continue
        if t is Array:
            if x._buf.is_deleted():
                return False
            dtype = x.aval.dtype
        elif (t is np.ndarray or isinstance(x, np.generic)) and x.dtype in _DTYPES:
            dtype = x.dtype
        else:
            return False
        narrow |= dtype.kind in "ub" or (dtype.kind == "i" and dtype.itemsize < (8 if _config.jax_enable_x64 else 4))
    return not (ints and narrow)


_INT_RANGE = {False: (-2 ** 31, 2 ** 31 - 1), True: (-2 ** 63, 2 ** 63 - 1)}


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
