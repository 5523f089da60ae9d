"""The front door: make_jaxpr, eval_shape, jit, jaxpr_as_fun, and the runtime's public names.

``jit(f)`` traces ``f`` to a ClosedJaxpr, lowers it to StableHLO and compiles
it, once per call signature: the function's pytree structure, each leaf's
type (shape, dtype, weak type), the static arguments and the x64 flag. A
cache hit does no tracing, lowering or compiling: it flattens the arguments,
looks the signature up, hands the device buffers to XLA (the executable's
``execute_sharded``) and wraps the results. Inside another trace, ``jit(f)(x)`` records a ``jit``
equation holding ``f``'s jaxpr instead.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import math
import warnings
import weakref
from typing import Callable, Sequence

import numpy as np
from jaxlib import _jax, xla_client as xc
from jaxlib._profiler import TraceMe as _TraceMe

from .engine import compile_guards, cpp_dispatch, dispatch, float_checks, spmd
from . import key_moves, passes, runtime, sharding
from . import ref as _ref
from .engine.caches import ByIdentity
from .engine.dispatch import compile_closed_jaxpr, runtime_aval, to_device_buffer
from .ir import dtypes as dt
from .ir.config import TraceContext
from .ir.core import ClosedJaxpr, Jaxpr, ShapedArray
from .ir.shape_poly import is_constant_shape
from .ir.deep import deep_entry
from .passes.dce import dce_closed
from .ir.tracing import Tracer, _outside_any_trace, close_over_consts, current_builder, eval_jaxpr, get_aval, \
    pytype_aval_mappings, \
    register_internal_dir, trace_state as _trace_state, trace_to_jaxpr, user_source_info
from .ir.tree_util import (broadcast_prefix, equality_errors, keystr, registry as _registry, tree_flatten_with_path,
                          tree_map)
from .lax.call import jit_p
from .lax.elementwise import copy_p
from .lax.parallel import named_axis
from .runtime import Array, XlaCompileError, XlaError, XlaRuntimeError, default_backend
from .toplevel import compile_log_level
from .engine.traceback_filtering import api_boundary
from .transfer_guard import explicit_scope

__all__ = ["Array", "ShapeDtypeStruct", "XlaCompileError", "XlaError", "XlaRuntimeError",
           "block_until_ready", "default_backend", "device_put", "eval_shape", "jit",
           "jaxpr_as_fun", "make_jaxpr"]

_flatten = _registry.flatten

# Equations record the user's line: frames in the front end (this package,
# jaxprc.numpy, ...) and in the passes are the library's own, like ir's.
register_internal_dir(__file__)
register_internal_dir(passes.__file__)
_config = dt.config
_JaxRuntimeError = runtime.JaxRuntimeError
_logger = logging.getLogger("jaxprc")
runtime.monitoring.compile_log_level = compile_log_level


# ------------------------------------------------------------ ShapeDtypeStruct

class ShapeDtypeStruct:
    """A shape and dtype standing in for an array (``make_jaxpr``, ``eval_shape``, ``lower``)."""

    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape, dtype, weak_type: bool = False, sharding=None):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.shape = ShapedArray(shape, np.bool_).shape     # ints, or symbolic dimensions
        self.dtype = dtype if key_moves.is_key_dtype(dtype) else np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.sharding = sharding

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The shape, dtype, weak type and sharding of ``x`` (an array, a scalar, or anything with
        ``shape`` and ``dtype``)."""
        if key_moves.holds_keys(x):
            return cls(x.shape, x.dtype)
        aval = shaped_abstractify(x)
        return cls(aval.shape, aval.dtype, aval.weak_type, getattr(x, "sharding", None))

    def update(self, **changes) -> "ShapeDtypeStruct":
        """A copy with some of ``shape``, ``dtype``, ``weak_type``, ``sharding`` replaced (as in
        JAX, other names are ignored)."""
        fields = {name: changes.get(name, getattr(self, name)) for name in self.__slots__}
        return ShapeDtypeStruct(**fields)

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


pytype_aval_mappings[ShapeDtypeStruct] = lambda s: ShapedArray(
    s.shape, dt.canonicalize_dtype(s.dtype), s.weak_type)


def _shape_struct(aval: ShapedArray) -> ShapeDtypeStruct:
    return ShapeDtypeStruct(aval.shape, aval.dtype, aval.weak_type)


# ------------------------------------------------------------------ tracing

def _fun_name(fun) -> str:
    while isinstance(fun, functools.partial):       # as JAX: a partial is named after its function
        fun = fun.func
    return getattr(fun, "__name__", None) or type(fun).__name__


def _wraps(wrapper, fun, updated=functools.WRAPPER_UPDATES):
    """``functools.update_wrapper``, with a name even where ``fun`` has none (a partial)."""
    functools.update_wrapper(wrapper, fun, updated=updated)
    if not hasattr(fun, "__name__"):
        wrapper.__name__ = wrapper.__qualname__ = _fun_name(fun)
    return wrapper


def _check_argnums_argnames(params, nums, names, what: str) -> None:
    """``{what}_argnums``/``{what}_argnames`` must name parameters the function has (JAX's ValueErrors)."""
    kinds = {p.kind for p in params}
    n_positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        if any(not -n_positional <= i < n_positional for i in nums):
            raise ValueError(f"Jitted function has {what}_argnums={tuple(nums)}, but only "
                             f"accepts {n_positional} positional arguments.")
    positional_only = {p.name for p in params if p.kind == inspect.Parameter.POSITIONAL_ONLY}
    if set(names) & positional_only:
        raise ValueError(f"Jitted function has invalid argnames {set(names) & positional_only} in "
                         f"{what}_argnames. These are positional-only")
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        bad = set(names) - {p.name for p in params}
        if bad:
            raise ValueError(f"Jitted function has invalid argnames {bad} in {what}_argnames. "
                             "Function does not take these args.")


def _as_tuple(x, kind: type) -> tuple:
    return (x,) if isinstance(x, kind) else tuple(x or ())


def _infer_argnums_and_argnames(positional, nums, names) -> tuple[tuple[int, ...], frozenset]:
    """Like JAX: a position also names its parameter, and a name its position."""
    for i in nums:
        if -len(positional) <= i < len(positional) and positional[i].kind != inspect.Parameter.POSITIONAL_ONLY:
            names += (positional[i].name,)
    nums += tuple(k for k, p in enumerate(positional) if p.name in names)
    return tuple(sorted(set(nums))), frozenset(names)


def _signature_parameters(fun) -> list | None:
    try:
        return list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None


