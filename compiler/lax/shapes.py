"""The shape family: primitives that broadcast, reshape, permute, reverse, pad or join arrays.

They move elements without arithmetic (``iota`` makes them). Params that
describe shapes and axes are tuples of Python ints (the builders normalise what
users pass). Results keep the operand's weak type, as in JAX; primitives that
merge several arrays are weak only when all of them are.

Also here: the typing-error helpers the other structural families share
(``type_error``, ``check_axes``), and the driver operations the passes emit
(``full``, ``transpose``, ``broadcast_in_dim``, supplied to ``passes.emit``).
"""
from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.engine import dynamic_shapes
from jaxprc.engine.lowering import broadcast_in_dim as _hlo_broadcast_in_dim
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, JaxprValueError, Primitive, ShapedArray
from jaxprc.ir.shape_poly import is_constant_shape
from jaxprc.ir.params import DType, Int, OneOf, Size, Tuple
from jaxprc.ir import sharding_type as st
from .sharding_constraint import out_sharding_of
from .elementwise import NUM, fmt_types, _convert
from jaxprc.ir.tracing import Tracer
from jaxprc.passes import emit
from jaxprc.passes.jvp import Zero, aval_of
from jaxprc.passes.canonicalize import CANONICALIZE
from jaxprc.passes.patterns import Pat, bind, pattern, splat_forms
from jaxprc.passes.transpose import is_undefined_primal
from jaxprc.passes.vmap import align, axis_size_of, full as _batch_full, matchaxis, moveaxis, scalar, shift

from .support import operands as ops

__all__ = [
    "broadcast_in_dim", "broadcast", "broadcast_to_rank", "reshape", "transpose", "squeeze",
    "expand_dims", "collapse", "rev", "pad", "concatenate", "iota", "broadcasted_iota",
    "full", "full_like", "zeros_like_array",
    "broadcast_in_dim_p", "reshape_p", "transpose_p", "squeeze_p", "rev_p", "pad_p", "concatenate_p",
    "iota_p",
]


# ------------------------------------------------------------------ typing

def type_error(name: str, avals, expected: str, error: type = JaxprTypeError, **params) -> JaxprTypeError:
    """The one-paragraph typing error: primitive, operand types, params, what was expected
    (``error``: ``JaxprValueError`` where JAX raises a ValueError)."""
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    with_params = f" with {shown}" if shown else ""
    return error(f"{name} got operands ({fmt_types(avals)}){with_params}; expected {expected}")


def check_axes(name: str, aval: ShapedArray, axes, what: str = "axes", **params) -> None:
    """``axes`` are distinct valid dimensions of ``aval``."""
    if len(set(axes)) != len(axes) or any(not 0 <= a < aval.ndim for a in axes):
        raise type_error(name, [aval], f"{what} to be distinct dimensions in [0, {aval.ndim})",
                         **{what: axes}, **params)


# The params' kinds (jaxprc.ir.params); the typing rules check how they fit the operands.
DIM = Int(min=0)            # an axis
SIZE = Size(min=0)          # a dimension's size (an int or symbolic)
DIMS, SIZES = Tuple(DIM), Tuple(SIZE)


