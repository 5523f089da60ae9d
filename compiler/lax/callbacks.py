"""Host callbacks: programs that call Python functions, as JAX's callback primitives.

- ``debug_callback[callback, effect, partitioned]`` *args: no results; effect
  ``Effect.debug`` or ``Effect.ordered_debug`` (``jaxprc.debug.print`` / ``.callback``).
- ``pure_callback[callback, result_avals, vmap_method, device]`` *args: results of
  ``result_avals``; pure (DCE drops it when unused, CSE merges equal calls).
- ``io_callback[callback, result_avals, ordered, device]`` *args: results of
  ``result_avals``; effect ``io`` or ``ordered_io``.
  ``device``: None, or the id of the device it runs on in a program over several.

``callback`` is a ``jaxprc.ir.HostCallback``: flat arrays in, a flat sequence
of results out. Compiled, each is a ``stablehlo.custom_call`` of jaxlib's
Python callback target, whose ``index`` names the function in the list handed
to the compiler with the module; ordered ones take and return the lowering's
token. jaxlib checks nothing a callback returns (notes: a wrong shape gave
garbage), so every call goes through ``_host_call``, which checks the results as
JAX does (number, shape, dtype after canonicalization: a Python float or an
int list are fine, a float64 array for float32 is too when x64 is off) and
records an exception for the error raised at the call (runtime/effects.py).
In a program over several devices XLA needs a sharding on each call: inside a
shard_map body it runs on every device with its blocks (a debug callback in a
partially manual body: once per manual block), elsewhere once with whole values
on the first device or the one ``sharding=`` names (``_sharding``);
``partitioned`` debug callbacks use jaxlib's partitioned target (per shard).
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax, runtime
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive
from jaxprc.ir.effects import Effect
from jaxprc.ir.host_callback import HostCallback
from jaxprc.ir.params import Aval, Bool, Checker, Enum, Int, OneOf, Str, Tuple
from jaxprc.ir.tree_util import tree_leaves
from jaxprc.passes.vmap import axis_size_of
from jaxprc.runtime.effects import record_callback_error
from .sharding_constraint import sdy_sharding
from jaxlib.mlir.dialects import sdy

from .parallel import _axis_index_lowering, _with_axis_env

__all__ = ["debug_callback_p", "pure_callback_p", "io_callback_p"]

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")


class _Callback(Checker):
    def problem(self, value):
        return None if isinstance(value, HostCallback) else "not a HostCallback"

    def __str__(self):
        return 'a host callback, HostCallback(name="...")'


# ------------------------------------------------------------- primitives

debug_callback_p = Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.def_params(callback=_Callback(), effect=Enum(Effect), partitioned=Bool())
# (an effect param of the wrong kind has none: the verifier names that param)
debug_callback_p.def_effects(lambda *, effect, **_: {effect} if isinstance(effect, Effect) else set())

pure_callback_p = Primitive("pure_callback")
pure_callback_p.multiple_results = True
pure_callback_p.def_params(callback=_Callback(), result_avals=Tuple(Aval()),
                           vmap_method=OneOf(None, Str()), device=OneOf(None, Int(0)))

io_callback_p = Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.def_params(callback=_Callback(), result_avals=Tuple(Aval()), ordered=Bool(),
                         device=OneOf(None, Int(0)))
io_callback_p.def_effects(lambda *, ordered, **_: {Effect.ordered_io if ordered else Effect.io})


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract_eval(*avals, callback, effect, partitioned):
    if effect not in (Effect.debug, Effect.ordered_debug):
        raise JaxprTypeError(f"debug_callback: effect must be Effect.debug or Effect.ordered_debug, "
                             f"got {effect!r}")
    return []


@pure_callback_p.def_abstract_eval
def _pure_callback_abstract_eval(*avals, callback, result_avals, vmap_method, device):
    if vmap_method not in (None, *VMAP_METHODS):
        raise JaxprTypeError(f"pure_callback: vmap_method must be one of {VMAP_METHODS} or None, "
                             f"got {vmap_method!r}")
    return [a.strip_weak_type() for a in result_avals]


@io_callback_p.def_abstract_eval
def _io_callback_abstract_eval(*avals, callback, result_avals, ordered, device):
    return [a.strip_weak_type() for a in result_avals]


# ------------------------------------------------------- calling the host

def _host_call(callback: HostCallback, args, result_avals, debug: bool = False) -> tuple:
    """Run ``callback`` on host arrays (copied: XLA's buffers die with the call); its results
    (ignored for a ``debug`` callback) checked and converted as JAX does (``_wrapped_callback``
    in jax/_src/callback.py) into exactly typed numpy arrays."""
    try:
        outs = callback(*[_host_array(a, debug) for a in args])
        return () if debug else _checked_results(callback.name, tree_leaves(outs), result_avals)
    except BaseException as e:
        record_callback_error(e)     # the error raised at the call carries it (runtime/effects.py)
        raise


def _host_array(x, debug: bool):
    """An argument as the callback sees it, as JAX passes it: a copy of its canonical dtype (a
    Python scalar or a 64-bit numpy value without x64 is 32-bit); a debug callback keeps the weak
    type of a Python scalar or a weak array, pure and io callbacks pass none."""
    if type(x) in (bool, int, float, complex):
        dtype, weak = dt.python_scalar_dtype(x), type(x) is not bool
    else:
        dtype, weak = dt.canonicalize_dtype(np.result_type(x)), bool(getattr(x, "weak_type", False))
    return runtime.device_put(np.array(x, dtype=dtype), weak_type=debug and weak)


def _checked_results(name: str, outs, result_avals) -> tuple:
    if len(outs) != len(result_avals):
        raise RuntimeError(f"The host callback '{name}' returned {len(outs)} result(s), expected "
                           f"{len(result_avals)} ({', '.join(a.str_short() for a in result_avals)})")
    checked = []
    for i, (out, aval) in enumerate(zip(outs, result_avals)):
        value = np.asarray(out)
        value = value.astype(dt.canonicalize_dtype(value.dtype), copy=False)
        if value.shape != aval.shape:
            raise RuntimeError(f"The host callback '{name}' returned result {i} of shape {value.shape}, "
                               f"expected shape {aval.shape} ({aval.str_short()})")
        if value.dtype != aval.dtype:
            raise RuntimeError(f"The host callback '{name}' returned result {i} of dtype {value.dtype}, "
                               f"expected dtype {aval.dtype} ({aval.str_short()})")
        checked.append(value if value.flags.c_contiguous else value.copy(order="C"))
    return tuple(checked)


def _eager(*args, callback, result_avals=(), **params):
    """Outside any trace the callback runs at once, on the host."""
    return [runtime.device_put(x) for x in _host_call(callback, args, result_avals, "effect" in params)]


for _p in (debug_callback_p, pure_callback_p, io_callback_p):
    _p.def_impl(_eager)


# -------------------------------------------------------------------- jvp

def _debug_callback_jvp(primals, tangents, **params):
    """Prints the primal values; no tangents (it has no results)."""
    return debug_callback_p.bind(*primals, **params), []


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _pure_callback_transpose(*args, **params):
    raise ValueError("Pure callbacks do not support transpose. Please use `jax.custom_vjp` to use "
                     "callbacks while taking gradients.")


def _io_callback_transpose(*args, **params):
    raise ValueError("IO callbacks do not support transpose.")


ad.primitive_jvps[debug_callback_p] = _debug_callback_jvp
ad.primitive_jvps[pure_callback_p] = _pure_callback_jvp
ad.primitive_jvps[io_callback_p] = _io_callback_jvp
ad.primitive_transposes[debug_callback_p] = lambda ct, *args, **params: [None] * len(args)
ad.primitive_transposes[pure_callback_p] = _pure_callback_transpose
ad.primitive_transposes[io_callback_p] = _io_callback_transpose


# --------------------------------------------------------------- batching

def _debug_callback_batch(args, dims, **params):
    """One call per batch element, in order (as JAX: a debug print shows each element)."""
    for i in range(axis_size_of(args, dims)):
        debug_callback_p.bind(*[x if d is None else lax.index_in_dim(x, i, d, keepdims=False)
                                for x, d in zip(args, dims)], **params)
    return [], []


def _sequential(prim, args, dims, unroll: bool, **params):
    """The callback called once per batch element, by a scan over the batched operands."""
    batched = [batching.moveaxis(x, d, 0) for x, d in zip(args, dims) if d is not None]

    def body(_, xs):
        xs = iter(xs)
        return (), prim.bind(*[x if d is None else next(xs) for x, d in zip(args, dims)], **params)
    _, outs = lax.scan(body, (), batched, unroll=unroll)
    return list(outs), [0] * len(outs)


def batch_by_vmap_method(prim, args, dims, vmap_method, result_avals, **params):
    """The batching a ``vmap_method`` names, for a call of foreign code (pure_callback, ffi_call)
    whose results are ``result_avals`` and whose other params are ``params``."""
    params = dict(params, vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(prim, args, dims, vmap_method == "sequential_unrolled",
                           result_avals=result_avals, **params)
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap is only supported for the {prim.name} primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    size = axis_size_of(args, dims)
    moved = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    if vmap_method != "legacy_vectorized":     # unbatched operands get a leading axis: 1 or the size
        n = size if vmap_method == "broadcast_all" else 1
        moved = [lax.broadcast(x, (n,)) if d is None else x for x, d in zip(moved, dims)]
    batched_avals = tuple(a.update(shape=(size, *a.shape)) for a in result_avals)
    outs = prim.bind(*moved, result_avals=batched_avals, **params)
    return list(outs), [0] * len(outs)


def _pure_callback_batch(args, dims, *, callback, result_avals, vmap_method, device):
    return batch_by_vmap_method(pure_callback_p, args, dims, vmap_method, result_avals,
                                callback=callback, device=device)


def _io_callback_batch(args, dims, *, callback, result_avals, ordered, device):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    return _sequential(io_callback_p, args, dims, False, callback=callback, result_avals=result_avals,
                       ordered=ordered, device=device)


batching.primitive_batchers[debug_callback_p] = _debug_callback_batch
batching.primitive_batchers[pure_callback_p] = _pure_callback_batch
batching.primitive_batchers[io_callback_p] = _io_callback_batch


# --------------------------------------------------------------- lowering

def _layouts(ranks) -> ir.ArrayAttr:
    """Row-major layouts (minor-to-major ``n-1 .. 0``) of values of these ranks (tokens: 0)."""
    return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(np.arange(r - 1, -1, -1, dtype=np.int64),
                                                         type=ir.IndexType.get()) for r in ranks])


def _sharding(ctx, device, n: int):
    """Where the call runs in a program over several devices (None otherwise: XLA needs a
    sharding on it there). Inside a shard_map body: on every device with its own blocks (JAX's
    per-device semantics), replicated shardings of the mesh-less ``{manual}`` kind, one per result
    (one when there are none). Elsewhere: once, with whole values, on the first device of the
    program or on ``device`` (a device id), a maximal sharding for each of the ``n`` results."""
    mctx = ctx.module_context
    mesh, manual = getattr(mctx, "mesh", None), getattr(mctx, "manual_axes", None)
    if mesh is None or int(np.prod(mesh.axis_sizes)) == 1:
        devices = mctx.devices
        if devices is None or len(devices) == 1:
            return None
        if device is not None and device not in devices:
            raise ValueError(f"{ctx.primitive.name}: its sharding names device {device}, which is not "
                             f"one of the program's devices {list(devices)}")
        index = 0 if device is None else devices.index(device)
        return ir.Attribute.parse("#sdy.sharding_per_value<[" + ", ".join(
            [f"<mesh<[], device_ids=[{index}]>, []>"] * n) + "]>")
    if device is not None:
        raise NotImplementedError(f"{ctx.primitive.name}: sharding= is not supported inside a "
                                  "shard_map body (the callback runs on every device)")
    if set(manual) != set(mesh.axis_names):
        raise NotImplementedError(
            f"{ctx.primitive.name} inside a shard_map is only supported when all mesh axes are manual; "
            f"this one has manual axes {tuple(manual)} of the mesh's {tuple(mesh.axis_names)}")
    ranks = [a.ndim for a in ctx.avals_out] or [0]
    return ir.Attribute.parse("#sdy.sharding_per_value<[" + ", ".join(
        "<mesh<[]>, [" + ", ".join(["{}"] * r) + "]>" for r in ranks) + "]>")


def _emit_callback(ctx, callback: HostCallback, args, *, side_effect: bool, ordered: bool,
                   debug: bool = False, partitioned: bool = False, device=None):
    """A custom call of ``callback`` on ``args`` with ``ctx.avals_out`` results; ordered ones
    consume and produce the ordered-effects token. ``partitioned`` ones run on each device's
    shards of their operands (jaxlib's partitioned target)."""
    result_avals = list(ctx.avals_out)

    def host(*values):
        if ordered:           # the token operand arrives as None and goes back first
            return (values[0], *_host_call(callback, values[1:], result_avals, debug))
        return _host_call(callback, values, result_avals, debug)

    index = ctx.add_host_callback(host)
    operands = list(args)
    result_types = [mlir.aval_to_ir_type(a) for a in result_avals]
    in_ranks, out_ranks = [a.ndim for a in ctx.avals_in], [a.ndim for a in result_avals]
    if ordered:
        operands = [ctx.get_token()] + operands
        result_types = [hlo.TokenType.get()] + result_types
        in_ranks, out_ranks = [0] + in_ranks, [0] + out_ranks
    sharding = _sharding(ctx, device, max(1, len(result_types)))
    device = "cpu" if ctx.platform == "cpu" else "gpu"
    target = f"xla_ffi{'_partitioned' if partitioned else ''}_python_{device}_callback"
    op = hlo.CustomCallOp(
        result_types, operands, ir.StringAttr.get(target),
        has_side_effect=ir.BoolAttr.get(side_effect),
        backend_config=ir.DictAttr.get({"index": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), index)}),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        operand_layouts=_layouts(in_ranks), result_layouts=_layouts(out_ranks))
    if sharding is not None:
        op.attributes["sdy.sharding"] = sharding
    results = list(op.results)
    if ordered:
        ctx.set_token(results[0])
        results = results[1:]
    return results