class _ArgSpec:
    """Which arguments of ``fun`` are static; splits a call into (dynamic args, static key)."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums=(), donate_argnames=()):
        nums, names = _as_tuple(static_argnums, int), _as_tuple(static_argnames, str)
        donums, donames = _as_tuple(donate_argnums, int), _as_tuple(donate_argnames, str)
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun!r}")
        params = _signature_parameters(fun)
        if params is not None:
            _check_argnums_argnames(params, nums, names, "static")
            _check_argnums_argnames(params, donums, donames, "donate")
        params = params or []
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.positional_names = [p.name for p in positional]
        self.argnums, self.argnames = _infer_argnums_and_argnames(positional, nums, names)
        self.donate_argnums, self.donate_argnames = _infer_argnums_and_argnames(positional, donums, donames)
        if self.argnames & self.donate_argnames:
            raise ValueError("static_argnames and donate_argnames cannot intersect. Argument names "
                             f"{set(self.argnames & self.donate_argnames)} appear in both static_argnames "
                             "and donate_argnames")
        if set(self.argnums) & set(self.donate_argnums):
            raise ValueError("static_argnums and donate_argnums cannot intersect. Argument positions "
                             f"{set(self.argnums) & set(self.donate_argnums)} appear in both")
        self.trivial = not self.argnums and not self.argnames

    def split(self, args, kwargs):
        """((dynamic positional args, dynamic kwargs), static key, static positions)."""
        n = len(args)
        static_pos = sorted({i % n for i in self.argnums if -n <= i < n})
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.argnames}
        static = tuple((i, type(args[i]), args[i]) for i in static_pos) + tuple(
            (k, type(v), v) for k, v in sorted(kwargs.items()) if k in self.argnames)
        return (dyn_args, dyn_kwargs), static, static_pos

    @staticmethod
    def merge(dyn_args, dyn_kwargs, static, static_pos):
        args = list(dyn_args)
        for (i, _, value) in static[:len(static_pos)]:
            args.insert(i, value)
        kwargs = dict(dyn_kwargs)
        kwargs.update((k, value) for (k, _, value) in static[len(static_pos):])
        return args, kwargs


def argnums_positions(argnums: int | Sequence[int], nargs: int, what: str,
                      option: str = "argnums") -> tuple[int, ...]:
    """``argnums`` (an int or ints, negative ones counting from the end) as positions in a call
    with ``nargs`` positional arguments, in the order given; out of range is a ValueError
    naming ``what`` (the transformation) and its ``option``."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(f"{what}: {option}={argnums} is out of range for a function called with "
                             f"{nargs} positional arguments")
    return tuple(n % nargs for n in nums)


@deep_entry(retry_if=_outside_any_trace)
def _trace(fun, spec: _ArgSpec, args, kwargs, name: str, staged: bool = True, abstract: bool = False):
    """Trace ``fun(*args, **kwargs)`` on abstract values: (ClosedJaxpr, output treedef).
    Very deeply nested functions (1000 nested conds) are traced again on a large stack.
    ``staged``: a trace for jit (its calls, ``lower``, ``eval_shape``), which ``no_tracing``
    refuses; ``make_jaxpr``'s is not one, as in JAX. ``abstract``: nothing will run on the
    arguments, so any object with ``shape`` and ``dtype`` stands for an array."""
    if staged:
        compile_guards.check_tracing(fun)
    dyn, static, static_pos = spec.split(args, kwargs)
    if abstract:
        dyn = key_moves.abstract_keys_in(dyn)
    leaves, in_tree = _flatten(dyn)
    try:
        in_avals = [shaped_abstractify(x) if abstract else get_aval(x) for x in leaves]
    except TypeError:
        raise _invalid_argument_error(spec, dyn, static_pos, name) from None
    _check_int_ranges(leaves, in_avals, spec, args, kwargs)
    out_tree_box = []

    def flat_fun(*flat):
        dyn_args, dyn_kwargs = in_tree.unflatten(flat)
        call_args, call_kwargs = _ArgSpec.merge(dyn_args, dyn_kwargs, static, static_pos)
        out_leaves, out_tree = _flatten(fun(*call_args, **call_kwargs))
        out_tree_box.append(out_tree)
        return out_leaves

    with runtime.monitoring.elapsed(runtime.monitoring.JAXPR_TRACE_EVENT, name):
        cj = trace_to_jaxpr(flat_fun, in_avals, name=name)
    return cj, out_tree_box[0]


def shaped_abstractify(x) -> ShapedArray:
    """The type of ``x``: an array's or a scalar's, or (as JAX takes abstract inputs) that of any
    object with ``shape`` and ``dtype`` (and optionally ``weak_type``)."""
    try:
        return get_aval(x)
    except TypeError:
        if isinstance(x, _ref.Ref):     # it has a shape and a dtype, but it is no abstract array
            raise
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise
        return ShapedArray(tuple(int(d) for d in x.shape), dt.canonicalize_dtype(np.dtype(x.dtype)),
                           bool(getattr(x, "weak_type", False)))


def _check_int_ranges(leaves, avals, spec: _ArgSpec, args, kwargs) -> None:
    """A Python int argument must fit the integer type it gets (JAX's OverflowError, naming it)."""
    for i, (x, aval) in enumerate(zip(leaves, avals)):
        if type(x) is int and not np.iinfo(aval.dtype).min <= x <= np.iinfo(aval.dtype).max:
            path = _argument_names(spec, args, kwargs)[i]
            raise OverflowError("An overflow was encountered while parsing an argument to a jitted computation, "
                                f"whose argument path is {path}. Got {type(x)} with value {x}")


def _invalid_argument_error(spec: _ArgSpec, dyn, static_pos, name: str) -> TypeError:
    """The first argument leaf that is not an array or scalar: which argument, where, and the fixes."""
    for keys, x in _registry.flatten_with_path(dyn)[0]:
        try:
            get_aval(x)
        except TypeError as e:
            reason = str(e)
            break
    (which, key), rest = keys[:2], keystr(keys[2:])
    if which.idx == 0:   # a positional argument; its index in the call counts the static ones too
        index = [i for i in range(len(static_pos) + len(dyn[0])) if i not in static_pos][key.idx]
        pname = spec.positional_names[index] if index < len(spec.positional_names) else None
        where, fixes = f"args[{index}]{rest}", f"static_argnums={index}"
    else:
        pname = key.key
        where, fixes = f"kwargs[{pname!r}]{rest}", ""
    if pname is not None:
        where = f"'{pname}' ({where})"
        fixes += (" or " if fixes else "") + f"static_argnames={pname!r}"
    src = user_source_info()
    called = f", called at {src}" if src else ""
    if isinstance(x, (np.ndarray, np.generic)):    # an array of a dtype jaxprc cannot hold
        return TypeError(f"Argument {where} of '{name}'{called}: {reason}")
    if isinstance(x, _ref.Ref):
        return TypeError(f"Argument {where} of '{name}'{called} is a Ref: a Ref is an argument of jit "
                         "calls and make_jaxpr only (they thread its value through the program); "
                         "pass its value (ref[...]) here")
    path = (pname if pname is not None else where) + rest
    return TypeError(
        f"Error interpreting argument to {name} as an abstract array. The problematic value is of type "
        f"{type(x)} and was passed to the function at path {path}.\n"
        f"Argument {where} of '{name}'{called}: {x!r} of type {type(x).__name__} is not a valid "
        "JAX type (expected an array, a numpy scalar, or a Python bool/int/float/complex). "
        f"Mark the argument static ({fixes}) if it is a hashable configuration value, or pass an array.")


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (), axis_env=None, return_shape: bool = False,
               static_argnames: str | Sequence[str] = ()):
    """``make_jaxpr(f)(*args)``: the ClosedJaxpr of ``f`` traced on abstract versions of ``args``.

    Arguments may be arrays, scalars or ``ShapeDtypeStruct`` values in any pytree.
    ``axis_env``: (name, size) pairs, the named axes ``f``'s collectives may use.
    With ``return_shape=True`` also returns the output pytree of ``ShapeDtypeStruct`` values.

    >>> print(jaxprc.make_jaxpr(lambda x: jnp.sin(x) * x)(jnp.ones(3)))
    { lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b a in (c,) }
    """
    spec = _ArgSpec(fun, static_argnums, static_argnames)

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        with contextlib.ExitStack() as axes:
            for name, size in axis_env or ():
                axes.enter_context(named_axis(name, size, vmapped=False))
            traced = fun
            if _ref.has_refs(_flatten((args, kwargs))[0]):   # values in, final values out (compiler/ref.py)
                args, kwargs, _ = _ref.unwrap_refs(args, kwargs)
                traced = _ref.thread_refs(fun)
            cj, out_tree = _trace(traced, spec, args, kwargs, _fun_name(fun), staged=False, abstract=True)
        if return_shape:
            return cj, out_tree.unflatten([_shape_struct(a) for a in cj.out_avals])
        return cj

    make_jaxpr_f.__name__ = f"make_jaxpr({_fun_name(fun)})"
    return api_boundary(_ref.reading_closed_refs(make_jaxpr_f))