# ----------------------------------------------------------- broadcast_in_dim
broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.def_params(shape=SIZES, broadcast_dimensions=DIMS)


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_rule(x, *, shape, broadcast_dimensions):
    params = dict(shape=shape, broadcast_dimensions=broadcast_dimensions)
    if x.dtype == dt.token:        # (a vmapped function returning a token lands here)
        raise type_error("broadcast_in_dim", [x], "an array (tokens cannot be broadcast or batched)", **params)
    if len(broadcast_dimensions) != x.ndim:
        raise type_error("broadcast_in_dim", [x], f"one broadcast dimension per operand dimension "
                         f"({x.ndim})", **params)
    if broadcast_dimensions and (
            not 0 <= broadcast_dimensions[0] or not broadcast_dimensions[-1] < len(shape) or
            any(a >= b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:]))):
        raise type_error("broadcast_in_dim", [x], f"strictly increasing broadcast_dimensions in "
                         f"[0, {len(shape)})", **params)
    if any(d < 0 for d in shape):
        raise type_error("broadcast_in_dim", [x], "a shape of non-negative sizes", **params)
    for k, d in enumerate(broadcast_dimensions):
        if x.shape[k] not in (1, shape[d]):
            raise type_error("broadcast_in_dim", [x], f"operand dimension {k} (size {x.shape[k]}) "
                             f"to be 1 or the size of result dimension {d} ({shape[d]})", **params)
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_sharding_rule
def _broadcast_in_dim_sharding(outs, x, *, shape, broadcast_dimensions):
    out = [()] * len(shape)
    for k, (d, axes) in enumerate(zip(broadcast_dimensions, st.dims(x))):
        out[d] = axes if x.shape[k] == shape[d] else ()     # a size-1 dimension broadcast is whole
    return st.typed(st.common_mesh("broadcast_in_dim", [x]), out)


# --------------------------------------------------------------------- reshape
reshape_p = Primitive("reshape")
reshape_p.def_params(new_sizes=SIZES, dimensions=OneOf(None, DIMS))


@reshape_p.def_abstract_eval
def _reshape_rule(x, *, new_sizes, dimensions):
    if dimensions is not None:
        raise type_error("reshape", [x], "dimensions=None (transpose first)",
                         new_sizes=new_sizes, dimensions=dimensions)
    if any(s < 0 for s in new_sizes) or math.prod(new_sizes) != x.size:
        raise type_error("reshape", [x], f"new_sizes with the operand's {x.size} elements",
                         new_sizes=new_sizes)
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@reshape_p.def_sharding_rule
def _reshape_sharding(outs, x, *, new_sizes, dimensions):
    return st.typed(st.common_mesh("reshape", [x]), st.reshape_dims(x.shape, st.dims(x), tuple(new_sizes)))


# ------------------------------------------------------------------- transpose
transpose_p = Primitive("transpose")
transpose_p.def_params(permutation=DIMS)


@transpose_p.def_abstract_eval
def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise type_error("transpose", [x], f"a permutation of (0, ..., {x.ndim - 1})",
                         permutation=permutation)
    return ShapedArray([x.shape[p] for p in permutation], x.dtype, x.weak_type)


@transpose_p.def_sharding_rule
def _transpose_sharding(outs, x, *, permutation):
    d = st.dims(x)
    return st.typed(st.common_mesh("transpose", [x]), [d[p] for p in permutation])


# --------------------------------------------------------------------- squeeze
squeeze_p = Primitive("squeeze")
squeeze_p.def_params(dimensions=DIMS)


@squeeze_p.def_abstract_eval
def _squeeze_rule(x, *, dimensions):
    check_axes("squeeze", x, dimensions, "dimensions")
    if any(x.shape[d] != 1 for d in dimensions):
        raise type_error("squeeze", [x], "the squeezed dimensions to have size 1", JaxprValueError,
                         dimensions=dimensions)
    return ShapedArray([s for i, s in enumerate(x.shape) if i not in dimensions], x.dtype, x.weak_type)


@squeeze_p.def_sharding_rule
def _squeeze_sharding(outs, x, *, dimensions):
    return st.typed(st.common_mesh("squeeze", [x]), [a for i, a in enumerate(st.dims(x)) if i not in dimensions])


# ------------------------------------------------------------------------- rev
rev_p = Primitive("rev")
rev_p.def_params(dimensions=DIMS)


@rev_p.def_abstract_eval
def _rev_rule(x, *, dimensions):
    check_axes("rev", x, dimensions, "dimensions")
    return x


rev_p.def_sharding_rule(lambda outs, x, **_: x.sharding_in_type)


# ------------------------------------------------------------------------- pad
pad_p = Primitive("pad")
pad_p.def_params(padding_config=Tuple(Tuple(Int(), length=3)))