def _debug_callback_lowering(ctx, *args, callback, effect, partitioned):
    emit = lambda *xs: _emit_callback(ctx, callback, xs, side_effect=True,  # noqa: E731
                                      ordered=effect.ordered, debug=True, partitioned=partitioned)
    mctx = ctx.module_context
    mesh, manual = getattr(mctx, "mesh", None), getattr(mctx, "manual_axes", None)
    if mesh is not None and int(np.prod(mesh.axis_sizes)) > 1 and set(manual) != set(mesh.axis_names):
        return _once_per_manual_block(ctx, args, emit)
    return emit(*args)


def _once_per_manual_block(ctx, args, emit) -> list:
    """In a partially manual shard_map body, a debug callback runs once per manual block, with
    its whole value (as JAX): in a manual computation over the other axes, on the devices at
    index 0 along them."""
    mctx = ctx.module_context
    mesh = mctx.mesh
    auto = [n for n in mesh.axis_names if n not in mctx.manual_axes]
    whole = sdy.TensorShardingPerValueAttr.get([sdy_sharding(mesh._replace(dims=()), a.ndim) for a in ctx.avals_in])
    op = sdy.ManualComputationOp([], list(args), whole, sdy.TensorShardingPerValueAttr.get([]),
                                 sdy.ManualAxesAttr.get([ir.StringAttr.get(n) for n in auto]))
    block = op.body.blocks.append(*[mctx.ir_type(a) for a in ctx.avals_in])

    def body():
        zero = mlir.ir_constant(np.int32(0))
        first = None
        for n in auto:
            at_zero = mlir.compare(_axis_index_lowering(ctx, axis_name=n), zero, "EQ", np.dtype(np.int32))
            first = at_zero if first is None else hlo.and_(first, at_zero)
        cond = hlo.IfOp([], first)
        with ir.InsertionPoint(cond.true_branch.blocks.append()):
            emit(*block.arguments)
            hlo.return_([])
        with ir.InsertionPoint(cond.false_branch.blocks.append()):
            hlo.return_([])
        sdy.ReturnOp([])
    with ir.InsertionPoint(block):
        _with_axis_env(mctx, mesh, mesh.axis_names, body)
    return []


def _pure_callback_lowering(ctx, *args, callback, result_avals, vmap_method, device):
    return _emit_callback(ctx, callback, args, side_effect=False, ordered=False, device=device)


def _io_callback_lowering(ctx, *args, callback, result_avals, ordered, device):
    return _emit_callback(ctx, callback, args, side_effect=True, ordered=ordered, device=device)


mlir.register_lowering(debug_callback_p, _debug_callback_lowering)
mlir.register_lowering(pure_callback_p, _pure_callback_lowering)
mlir.register_lowering(io_callback_p, _io_callback_lowering)