@api_boundary
@_ref.reading_closed_refs
def eval_shape(fun: Callable, *args, **kwargs):
    """The output pytree of ``ShapeDtypeStruct``s of ``fun(*args, **kwargs)``; nothing runs."""
    cj, out_tree = _trace(fun, _ArgSpec(fun, (), ()), args, kwargs, _fun_name(fun), abstract=True)
    return key_moves.abstract_keys_out(out_tree.unflatten([_shape_struct(a) for a in cj.out_avals]))


def jaxpr_as_fun(closed_jaxpr: ClosedJaxpr) -> Callable:
    """A Python callable running ``closed_jaxpr`` (a list of outputs), eagerly or under any trace."""
    jaxpr, consts = closed_jaxpr.jaxpr, closed_jaxpr.consts
    if passes.is_polymorphic(closed_jaxpr):
        return _polymorphic_fun(closed_jaxpr)

    def fun(*args):
        return eval_jaxpr(jaxpr, consts, *args)

    return fun


def _polymorphic_fun(closed_jaxpr: ClosedJaxpr) -> Callable:
    """A program with symbolic dimensions runs specialised to its arguments' sizes (one
    specialisation per set of sizes, kept while the function lives)."""
    specialised: dict = {}

    def fun(*args):
        shapes = tuple(np.shape(a) if not hasattr(a, "shape") else tuple(a.shape) for a in args)
        if not all(map(is_constant_shape, shapes)):      # traced at symbolic sizes: stays polymorphic
            return eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
        cj = specialised.get(shapes)
        if cj is None:
            cj = specialised[shapes] = passes.specialize_for_args(closed_jaxpr, shapes)
        return eval_jaxpr(cj.jaxpr, cj.consts, *args)

    return fun


# ---------------------------------------------------------- runtime helpers

def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Move a pytree of host values to the device with jaxprc's dtypes; ``device`` (a Device, a
    Sharding or a PartitionSpec under ``set_mesh``, or a pytree of them) says where.

    Arrays already in place pass through unless ``may_alias=False`` (then they are copied);
    ``donate=True`` allows the input's buffer to be reused, which jaxprc never needs to (JAX does
    not on CPU either), so the input stays valid; traced values pass through too (inside jit
    there is nothing to move). ``src`` is accepted for JAX's signature: the source of an Array is
    where it is. ``donate`` and ``may_alias`` may be pytree prefixes of ``x``.
    """
    del src
    leaves, tree = _flatten(x)
    targets = spmd.broadcast(device, tree, "device_put device")
    donates = broadcast_prefix(donate, tree, "device_put donate")
    aliases = broadcast_prefix(may_alias, tree, "device_put may_alias")
    if any(d and a for d, a in zip(donates, aliases)):
        raise ValueError("may_alias and donate cannot be True at the same time.")

    def put(leaf, target, may_alias):
        if isinstance(leaf, Tracer):    # under a trace a placement is a layout constraint
            return leaf if target is None else spmd.constrain([leaf], [target], "device_put")[0]
        if isinstance(leaf, Array) and target is None:
            return copy_p.bind(leaf) if may_alias is False else leaf
        aval = leaf.aval if isinstance(leaf, Array) else runtime_aval(get_aval(leaf))
        if runtime.carries_no_data(aval.dtype):       # float0 and tokens stay host values, as in JAX
            return runtime.array.host_value_without_data(aval)
        if target is not None:             # a device or sharding (jaxprc/sharding.py)
            try:
                resolved = sharding.resolve(target, "device_put")
            except TypeError:              # JAX's ValueError, in its words
                raise ValueError("`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, `jax.Device`, "
                                 "`Format`, `jax.memory.Space` or a pytree of these values. Received invalid "
                                 f"value: {target}") from None
            return sharding.put(leaf, resolved, aval)
        return Array(runtime.to_buffer(leaf, aval), aval)
    with explicit_scope("device_put"):      # guarded only by the *_explicit transfer guard levels
        return tree.unflatten([put(*args) for args in zip(leaves, targets, aliases)])


def block_until_ready(x):
    """Wait until every Array in the pytree ``x`` is computed; returns ``x``."""
    for leaf in _flatten(x)[0]:
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


# ---------------------------------------------------------------------- jit

# Consts of a traced function larger than this become arguments of the
# executable (transferred once) rather than constants baked into the module:
# big constants make the module slow to print, serialize and compile.
_MAX_INLINE_CONST_ELEMENTS = 64


def _hoist_large_consts(cj: ClosedJaxpr):
    """Split consts: small ones stay (lowered as constants), large ones become leading invars."""
    j = cj.jaxpr
    keep_vars, keep_vals, arg_vars, arg_vals = [], [], [], []
    for v, c in zip(j.constvars, cj.consts):
        big = v.aval.size > _MAX_INLINE_CONST_ELEMENTS
        (arg_vars if big else keep_vars).append(v)
        (arg_vals if big else keep_vals).append(c)
    if not arg_vars:
        return cj, []
    return ClosedJaxpr(Jaxpr(keep_vars, arg_vars + j.invars, j.outvars, j.eqns), keep_vals), arg_vals


class _CompiledCall:
    """One cache entry of a jit function: an executable plus what a call needs around it.

    ``__call__`` is the hot path of a cache hit, so it talks to the executable
    directly (execute_sharded + consume_with_handlers) instead of through
    ``Executable.execute``.
    """

    __slots__ = ("executable", "jaxpr", "in_avals", "const_buffers", "out_tree", "single_output",
                 "_execute", "_handlers", "_out_aval", "_effectful", "_donated", "_kept", "_kept_avals")

    def __init__(self, cj: ClosedJaxpr, out_tree, name: str, donated_invars, options=None,
                 keep_unused: bool = True):
        self.jaxpr = cj
        self.in_avals = [runtime_aval(a) for a in cj.in_avals]      # of every argument leaf
        cj, self._kept, donated_invars = _prune_unused(cj, donated_invars, keep_unused)
        self._kept_avals = [runtime_aval(a) for a in cj.in_avals]      # of the executable's arguments
        cj, hoisted = _hoist_large_consts(cj)
        donated = (False,) * len(hoisted) + tuple(donated_invars)
        self.executable = compile_closed_jaxpr(cj, name, donated if any(donated) else (), options)
        self.const_buffers = [to_device_buffer(c, runtime_aval(v.aval))
                              for c, v in zip(hoisted, cj.jaxpr.invars)]
        self.out_tree = out_tree
        self.single_output = (out_tree.num_leaves == 1 and out_tree.num_nodes == 1
                              and not self.executable.dataless_outputs)
        self._effectful = self.executable.effectful   # also a program split in segments (no .loaded)
        self._execute = None if self._effectful else self.executable.loaded.execute_sharded
        self._handlers = self.executable.result_handlers if not self._effectful else None
        self._out_aval = self.executable.out_avals[0] if self.single_output else None
        self._donated = [i for i, d in enumerate(donated) if d]   # positions among the buffers

    def fastpath(self, leaves, outs):
        """What jaxlib's C++ dispatch needs to run this entry on a hit (``leaves``, ``outs``: this
        call's argument leaves and results), or None where C++ would not do what ``__call__`` does."""
        if (self._effectful or self._donated or self.executable.dataless_outputs
                or not cpp_dispatch.c_leaves(leaves)):
            return None
        tree = cpp_dispatch.result_tree(outs, len(self.executable.out_avals))
        if tree is None:
            return None
        return runtime.cpp_jit.fastpath(self.executable.loaded, tree, self.in_avals, self.executable.out_avals,
                                        self.const_buffers, self._kept)

    def __call__(self, leaves):
        if _config.jax_no_execution:
            raise compile_guards.execution_refused(self.executable.name)
        if self._kept is not None:
            leaves = [x for x, k in zip(leaves, self._kept) if k]
        buffers = [x._buf if type(x) is Array else runtime.to_buffer(x, a)
                   for x, a in zip(leaves, self._kept_avals)]
        for i, b in enumerate(buffers):      # XLA would log a deleted buffer to stderr, then fail
            if b.is_deleted():
                raise runtime.deleted_error(b.aval.shape, b.aval.dtype, f"It is argument {i} of '{self.executable.name}'.")
        if self.const_buffers:
            buffers = self.const_buffers + buffers
        if self._effectful:      # host callbacks (runtime/effects.py)
            outs = self.executable.execute_effectful(buffers)
        else:
            try:
                outs = self._execute(buffers).consume_with_handlers(self._handlers)
            except _JaxRuntimeError as e:
                raise self.executable.runtime_error(e, buffers) from None
        for i in self._donated:
            # A donated buffer is only marked deleted; deleting it for good makes jaxlib's C++
            # dispatch refuse it (to the Python path's DeletedArrayError) instead of running it.
            if buffers[i].is_deleted():
                buffers[i].delete()
        if self.single_output:
            return Array(outs[0], self._out_aval)
        return self.out_tree.unflatten(self.executable.wrap_results(outs))