@pad_p.def_abstract_eval
def _pad_rule(x, padval, *, padding_config):
    if padval.shape != () or padval.dtype != x.dtype:
        raise type_error("pad", [x, padval], "a scalar padding value of the operand's dtype")
    if len(padding_config) != x.ndim or any(len(c) != 3 for c in padding_config):
        raise type_error("pad", [x, padval], f"a (lo, hi, interior) triple per dimension ({x.ndim})", JaxprValueError,
                         padding_config=padding_config)
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        size = lo + hi + d + max(d - 1, 0) * interior
        if interior < 0 or size < 0:
            raise type_error("pad", [x, padval], "non-negative interior padding and result sizes",
                             padding_config=padding_config)
        shape.append(size)
    return ShapedArray(shape, x.dtype, x.weak_type and padval.weak_type)


# ----------------------------------------------------------------- concatenate
concatenate_p = Primitive("concatenate")
concatenate_p.def_params(dimension=DIM)


@concatenate_p.def_abstract_eval
def _concatenate_rule(*xs, dimension):
    if not xs:
        raise JaxprTypeError("concatenate requires at least one operand")
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise type_error("concatenate", xs, f"dimension in [0, {first.ndim})", dimension=dimension)
    if any(x.dtype != first.dtype for x in xs):
        raise type_error("concatenate", xs, "operands of equal dtypes", dimension=dimension)
    def others(s):
        return s[:dimension] + s[dimension + 1:]
    if any(x.ndim != first.ndim or others(x.shape) != others(first.shape) for x in xs):
        raise type_error("concatenate", xs, f"equal shapes except in dimension {dimension}",
                         dimension=dimension)
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, first.dtype, all(x.weak_type for x in xs))


@concatenate_p.def_sharding_rule
def _concatenate_sharding(outs, *xs, dimension):
    """Every dimension keeps the operands' axes, as elementwise operands do (an unsplit operand
    fits any; the joined dimension too, as JAX's)."""
    mesh = st.common_mesh("concatenate", xs)
    out = []
    for k in range(outs[0].ndim):
        choices = {st.dims(x)[k] for x in xs} - {()}
        if len(choices) > 1:
            raise st.ShardingTypeError(f"concatenate got incompatible shardings: "
                                       f"{', '.join(x.str_short() for x in xs)}")
        out.append(choices.pop() if choices else ())
    return st.typed(mesh, out)


# ------------------------------------------------------------------------ iota
iota_p = Primitive("iota")
iota_p.def_params(dtype=DType(), shape=SIZES, dimension=DIM)


@iota_p.def_abstract_eval
def _iota_rule(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape) or any(s < 0 for s in shape):
        raise type_error("iota", [], f"dimension in [0, {len(shape)}) and non-negative sizes",
                         shape=shape, dimension=dimension)
    if not NUM(dtype):
        raise type_error("iota", [], f"a numeric dtype, got {dt.short_name(dtype)}")
    return ShapedArray(shape, dtype)


# ---------------------------------------------------------------- builders

