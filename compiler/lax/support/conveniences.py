"""JAX's ``lax`` conveniences that are compositions of existing primitives.

``split``, ``stack``, ``unstack`` and ``tile`` are primitives in JAX; here they
are slices, broadcasts and concatenations, which every pass already handles, so
their values, derivatives and batching are those of the pieces.
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import operands as ops

__all__ = ["reciprocal", "broadcast_shapes", "broadcast_like", "batch_matmul", "split", "stack",
           "unstack", "tile", "empty", "dtype", "index_take", "scatter_sub", "scatter_apply", "scaled_dot",
           "shape_as_value"]


def reciprocal(x):
    """Elementwise ``1 / x`` (``integer_pow(x, -1)``, as in JAX)."""
    return lax.integer_pow(x, -1)


def broadcast_shapes(*shapes):
    """The numpy broadcast of ``shapes`` (ranks aligned on the right; sizes equal or 1)."""
    shapes = [ops.ints(s) for s in shapes]
    if not shapes:
        return ()
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={[tuple(s) for s in shapes]}")
        out.append(big.pop() if big else 1)
    return tuple(out)



def broadcast_like(arr, like_arr):
    """``arr`` broadcast (numpy rules) to the shape of ``like_arr``."""
    shape = ops.aval(like_arr).shape
    aval = ops.aval(arr)
    if broadcast_shapes(aval.shape, shape) != shape:
        raise ValueError(f"broadcast_like: cannot broadcast {aval.str_short()} to the shape {shape}")
    lead = len(shape) - aval.ndim
    kept = [d for d in range(aval.ndim) if aval.shape[d] == shape[lead + d]]
    x = lax.reshape(arr, [aval.shape[d] for d in kept]) if len(kept) != aval.ndim else arr
    return lax.broadcast_in_dim(x, shape, [lead + d for d in kept])


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over equal leading batch dimensions: ``[..., m, k] @ [..., k, n]``."""
    la, ra = ops.aval(lhs), ops.aval(rhs)
    if min(la.ndim, ra.ndim) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {la.ndim}, {ra.ndim}")
    if la.ndim != ra.ndim:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {la.ndim}, {ra.ndim}")
    batch = tuple(range(la.ndim - 2))
    return lax.dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)), precision=precision)



def split(operand, sizes, axis: int = 0):
    """Consecutive pieces of ``operand`` along ``axis`` with the given ``sizes`` (summing to its size)."""
    aval = ops.aval(operand)
    axis = ops.canonical_axis(axis, aval.ndim)
    sizes = ops.ints(sizes)
    if any(s < 0 for s in sizes) or sum(sizes) != aval.shape[axis]:
        raise ValueError(f"split: sizes must be nonnegative and sum to the size of axis {axis} of "
                         f"{aval.str_short()} ({aval.shape[axis]}), got sizes={sizes}")
    starts = np.cumsum((0,) + sizes)
    return [lax.slice_in_dim(operand, int(a), int(b), axis=axis) for a, b in zip(starts[:-1], starts[1:])]


def stack(operands, axis: int = 0):
    """Arrays of one shape joined along a new ``axis``."""
    operands = list(operands)
    if not operands:
        raise ValueError("stack requires at least one operand")
    shapes = {ops.aval(x).shape for x in operands}
    if len(shapes) != 1:
        raise ValueError(f"stack: operands must have equal shapes, got {sorted(shapes)}")
    axis = ops.canonical_axis(axis, ops.aval(operands[0]).ndim + 1)
    return lax.concatenate([lax.expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis: int = 0):
    """The slices of ``x`` along ``axis``, as a tuple."""
    aval = ops.aval(x)
    axis = ops.canonical_axis(axis, aval.ndim)
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(aval.shape[axis]))