def _prune_unused(cj: ClosedJaxpr, donated_invars, keep_unused: bool):
    """As JAX: arguments the program does not use are no arguments of its executable (and then
    not donated either). (program, which argument leaves it keeps or None for all, their
    donation flags)."""
    if keep_unused or not cj.jaxpr.invars:
        return cj, None, donated_invars
    pruned, kept = dce_closed(cj, [True] * len(cj.jaxpr.outvars))
    if all(kept):
        return cj, None, donated_invars
    return pruned, tuple(kept), tuple(d for d, k in zip(donated_invars, kept) if k) if donated_invars else ()


def _host_signature(x):
    """The cache-key entry of a non-Array argument leaf: its interned runtime aval.

    None for a value that is no array: the call then misses the cache, and
    tracing it raises the error naming the argument and the caller's line.
    """
    if isinstance(x, Array):         # on several devices, or another one: its layout matters
        return (x.aval, x.sharding)
    if type(x) is np.ndarray:
        return _ndarray_signature(x.shape, x.dtype, _config.jax_enable_x64)
    if type(x) in (float, int, bool, complex):
        return _scalar_signature(type(x), _config.jax_enable_x64)
    try:
        return runtime_aval(get_aval(x))
    except TypeError:
        return None


def _key_parts(key) -> dict:
    """A jit cache key taken apart (its two forms: with static arguments, or without)."""
    static, rest = ((), key[1:]) if isinstance(key[1], TraceContext) else (key[1], key[2:])
    return {"structure": key[0], "static": static, "context": rest[0], "args": rest[1:]}


@functools.lru_cache(maxsize=None)
def _scalar_signature(kind: type, x64: bool):
    """Python scalars are weakly typed by kind alone (an int out of range fails in the transfer)."""
    return runtime_aval(get_aval(kind(0)))


@functools.lru_cache(maxsize=4096)
def _ndarray_signature(shape, dtype, x64):
    return runtime.Aval.get(shape, dt.canonicalize_dtype(dtype), False)


# Caches per function and jit options, kept while the function lives: `jit(f)(x)` written in
# a loop compiles once, as in JAX.
_JIT_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _shared_caches(fun, options) -> tuple[dict, dict]:
    try:
        return _JIT_CACHES.setdefault(fun, {}).setdefault(options, ({}, {}))
    except TypeError:          # not weakly referable, or unhashable options: caches of its own
        return {}, {}


def _names_a_spec(shardings) -> bool:
    """Whether a PartitionSpec is among ``shardings`` (it means the mesh set when compiling)."""
    if isinstance(shardings, sharding.PartitionSpec):
        return True
    if isinstance(shardings, dict):
        shardings = list(shardings.values())
    return isinstance(shardings, (tuple, list)) and any(map(_names_a_spec, shardings))