def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Operand dimension ``k`` becomes result dimension ``broadcast_dimensions[k]``."""
    shape, dims = ops.ints(shape), ops.ints(broadcast_dimensions)
    aval = ops.aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))) and isinstance(operand, Tracer):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def broadcast(operand, sizes):
    """``operand`` with new leading dimensions of ``sizes``."""
    sizes = ops.ints(sizes)
    ndim = ops.aval(operand).ndim
    return broadcast_in_dim(operand, sizes + ops.aval(operand).shape,
                            range(len(sizes), len(sizes) + ndim))


def broadcast_to_rank(x, rank: int):
    """``x`` with leading dimensions of size 1 added up to ``rank``."""
    aval = ops.aval(x)
    extra = rank - aval.ndim
    return x if extra <= 0 else broadcast(x, (1,) * extra)


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """``operand``'s elements in row-major order, transposed by ``dimensions`` first if given.
    ``out_sharding``: the result's layout; needed, as in JAX, when the operand's split
    dimensions cannot keep their mesh axes in the new shape."""
    new_sizes = ops.ints(new_sizes)
    if dimensions is not None:
        operand = transpose(operand, dimensions)
    x = ops.aval(operand)
    if x.shape == new_sizes and isinstance(operand, Tracer) and out_sharding is None:
        return operand
    if out_sharding is None and x.sharding_in_type is not None:
        kept = st.reshape_dims(x.shape, st.dims(x), tuple(new_sizes))
        if sorted(a for d in kept for a in d) != sorted(a for d in st.dims(x) for a in d):
            raise st.ShardingTypeError(
                "This reshape is not supported. Please specify the sharding of the output via the `out_sharding` "
                f"argument of jax.lax.reshape. Got operand type: {st.jax_type_text(x)}, new sizes: {tuple(new_sizes)}")
    out = reshape_p.bind(operand, new_sizes=new_sizes, dimensions=None)
    return out_sharding_of(out, out_sharding, "reshape")


def transpose(operand, permutation):
    ndim = ops.aval(operand).ndim
    permutation = ops.canonical_axes(permutation, ndim) if len(permutation) == ndim else ops.ints(permutation)
    if permutation == tuple(range(ndim)) and isinstance(operand, Tracer):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def squeeze(array, dimensions):
    """``array`` without the given size-1 dimensions."""
    dims = tuple(sorted(ops.canonical_axes(dimensions, ops.aval(array).ndim)))
    if not dims and isinstance(array, Tracer):
        return array
    return squeeze_p.bind(array, dimensions=dims)


def expand_dims(array, dimensions):
    """``array`` with size-1 dimensions inserted at ``dimensions`` (positions in the result)."""
    aval = ops.aval(array)
    ndim = aval.ndim + len(dimensions)
    inserted = set(ops.canonical_axes(dimensions, ndim))
    if len(inserted) != len(dimensions):
        raise ValueError(f"expand_dims: repeated dimensions in {tuple(dimensions)}")
    shape, dims, rest = [], [], iter(aval.shape)
    for d in range(ndim):
        if d in inserted:
            shape.append(1)
        else:
            shape.append(next(rest))
            dims.append(d)
    return broadcast_in_dim(array, shape, dims)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """``operand`` with dimensions [start, stop) merged into one."""
    shape = ops.aval(operand).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    size = math.prod(shape[start_dimension:stop])
    return reshape(operand, shape[:start_dimension] + (size,) + shape[stop:])


def rev(operand, dimensions):
    """``operand`` reversed along ``dimensions``."""
    return rev_p.bind(operand, dimensions=ops.canonical_axes(dimensions, ops.aval(operand).ndim))


def pad(operand, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` amounts per dimension; negative low/high crop."""
    operand, padding_value = ops.match_python_scalars("pad", (operand, padding_value))
    config = tuple(ops.ints(c) for c in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


def concatenate(operands, dimension: int):
    operands = list(operands)
    if not operands:
        raise ValueError("concatenate requires at least one operand")
    if len(operands) == 1 and isinstance(operands[0], Tracer):
        return operands[0]
    dimension = ops.canonical_axis(dimension, ops.aval(operands[0]).ndim)
    return concatenate_p.bind(*operands, dimension=dimension)


def iota(dtype, size: int):
    """``[0, 1, ..., size-1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension: int, *, out_sharding=None):
    """Counts along ``dimension``, constant along the others (laid out as ``out_sharding`` says)."""
    from .sharding_constraint import out_sharding_of
    shape = ops.ints(shape)
    return out_sharding_of(iota_p.bind(dtype=dt.canonicalize_dtype(dtype), shape=shape,
                                       dimension=ops.canonical_axis(dimension, len(shape))),
                           out_sharding, "broadcasted_iota")


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of ``shape`` filled with the scalar ``fill_value`` (weak if it is and no dtype),
    laid out as ``sharding`` says when given."""
    from .sharding_constraint import out_sharding_of
    shape = ops.ints(shape)
    aval = ops.aval(fill_value)
    if aval.shape != ():
        raise TypeError(f"full must be called with a scalar fill_value, got {aval.str_short()}")
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dt.canonicalize_dtype(dtype)
    return out_sharding_of(broadcast_in_dim(_convert(fill_value, dtype, weak), shape, ()), sharding, "full")


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """``full`` with ``x``'s shape and dtype (and weak type, when no dtype is given), laid out as
    ``sharding`` says, else where ``x`` is committed, as JAX's."""
    from jaxprc.runtime.sharded import ShardedArray
    from .sharding_constraint import out_sharding_of
    aval = ops.aval(x)
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dt.canonicalize_dtype(dtype)
    fill = _convert(fill_value, dtype, weak)
    out = broadcast_in_dim(fill, aval.shape if shape is None else shape, ())
    if aval.vma:          # varies over the manual axes ``x`` does, as JAX's full_like
        from .parallel import vary_like
        out = vary_like(out, aval)
    if (sharding is None and isinstance(x, ShardedArray) and x.sharding is not None and not weak
            and (shape is None or tuple(shape) == aval.shape or x.sharding.is_fully_replicated)):
        sharding = x.sharding         # where x is committed (a fill of another shape: if x is whole there)
    return out_sharding_of(out, sharding, "full_like")


def zeros_like_array(x):
    return full_like(x, 0)


# The operations the pass drivers emit (materialised zeros, batch-axis moves).
emit.provide(full=full,
             transpose=lambda x, perm: transpose_p.bind(x, permutation=perm),
             broadcast_in_dim=lambda x, shape, dims: broadcast_in_dim_p.bind(
                 x, shape=shape, broadcast_dimensions=dims))


# --------------------------------------------------------------------- jvp
for _p in (broadcast_in_dim_p, reshape_p, transpose_p, squeeze_p, rev_p):
    ad.defjvp_linear(_p)
ad.defjvp_multilinear(pad_p)
ad.defjvp_multilinear(concatenate_p)
ad.defjvp_zero(iota_p)


# --------------------------------------------------------------- transpose

def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    new_dims = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for k, d in enumerate(broadcast_dimensions) if x.aval.shape[k] == 1 and shape[d] != 1)
    summed = lax.reduce_sum(ct, tuple(sorted(new_dims + expanded)))
    return [reshape(summed, x.aval.shape) if expanded else summed]