def tile(operand, reps):
    """``operand`` repeated ``reps[d]`` times along each dimension ``d`` (one rep per dimension)."""
    aval = ops.aval(operand)
    reps = ops.ints(reps)
    if len(reps) != aval.ndim:
        raise ValueError(f"tile: len(reps)={len(reps)} must equal the rank of {aval.str_short()}")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be nonnegative, got {reps}")
    # Interleave a repeat axis before each dimension, then merge the pairs.
    shape = tuple(n for pair in zip(reps, aval.shape) for n in pair)
    x = lax.broadcast_in_dim(operand, shape, tuple(range(1, 2 * aval.ndim, 2)))
    return lax.reshape(x, tuple(r * n for r, n in zip(reps, aval.shape)))


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` whose contents are unspecified (zeros here)."""
    if out_sharding is not None:
        raise NotImplementedError("lax.empty: jaxprc has no shardings (out_sharding must be None)")
    return lax.full(shape, 0, dtype)


def dtype(x):
    """The dtype of an array, scalar, dtype-like or Python type (``jaxprc.dtypes.dtype``)."""
    from jaxprc.dtypes import dtype as dtype_of    # jaxprc.dtypes loads after lax
    return dtype_of(x)


def index_take(src, idxs, axes):
    """``src`` gathered at the index arrays ``idxs`` (one per axis in ``axes``; indices wrap)."""
    src_aval = ops.aval(src)
    axes = ops.canonical_axes(axes, src_aval.ndim)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: one index array per axis, got {len(idxs)} for axes {axes}")
    idxs = [lax.convert_element_type(i, dt.default_int_dtype()) if not dt.is_int(ops.aval(i).dtype) else i
            for i in idxs]
    idx_dtype = ops.aval(idxs[0]).dtype
    indices = lax.concatenate([lax.expand_dims(i, (1,)) for i in idxs], 1)
    sizes = lax.broadcast(np.array([src_aval.shape[a] for a in axes], idx_dtype), ops.aval(indices).shape[:1])
    indices = lax.rem(lax.add(lax.rem(indices, sizes), sizes), sizes)   # wrap negatives, as JAX's % does
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(src_aval.shape))
    dnums = lax.GatherDimensionNumbers(offset_dims=tuple(range(1, src_aval.ndim - len(axes) + 1)),
                                       collapsed_slice_dims=tuple(axes), start_index_map=tuple(axes),
                                       operand_batching_dims=(), start_indices_batching_dims=())
    return lax.gather(src, indices, dnums, slice_sizes)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """``operand`` with ``updates`` subtracted at the scattered windows (a scatter-add of ``-updates``;
    integer wrap-around gives the same bits)."""
    return lax.scatter_add(operand, scatter_indices, lax.neg(updates), dimension_numbers,
                           indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with the elementwise ``func`` applied at each scattered position, once per time
    the position is hit (as XLA applies JAX's scatter region): a scatter counts the hits, and
    ``func`` is applied where the count is not yet reached. With ``unique_indices`` that is one
    select, differentiable in reverse mode; otherwise a ``while_loop`` over the largest count."""
    op_aval = ops.aval(operand)
    ones = lax.full(ops.ints(update_shape), 1, dt.int32)
    counts = lax.scatter_add(lax.full(op_aval.shape, 0, dt.int32), scatter_indices, ones, dimension_numbers,
                             indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    if unique_indices:
        return lax.select(lax.gt(counts, 0), func(operand), operand)

    def body(carry):
        i, x = carry
        return lax.add(i, 1), lax.select(lax.gt(counts, i), func(x), x)
    most = lax.reduce_max(counts, tuple(range(op_aval.ndim))) if op_aval.ndim else counts
    return lax.while_loop(lambda carry: lax.lt(carry[0], most), body, (np.int32(0), operand))[1]


def _repeat_scale(scale, shape, contracting):
    """``scale`` repeated along each contracting dimension up to the operand's size (subchannels)."""
    for i in contracting:
        sshape = ops.aval(scale).shape
        if sshape[i] != shape[i]:
            wide = sshape[:i + 1] + (shape[i] // sshape[i],) + sshape[i + 1:]
            scale = lax.broadcast_in_dim(scale, wide, tuple(d for d in range(len(wide)) if d != i + 1))
            scale = lax.reshape(scale, sshape[:i] + (shape[i],) + sshape[i + 1:])
    return scale


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None, preferred_element_type=None):
    """``(lhs * lhs_scale) @ (rhs * rhs_scale)`` as JAX decomposes it: operands and scales in
    bfloat16 (each scale repeated over its subchannel of the contracting dimensions), multiplied,
    then a ``dot_general`` into ``preferred_element_type`` (bfloat16 by default)."""
    la, ra = ops.aval(lhs), ops.aval(rhs)
    if dimension_numbers is None:
        if la.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = la.ndim
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), (lb, rb) = dimension_numbers
    ranks = [la.ndim, ra.ndim] + [ops.aval(s).ndim for s in (lhs_scale, rhs_scale) if s is not None]
    if len(set(ranks)) != 1:
        raise TypeError(f"scaled_dot: operands and scales must have the same rank, got ranks {ranks}")
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise TypeError(f"scaled_dot: mismatched batch or contracting dimensions {dimension_numbers}")

    def scaled(x, scale, contracting):
        x = lax.convert_element_type(x, dt.bfloat16)
        if scale is None:         # JAX's dummy scale of ones: x * 1 in bfloat16 is x
            return x
        scale = _repeat_scale(scale, ops.aval(x).shape, contracting)
        return lax.mul(x, lax.convert_element_type(scale, dt.bfloat16))
    out_type = dt.bfloat16 if preferred_element_type is None else preferred_element_type
    return lax.dot_general(scaled(lhs, lhs_scale, lc), scaled(rhs, rhs_scale, rc), dimension_numbers,
                           preferred_element_type=out_type)


def shape_as_value(shape):
    """A (static) shape as a value: a numpy int32 array, int64 when a size needs it; the empty
    shape gives an empty int32 array (a device array), as JAX gives them."""
    shape = ops.ints(shape)
    dtype = dt.int32 if all(d <= dt.iinfo(dt.int32).max for d in shape) else dt.int64
    if not shape:
        return lax.full((0,), 0, dtype)
    return np.asarray(shape, dtype)