class JitFunction:
    """``jit(f)``: call it like ``f``; ``.lower(*args)`` gives the StableHLO."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 in_shardings=None, out_shardings=None, donate_argnames=(), keep_unused=False,
                 inline=False, compiler_options=None):
        _wraps(self, fun, updated=())        # fun's attributes must not shadow this object's
        self._shardings = (in_shardings, out_shardings)
        self._fun = fun
        self._name = _fun_name(fun)
        self._spec = _ArgSpec(fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
        self._keep_unused, self._inline = bool(keep_unused), bool(inline)
        self._compiler_options = dict(compiler_options or {})
        # call signature -> _CompiledCall, and -> (jaxpr without consts, consts, out_tree)
        if type(self) is JitFunction:
            self._cache, self._traced = _shared_caches(fun, (*self._options(), *self._shardings))
        self._cpp = None        # a weak reference to the C++ function made of this one, if any
        self._with_refs = {}    # refs it closes over (a tuple) -> its jit for calls that thread refs
        self._closed_refs = []  # the eager refs it was found to use (a call threads them in and out)
        self._finds_refs = True  # False for the jit of a threading wrapper: its caller finds them

    def _options(self) -> tuple:
        """What besides the arguments decides the executable: part of every cache key."""
        return (self._spec.argnums, self._spec.argnames, self._spec.donate_argnums, self._spec.donate_argnames,
                self._keep_unused, self._inline, tuple(sorted(self._compiler_options.items())))

    @api_boundary
    def __call__(self, *args, **kwargs):
        # A call C++ does not dispatch (shardings, negative static argnums, C++ dispatch off) is
        # named in profiler traces as jaxlib's PjitFunction names its calls; checked first, as
        # making the event costs ~1 us even when no trace runs.
        if _TraceMe.is_enabled():
            with _TraceMe(f"PjitFunction({self._name})"):
                return self._call(args, kwargs)[0]
        return self._call(args, kwargs)[0]

    # -- the fast path ----------------------------------------------------------
    def c_function(self):
        """This function as jaxlib's C++ ``PjitFunction`` (compiler/engine/cpp_dispatch.py), which is what
        ``jit`` returns where it may: a cached call runs no Python frame, a miss runs this object's
        Python path. Like ``jax.jit``'s, it carries the function's name and docstring and the
        ahead-of-time methods. It holds this object, and this object only a weak reference to it,
        so dropping ``jit(f)`` frees both, and the executables, at once (no cycle to collect)."""
        cpp = runtime.cpp_jit.make_function(self._name, self._fun, self._cache_miss, self._spec.argnums,
                                            sorted(self._spec.argnames), self._options(),
                                            cpp_dispatch.dispatch_registry)
        _wraps(cpp, self._fun)
        cpp._jit = self
        for name in ("lower", "trace", "eval_shape", "clear_cache"):
            setattr(cpp, name, getattr(self, name))
        self._cpp = weakref.ref(cpp)
        return cpp

    @api_boundary
    def _cache_miss(self, *args, **kwargs):
        """jaxlib's C++ dispatch missed: run the call in Python, and hand jaxlib the executable
        when C++ may run it for the calls of this signature (compiler/engine/cpp_dispatch.py)."""
        outs, entry, leaves = self._call(args, kwargs)
        fast = None
        if entry is not None and type(entry) is _CompiledCall and cpp_dispatch.fast_context():
            fast = entry.fastpath(leaves, outs)
        return outs, fast, False

    def _call(self, args, kwargs):
        """The Python path of a call: (results, the cache entry that ran, argument leaves); no
        entry when it ran no executable of its own (in a trace, or with jit disabled)."""
        if _trace_state.stack:         # inside a trace of this thread
            return self._call_in_trace(args, kwargs), None, None
        if _config.jax_disable_jit:
            return self._fun(*args, **kwargs), None, None
        if self._spec.trivial and not kwargs:
            leaves, treedef = _flatten(args)
            key = (treedef, _config.trace_context(),
                   *[x.aval if type(x) is Array else _host_signature(x) for x in leaves])
        else:
            dyn, static, _ = self._spec.split(args, kwargs)
            leaves, treedef = _flatten(dyn)
            key = (treedef, static, _config.trace_context(),
                   *[x.aval if type(x) is Array else _host_signature(x) for x in leaves])
        try:
            entry = self._cache.get(key)
        except TypeError:
            raise _unhashable_static_error(self._name, key) from None
        if entry is None:
            # only a miss can have refs (they have no signature), and a function that closes
            # over refs never leaves an entry: each call passes their values in and out
            if _ref.has_refs(leaves) or self._closed_refs:
                return self._call_threading_refs(args, kwargs, self._closed_refs), None, None
            if _config.jax_explain_cache_misses:
                self._explain_miss(key, args, kwargs)
            try:
                entry = self._compile(args, kwargs)
            except _ref.Unthreaded as e:
                if e.ref._trace is not None or not self._finds_refs:
                    raise
                return self._call_threading_refs(args, kwargs, self._closed_refs), None, None
            self._cache[key] = entry
        if _config.jax_debug_nans or _config.jax_debug_infs:
            if self._spec.donate_argnums or self._spec.donate_argnames:     # the op-by-op rerun needs what the call donates
                args, kwargs = tree_map(lambda x: x.copy() if type(x) is Array else x, (args, kwargs))
            outs = entry(leaves)
            float_checks.check_jit_outputs(self._fun, args, kwargs, outs)
            return outs, None, None
        return entry(leaves), entry, leaves

    def _explain_miss(self, key, args, kwargs) -> None:
        compile_guards.explain_miss(self._fun, _key_parts(key), [_key_parts(k) for k in self._cache],
                                    _argument_names(self._spec, args, kwargs))

    def _compile(self, args, kwargs) -> _CompiledCall:
        weakref.ref(self._fun)      # as JAX's cache: a function it cannot refer to weakly is a TypeError
        cj, out_tree = _trace(self._fun, self._spec, args, kwargs, self._name)
        level = compile_log_level()
        if _logger.isEnabledFor(level):
            _logger.log(level, "Compiling jit(%s) with global shapes and types (%s). Argument mapping: (%s).",
                        self._name, ", ".join(map(repr, cj.in_avals)),
                        ", ".join(["UnspecifiedValue"] * len(cj.in_avals)))
        plan = self._sharded_lowering(cj, out_tree, args, kwargs)
        if plan is not None:
            return spmd.ShardedCall(plan)
        return _CompiledCall(cj, out_tree, f"jit_{self._name}", self._donated_invars(args, kwargs),
                             _compile_options(self._compiler_options), self._keep_unused)

    def _sharded_lowering(self, cj, out_tree, args, kwargs):
        """The program's lowering over several devices, or None when it runs on the default one."""
        leaves, in_tree = _flatten(self._spec.split(args, kwargs)[0])
        ins, outs = self._shardings
        if not spmd.needs_spmd(cj, leaves, ins, outs):
            return None
        return spmd.ShardedLowering(cj, out_tree, f"jit_{self._name}", self._donated_invars(args, kwargs), leaves,
                                    spmd.broadcast_args(ins, in_tree),
                                    spmd.broadcast(outs, out_tree, "out_shardings"),
                                    describe=lambda: self._describe_args(args, kwargs))

    def _describe_args(self, args, kwargs):
        """The function's name and its dynamic argument leaves' (``u``, ``x[0]``, ``args[1]``), as
        JAX's errors name them."""
        dyn = self._spec.split(args, kwargs)[0]
        labels = compile_guards.leaf_labels(*dyn)
        try:
            bound = inspect.signature(self._fun).bind(*args, **kwargs).arguments
        except (TypeError, ValueError):
            return self._name, labels
        names = []
        for name, value in bound.items():
            names += [f"{name}{keystr(p)}" for p, _ in tree_flatten_with_path(value)[0]]
        fun = getattr(self._fun, "__qualname__", self._name)
        return fun, names if len(names) == len(labels) else labels

    def _donated_invars(self, args, kwargs) -> tuple:
        spec = self._spec
        if not spec.donate_argnums and not spec.donate_argnames:
            return ()
        _, _, static_pos = spec.split(args, kwargs)
        n = len(args)
        donate = {i % n for i in spec.donate_argnums if -n <= i < n}
        flags = []
        for i, a in enumerate(args):
            if i not in static_pos:
                flags += [i in donate] * _flatten(a)[1].num_leaves
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in spec.argnames}
        for k in sorted(dyn_kwargs):      # the order in which a dict's leaves flatten
            flags += [k in spec.donate_argnames] * _flatten(dyn_kwargs[k])[1].num_leaves
        return tuple(flags)

    def _call_threading_refs(self, args, kwargs, closed: list):
        """A call that uses refs, among its arguments or of the calling code (``closed``, to
        which the refs its trace turns out to use are added): the program takes their values
        and returns their final ones, which go back into the refs (compiler/ref.py), as JAX
        threads a jit function's refs."""
        args, kwargs, refs = _ref.unwrap_refs(args, kwargs)

        def call():
            values = [r._value for r in closed]
            return self._threading_jit(tuple(closed))(*args, **kwargs, **{_ref.CLOSED_VALUES: values})
        outs, finals, closed_finals = _ref.discover_closed_refs(call, closed, refs, self._name)
        _ref.write_back(refs, finals)
        _ref.write_back(closed, closed_finals)
        return outs

    def _threading_jit(self, closed: tuple) -> "JitFunction":
        """This function's jit for calls threading refs, ``closed`` among them. Kept when the
        closed refs are eager ones (the function's own, for every call); refs of a trace around
        are that trace's only."""
        jf = self._with_refs.get(closed)
        if jf is None:
            spec = self._spec
            jf = JitFunction(_ref.thread_refs(self._fun, closed), spec.argnums, spec.argnames,
                             spec.donate_argnums, *self._shardings, spec.donate_argnames,
                             self._keep_unused, self._inline, self._compiler_options)
            jf._finds_refs = False
            if not closed or closed[0]._trace is None:
                self._with_refs[closed] = jf
        return jf

    # -- inside another trace: a `jit` equation ---------------------------------
    def _call_in_trace(self, args, kwargs):
        dyn, static, _ = self._spec.split(args, kwargs)
        leaves, treedef = _flatten(dyn)
        try:
            key = (treedef, static, dt.config.trace_context(), *[get_aval(x) for x in leaves])
        except TypeError:   # no array: tracing raises the error naming the argument
            if _ref.has_refs(leaves):
                return self._call_threading_refs(args, kwargs, [])
            key = None
        try:
            traced = self._traced.get(key)
        except TypeError:
            raise _unhashable_static_error(self._name, key) from None
        if traced is None:
            try:
                cj, out_tree = _trace(self._fun, self._spec, args, kwargs, self._name)
            except _ref.Unthreaded as e:      # it writes a ref of the trace around: threaded through
                if e.ref._trace is not current_builder() or not self._finds_refs:
                    raise
                return self._call_threading_refs(args, kwargs, [])
            jaxpr, consts = close_over_consts(cj)
            traced = (jaxpr, consts, out_tree)
            if not any(isinstance(c, Tracer) for c in consts):   # closing over tracers: trace-specific
                self._traced[key] = traced
        jaxpr, consts, out_tree = traced
        ins, out_shardings = self._shardings     # constraints on the nested call's operands, results
        if ins is not None:
            leaves = spmd.constrain(leaves, spmd.broadcast_args(ins, treedef), f"jit of '{self._name}'")
        if self._inline:        # the equations themselves, not a nested call of them
            outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *consts, *leaves)
        else:
            outs = jit_p.bind(*consts, *leaves, jaxpr=jaxpr, name=self._name)
        if out_shardings is not None:
            outs = spmd.constrain(outs, spmd.broadcast(out_shardings, out_tree, "out_shardings"),
                                  f"jit of '{self._name}'")
        return out_tree.unflatten(outs)

    # -- ahead of time ------------------------------------------------------------
    @api_boundary
    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace and lower for these arguments (arrays, scalars or ShapeDtypeStructs)."""
        return self.trace(*args, **kwargs).lower()

    @api_boundary
    def trace(self, *args, **kwargs) -> "Traced":
        """Trace for these arguments: the jaxpr, ready to lower (``jax.stages.Traced``)."""
        cj, out_tree = _trace(self._fun, self._spec, args, kwargs, self._name, abstract=True)
        in_tree = _flatten(self._spec.split(args, kwargs)[0])[1]
        donated = self._donated_invars(args, kwargs)
        return Traced(cj, in_tree, out_tree, self._name, donated, lambda: Lowered(
            cj, in_tree, out_tree, f"jit_{self._name}", donated,
            self._sharded_lowering(cj, out_tree, args, kwargs), self._keep_unused, self._compiler_options,
            _argument_names(self._spec, args, kwargs)))

    @api_boundary
    def eval_shape(self, *args, **kwargs):
        cj, out_tree = _trace(self._fun, self._spec, args, kwargs, self._name, abstract=True)
        return key_moves.abstract_keys_out(out_tree.unflatten([_shape_struct(a) for a in cj.out_avals]))

    def _cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()
        self._traced.clear()
        cpp = self._cpp and self._cpp()
        if cpp is not None:
            cpp._clear_cache()

    def __get__(self, obj, objtype=None):   # jit on a method binds like a function
        return self if obj is None else functools.partial(self, obj)


class _JitUnderMesh(JitFunction):
    """A jit whose shardings name PartitionSpecs, which mean the mesh set when it is called
    (``set_mesh``): its caches are per mesh."""

    def __init__(self, *args, **kwargs):
        self._per_mesh: dict = {}
        super().__init__(*args, **kwargs)

    _cache = property(lambda self: self._caches()[0])
    _traced = property(lambda self: self._caches()[1])

    def _caches(self) -> tuple[dict, dict]:
        return self._per_mesh.setdefault(sharding.context_mesh(), ({}, {}))

    def __repr__(self):
        return f"<jitted function {self._name}>"


def _unhashable_static_error(name, key) -> ValueError:
    return ValueError(
        f"Non-hashable static arguments are not supported: a static argument of the jitted "
        f"function '{name}' is unhashable ({key[1]!r}). Static arguments (static_argnums / "
        "static_argnames) must be hashable values such as ints, strings or tuples; pass arrays "
        "as regular (traced) arguments instead.")


def _check_callable(fun) -> None:
    """What JAX refuses to jit, with its TypeErrors."""
    if isinstance(fun, staticmethod):
        raise TypeError(f"staticmethod arguments are not supported, got {fun}")
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun}")
    if inspect.isgeneratorfunction(fun):
        raise TypeError(f"Expected a function, got a generator function: {fun}")


def _placement(device, backend):
    """The single-device sharding ``jit(device=, backend=)`` (deprecated in JAX, with its warning)
    asks for, or None for the default device."""
    if device is None and backend is None:
        return None
    if device is not None and backend is not None:
        raise ValueError("can't specify both a device and a backend for jit, got "
                         f"device={device!r} and backend={backend!r}")
    warnings.warn("backend and device argument on jit is deprecated. You can use "
                  "`jax.device_put(..., jax.local_devices(backend=\"cpu\")[0])` on the inputs to the jitted "
                  "function to get the same behavior.", DeprecationWarning, stacklevel=3)
    if device is None:
        from .toplevel import local_devices
        device = local_devices(backend=backend)[0]
    if device == runtime.backend().device:
        return None
    return sharding.SingleDeviceSharding(device)


def jit(fun: Callable | None = None, *, in_shardings=None, out_shardings=None, static_argnums=(),
        static_argnames=(), donate_argnums=(), donate_argnames=(), keep_unused: bool = False, device=None,
        backend: str | None = None, inline: bool = False, compiler_options: dict | None = None):
    """Compile ``fun`` with XLA, once per argument signature; usable as ``@jit`` or ``@jit(...)``.
    ``in_shardings``/``out_shardings`` (a sharding, or one per positional argument / result)
    partition the program over their mesh's devices (jaxprc/spmd.py). As in JAX, arguments the
    program does not use are left out of the executable unless ``keep_unused``; ``inline``
    puts ``fun``'s equations into an enclosing trace instead of a nested ``jit`` equation;
    ``compiler_options``: XLA options by name, as ``Lowered.compile`` takes them.

    >>> f = jaxprc.jit(lambda x: x * 2.0 + 1.0)
    >>> f(jnp.arange(3.0))
    Array([1., 3., 5.], dtype=float32)
    """
    options = dict(static_argnums=static_argnums, static_argnames=static_argnames, donate_argnums=donate_argnums,
                   donate_argnames=donate_argnames, keep_unused=keep_unused, inline=inline,
                   compiler_options=compiler_options)
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings, device=device,
                                 backend=backend, **options)
    _check_callable(fun)
    placement = _placement(device, backend)
    if placement is not None:
        in_shardings = placement if in_shardings is None else in_shardings
        out_shardings = placement if out_shardings is None else out_shardings
    if _names_a_spec((in_shardings, out_shardings)):
        return _JitUnderMesh(fun, in_shardings=in_shardings, out_shardings=out_shardings, **options)
    jf = JitFunction(fun, in_shardings=in_shardings, out_shardings=out_shardings, **options)
    plain = in_shardings is None and out_shardings is None
    if plain and cpp_dispatch.enabled() and all(i >= 0 for i in jf._spec.argnums):
        return jf.c_function()
    return jf


# ------------------------------------------------------------ ahead of time

@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """The type of one argument leaf of a traced, lowered or compiled function, and whether it
    is donated (``jax.stages.ArgInfo``)."""
    _aval: ShapedArray
    donated: bool

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)


class _Stage:
    """What the stages of ``jit(f)`` share: the types of the call signature they are for.
    ``in_tree`` is the structure of the pair (positional arguments, keyword arguments) less
    the static ones; ``_donated``: one flag per argument leaf (empty: none donated)."""

    in_tree = property(lambda self: self._in_tree)
    out_tree = property(lambda self: self._out_tree)

    @property
    def args_info(self):
        donated = self._donated or (False,) * len(self.jaxpr.in_avals)
        return self._in_tree.unflatten([ArgInfo(a, d) for a, d in zip(self.jaxpr.in_avals, donated)])

    @property
    def in_avals(self):
        return self._in_tree.unflatten(list(self.jaxpr.in_avals))

    @property
    def donate_argnums(self) -> tuple:
        """The flat positions of the donated argument leaves."""
        return tuple(i for i, d in enumerate(self._donated) if d)

    # A traced program's results may be weakly typed; once lowered they are arrays of their
    # dtype, and JAX's Lowered/Compiled.out_info say so.
    _weak_results = False

    @property
    def out_info(self):
        """The results as a pytree of ``ShapeDtypeStruct``s."""
        avals = self.jaxpr.out_avals if self._weak_results else [a.strip_weak_type() for a in self.jaxpr.out_avals]
        return self._out_tree.unflatten([_shape_struct(a) for a in avals])


class Traced(_Stage):
    """``jit(f).trace(*args)``: the jaxpr of one call signature, ready to lower."""

    _weak_results = True

    def __init__(self, cj: ClosedJaxpr, in_tree, out_tree, name: str, donated_invars, lower):
        self.jaxpr = cj
        self._in_tree, self._out_tree, self._donated = in_tree, out_tree, tuple(donated_invars)
        self.fun_name = name
        self._lower = lower

    @property
    def out_avals(self):
        return self._out_tree.unflatten(list(self.jaxpr.out_avals))

    def lower(self, *, lowering_platforms: tuple[str, ...] | None = None) -> "Lowered":
        here = default_backend()
        if lowering_platforms is not None and tuple(lowering_platforms) != (here,):
            raise ValueError(f"Traced.lower of '{self.fun_name}': jaxprc lowers for the platform it "
                             f"runs on ('{here}'), not lowering_platforms={tuple(lowering_platforms)}.")
        return self._lower()

    def __call__(self, *args, **kwargs):
        """Evaluate the traced jaxpr on arguments of its signature (op by op, as JAX does)."""
        leaves = _leaves_of_signature(self._in_tree, args, kwargs, "traced")
        return self._out_tree.unflatten(eval_jaxpr(self.jaxpr.jaxpr, self.jaxpr.consts, *leaves))


def _leaves_of_signature(in_tree, args, kwargs, stage: str) -> list:
    """The argument leaves of a call of a traced or compiled function; a call of another
    structure is JAX's TypeError listing each difference."""
    leaves, tree = _flatten((args, kwargs))
    if tree != in_tree:
        seen_args, seen_kwargs = in_tree.unflatten([0] * in_tree.num_leaves)
        errors = [*equality_errors(seen_args, args, "args"), *equality_errors(seen_kwargs, kwargs, "kwargs")]
        raise TypeError(
            f"Function {stage} with input pytree does not match the input pytree it was called with. There are "
            f"{len(errors)} mismatches, including:\n" + "\n".join(
                f"    * at {path}, seen {seen} but now given {given}, so {why}" for path, seen, given, why in errors)
            + "\n(Static arguments are not passed again.)")
    return leaves