def _reshape_transpose(ct, x, *, new_sizes, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else reshape(ct, x.aval.shape)]


def _transpose_transpose(ct, x, *, permutation):
    inverse = tuple(int(i) for i in np.argsort(permutation))
    return [Zero(x.aval) if isinstance(ct, Zero) else transpose(ct, inverse)]


def _squeeze_transpose(ct, x, *, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else reshape(ct, x.aval.shape)]


def _rev_transpose(ct, x, *, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else rev(ct, dimensions)]


def _pad_transpose(ct, x, padval, *, padding_config):
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(padval.aval) if is_undefined_primal(padval) else None]
    lo, hi, interior = zip(*padding_config)
    # undo the edge padding (a negative pad crops), then drop the interior padding with strides
    unpadded = pad(ct, full((), 0, ct.dtype), [(-l, -h, 0) for l, h in zip(lo, hi)])
    ct_x = lax.slice(unpadded, (0,) * len(lo), unpadded.shape, tuple(i + 1 for i in interior))
    ct_pad = None
    if is_undefined_primal(padval):
        all_axes = lambda v: tuple(range(len(v.shape)))
        ct_pad = lax.sub(lax.reduce_sum(ct, all_axes(ct)), lax.reduce_sum(ct_x, all_axes(ct_x)))
    return [ct_x if is_undefined_primal(x) else None, ct_pad]


def _concatenate_transpose(ct, *xs, dimension):
    cts, start = [], 0
    for x in xs:
        size = aval_of(x).shape[dimension]
        if is_undefined_primal(x):
            if isinstance(ct, Zero):
                cts.append(Zero(x.aval))
            else:
                limit = list(ct.shape)
                begin = [0] * len(limit)
                begin[dimension], limit[dimension] = start, start + size
                cts.append(lax.slice(ct, begin, limit))
        else:
            cts.append(None)
        start += size
    return cts


ad.primitive_transposes[broadcast_in_dim_p] = _broadcast_in_dim_transpose
ad.primitive_transposes[reshape_p] = _reshape_transpose
ad.primitive_transposes[transpose_p] = _transpose_transpose
ad.primitive_transposes[squeeze_p] = _squeeze_transpose
ad.primitive_transposes[rev_p] = _rev_transpose
ad.primitive_transposes[pad_p] = _pad_transpose
ad.primitive_transposes[concatenate_p] = _concatenate_transpose


# ---------------------------------------------------------------- batching

def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]
    x = moveaxis(x, d, 0)
    return broadcast_in_dim_p.bind(
        x, shape=(size, *shape), broadcast_dimensions=(0, *(b + 1 for b in broadcast_dimensions))), 0


def _reshape_batch(args, dims, *, new_sizes, dimensions):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]
    x = moveaxis(x, d, 0)
    return reshape_p.bind(x, new_sizes=(size, *new_sizes), dimensions=dimensions), 0


def _transpose_batch(args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d, *shift(permutation, d))
    return transpose_p.bind(x, permutation=perm), 0


def _squeeze_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    dimensions = shift(dimensions, d)
    return squeeze_p.bind(x, dimensions=dimensions), d - sum(a < d for a in dimensions)


def _axes_rule(prim: Primitive, param: str):
    """Primitives acting along per-example axes named by ``param``; the batch axis stays put."""
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        params[param] = shift(params[param], d)
        return prim.bind(x, **params), d
    return rule


def _pad_batch(args, dims, *, padding_config):
    (x, padval), (xd, pd) = args, dims
    size = axis_size_of(args, dims)
    if pd is None:
        config = list(padding_config)
        config.insert(xd, (0, 0, 0))
        return pad_p.bind(x, padval, padding_config=tuple(config)), xd
    # A per-example padding value: pad with zeros, then select the padding positions.
    x = matchaxis(x, xd, 0, size)
    config = ((0, 0, 0), *padding_config)
    dtype = aval_of(x).dtype
    padded = pad_p.bind(x, scalar(0, dtype), padding_config=config)
    inside = pad_p.bind(_batch_full(True, dt.bool_, aval_of(x).shape), scalar(False, dt.bool_),
                        padding_config=config)
    fill = broadcast_in_dim_p.bind(padval, shape=aval_of(padded).shape, broadcast_dimensions=(0,))
    return lax.select_n(inside, fill, padded), 0


def _concatenate_batch(args, dims, *, dimension):
    args, d = align(args, dims)
    return concatenate_p.bind(*args, dimension=shift((dimension,), d)[0]), d


batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch
batching.primitive_batchers[reshape_p] = _reshape_batch
batching.primitive_batchers[transpose_p] = _transpose_batch
batching.primitive_batchers[squeeze_p] = _squeeze_batch
batching.primitive_batchers[rev_p] = _axes_rule(rev_p, "dimensions")
batching.primitive_batchers[pad_p] = _pad_batch
batching.primitive_batchers[concatenate_p] = _concatenate_batch


# ---------------------------------------------------------------- lowering

def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions, **_):
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    if not is_constant_shape(ctx.avals_out[0].shape):      # sizes known when the module runs
        return hlo.dynamic_broadcast_in_dim(out_type, x, dynamic_shapes.shape_value(ctx.avals_out[0].shape),
                                            list(broadcast_dimensions))
    return _hlo_broadcast_in_dim(out_type, x, broadcast_dimensions)


def _reshape_lowering(ctx, x, **_):
    out = ctx.avals_out[0]
    if not is_constant_shape(out.shape):
        return hlo.dynamic_reshape(mlir.aval_to_ir_type(out), x, dynamic_shapes.shape_value(out.shape))
    return hlo.reshape(mlir.aval_to_ir_type(out), x)


def _transpose_lowering(ctx, x, *, permutation):
    return hlo.transpose(x, list(permutation))


def _rev_lowering(ctx, x, *, dimensions):
    return hlo.reverse(x, list(dimensions))