def _argument_names(spec: _ArgSpec, args, kwargs) -> list[str]:
    """Each dynamic argument leaf named by its parameter and path in it (``x['a']``), as JAX's
    messages name them."""
    dyn, _, static_pos = spec.split(args, kwargs)
    positions = [i for i in range(len(static_pos) + len(dyn[0])) if i not in static_pos]
    names = []
    for keys, _ in _registry.flatten_with_path(dyn)[0]:
        (which, key), rest = keys[:2], keystr(keys[2:])
        if which.idx == 1:
            names.append(key.key + rest)
        else:
            i = positions[key.idx]
            names.append((spec.positional_names[i] if i < len(spec.positional_names) else f"args[{i}]") + rest)
    return names


class Lowered(_Stage):
    """``jit(f).lower(*args)``: the StableHLO of one call signature."""

    def __init__(self, cj: ClosedJaxpr, in_tree, out_tree, name: str, donated_invars, sharded=None,
                 keep_unused: bool = False, compiler_options: dict | None = None, arg_names=None):
        self.jaxpr = cj
        self._arg_names = arg_names or compile_guards.leaf_labels(*in_tree.unflatten([0] * in_tree.num_leaves))
        self._in_tree, self._out_tree = in_tree, out_tree
        self._name = name
        self._donated = tuple(donated_invars)
        self._sharded = sharded          # over several devices: spmd.ShardedLowering
        self._keep_unused, self._compiler_options = keep_unused, dict(compiler_options or {})
        if sharded is None:
            program, _, donated = _prune_unused(cj, self._donated, keep_unused)
            self._lowered = dispatch.lower_jaxpr(program, name=name, donated_invars=donated,
                                                 platform=default_backend())
        else:
            self._lowered = sharded.lowered

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """StableHLO text (``dialect="hlo"``: XLA's HLO text); ``debug_info=True`` shows the
        ``loc(...)`` source locations."""
        if _dialect(dialect) == "hlo":
            return self._hlo().as_hlo_text()
        return self._lowered.as_text(debug_info=debug_info)

    def compiler_ir(self, dialect: str | None = None):
        """The MLIR module (``dialect="hlo"``: jaxlib's ``XlaComputation``)."""
        return self._hlo() if _dialect(dialect) == "hlo" else self._lowered.module

    def _hlo(self):
        return _jax.mlir.mlir_module_to_xla_computation(str(self._lowered.module), use_tuple_args=False,
                                                        return_tuple=False)

    def cost_analysis(self) -> dict:
        """XLA's estimate (flops, transcendentals, bytes accessed) of the unoptimized program."""
        return _jax.hlo_module_cost_analysis(runtime.backend().client, self._hlo().get_hlo_module())

    def compile(self, compiler_options: dict | None = None) -> "Compiled":
        """XLA's executable. ``compiler_options``: XLA options by name (``{"xla_cpu_enable_fast_math":
        True}``), as JAX passes them, over those given to ``jit``; an unknown one is an
        XlaCompileError."""
        compiler_options = {**self._compiler_options, **(compiler_options or {})}
        if self._sharded is not None:
            if compiler_options:
                raise ValueError(f"Lowered.compile of '{self._name}': compiler_options are not supported "
                                 "for programs over several devices.")
            return Compiled(spmd.ShardedCall(self._sharded), self._in_tree, self._donated, self._arg_names)
        return Compiled(_CompiledCall(self.jaxpr, self._out_tree, self._name, self._donated,
                                      _compile_options(compiler_options), self._keep_unused),
                        self._in_tree, self._donated, self._arg_names)