def _pad_lowering(ctx, x, padval, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return hlo.pad(x, padval, list(lo), list(hi), list(interior))


def _concatenate_lowering(ctx, *xs, dimension):
    out = ctx.avals_out[0]
    if ctx.platform == "cpu" and dt.bit_width(out.dtype) == 2:
        # XLA:CPU aborts the process compiling a concatenate of 2-bit integers (its fast path
        # addresses elements by byte): concatenate them as 8-bit ones.
        wide = dt.int8 if dt.is_signed(out.dtype) else dt.uint8
        xs = [hlo.convert(mlir.aval_to_ir_type(a.update(dtype=wide)), x) for a, x in zip(ctx.avals_in, xs)]
        return hlo.convert(mlir.aval_to_ir_type(out), hlo.concatenate(xs, dimension))
    return hlo.concatenate(list(xs), dimension)


def _iota_lowering(ctx, *, dtype, shape, dimension, **_):
    out = ctx.avals_out[0]
    if not is_constant_shape(out.shape):
        return hlo.dynamic_iota(mlir.aval_to_ir_type(out), dynamic_shapes.shape_value(out.shape), dimension)
    return hlo.iota(mlir.aval_to_ir_type(out), dimension)


mlir.register_lowering(broadcast_in_dim_p, _broadcast_in_dim_lowering)
mlir.register_lowering(reshape_p, _reshape_lowering)
mlir.register_lowering(squeeze_p, _reshape_lowering)
mlir.register_lowering(transpose_p, _transpose_lowering)
mlir.register_lowering(rev_p, _rev_lowering)
mlir.register_lowering(pad_p, _pad_lowering)
mlir.register_lowering(concatenate_p, _concatenate_lowering)
mlir.register_lowering(iota_p, _iota_lowering)


# ---------------------------------------------------------- jet (Taylor series)
for _p in (broadcast_in_dim_p, concatenate_p, pad_p, reshape_p, squeeze_p, rev_p, transpose_p):
    jet.deflinear(_p)


# ------------------------------------------------ canonicalization patterns
# (data movement only: every rewrite here moves the same bits to the same places)

def _broadcast_operand(eqn):
    """A broadcast of a scalar fills its result with that one value."""
    return eqn.invars[0] if eqn.invars[0].aval.shape == () else None


splat_forms[broadcast_in_dim_p] = _broadcast_operand


@pattern(CANONICALIZE, Pat(transpose_p, Pat(transpose_p, "x", permutation=bind("inner")),
                           permutation=bind("outer")))
def _transpose_of_transpose(x, inner, outer):
    return transpose_p.bind(x, permutation=tuple(inner[d] for d in outer))


@pattern(CANONICALIZE, Pat(transpose_p, "x", permutation=bind("permutation")))
def _identity_transpose(x, permutation):
    return x if permutation == tuple(range(len(permutation))) else None


@pattern(CANONICALIZE, Pat(reshape_p, Pat(reshape_p, "x", dimensions=None), new_sizes=bind("sizes"),
                           dimensions=None))
def _reshape_of_reshape(x, sizes):
    return reshape_p.bind(x, new_sizes=sizes, dimensions=None)


@pattern(CANONICALIZE, Pat(reshape_p, "x", new_sizes=bind("sizes"), dimensions=None))
@pattern(CANONICALIZE, Pat(broadcast_in_dim_p, "x", shape=bind("sizes"), broadcast_dimensions=bind("dims")))
def _to_same_shape(x, sizes, dims=None):
    same = tuple(sizes) == x.aval.shape and (dims is None or tuple(dims) == tuple(range(len(sizes))))
    return x if same else None


@pattern(CANONICALIZE, Pat(broadcast_in_dim_p, Pat(broadcast_in_dim_p, "x", broadcast_dimensions=bind("inner")),
                           shape=bind("shape"), broadcast_dimensions=bind("outer")))
def _broadcast_of_broadcast(x, inner, shape, outer):
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=tuple(outer[d] for d in inner))