def _compile_options(compiler_options: dict | None):
    """XLA's CompileOptions carrying ``compiler_options``; the ones JAX sets on the build options
    go there, the others are overrides of XLA's debug options."""
    if not compiler_options:
        return None
    options = xc.CompileOptions()
    overrides = dict(compiler_options)
    for name in ("exec_time_optimization_effort", "memory_fitting_effort", "optimization_level",
                 "memory_fitting_level"):
        if name in overrides:
            setattr(options.executable_build_options, name, overrides.pop(name))
    options.env_option_overrides = list(overrides.items())
    return options


def _dialect(dialect: str | None) -> str:
    if dialect not in (None, "stablehlo", "hlo"):
        raise ValueError(f"Unknown dialect {dialect!r}: jaxprc gives 'stablehlo' (the default) and 'hlo'.")
    return dialect or "stablehlo"


class Compiled(_Stage):
    """``jit(f).lower(*args).compile()``: callable on arguments of the lowered signature (its
    non-static arguments, positional and keyword, in the same container structure)."""

    def __init__(self, call: _CompiledCall, in_tree, donated_invars=(), arg_names=()):
        self._call, self._in_tree = call, in_tree
        self._out_tree = call.out_tree if isinstance(call, _CompiledCall) else call.plan.out_tree
        self._donated = tuple(donated_invars)
        self._arg_names = list(arg_names)

    jaxpr = property(lambda self: self._call.jaxpr)

    def as_text(self) -> str:
        """XLA's optimized HLO."""
        return self._call.executable.as_text()

    def memory_analysis(self):
        return self._call.executable.memory_analysis()

    def cost_analysis(self):
        return self._call.executable.cost_analysis()

    @property
    def input_shardings(self):
        """Where each argument leaf is expected, as a pytree like ``args_info``."""
        return self._in_tree.unflatten(self._shardings(self._call.jaxpr.in_avals, "in_hlo"))

    @property
    def output_shardings(self):
        """Where each result is put, as a pytree like ``out_info``."""
        if isinstance(self._call, _CompiledCall):
            return self._out_tree.unflatten(self._shardings(self._call.jaxpr.out_avals, "out_hlo"))
        return self._out_tree.unflatten(list(self._call.out_shardings))

    def _shardings(self, avals, which: str) -> list:
        if isinstance(self._call, _CompiledCall):      # one device: the default one
            return [sharding.SingleDeviceSharding(runtime.backend().device)] * len(avals)
        hlos = getattr(self._call.executable, which) or [runtime.sharded.REPLICATED] * len(avals)
        return [self._call._named(h, a.ndim) for h, a in zip(hlos, avals)]

    def runtime_executable(self):
        """jaxlib's loaded executable (None for a program XLA runs in several parts)."""
        return getattr(self._call.executable, "loaded", None)

    def __call__(self, *args, **kwargs):
        leaves = _leaves_of_signature(self._in_tree, args, kwargs, "compiled")
        for x in leaves:
            if isinstance(x, Tracer):
                raise TypeError("Cannot apply JAX transformations to a function lowered and compiled for a "
                                f"particular signature. Detected argument of Tracer type {type(x)}.")
        mismatches = []
        for name, want, x in zip(self._arg_names, self._call.jaxpr.in_avals, leaves):
            got = get_aval(x)
            if (got.shape, got.dtype) != (want.shape, want.dtype):
                mismatches.append(f"Argument '{name}' compiled with {runtime_aval(want).str_short()} and "
                                  f"called with {runtime_aval(got).str_short()}")
        if mismatches:
            raise TypeError("Argument types differ from the types for which this computation was compiled. "
                            "Perhaps you are calling the compiled executable with a different enable_x64 mode "
                            "than when it was AOT compiled? The mismatches are:\n" + "\n".join(mismatches))
        return self._call(leaves)


# ---------------------------------------------------- the `jit` primitive

_JIT_IMPLS = ByIdentity()


def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str):
    """Eager binding of ``jit`` (outside any trace): compile its jaxpr once and run it."""
    def make():
        out_tree = _registry.flatten([0] * len(jaxpr.out_avals))[1]
        if spmd.needs_spmd(jaxpr, args, None, None):      # over several devices (jaxprc/spmd.py)
            return spmd.ShardedCall(spmd.ShardedLowering(jaxpr, out_tree, f"jit_{name}", (), args))
        return _CompiledCall(jaxpr, out_tree, f"jit_{name}", ())
    call = _JIT_IMPLS.get(jaxpr, make)
    return call(list(args))


jit_p.def_impl(_jit_impl)
