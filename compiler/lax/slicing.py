"""The slicing family: static and dynamic slices, their updates, and XLA's gather and scatters.

Static params (start/limit indices, slice sizes) are tuples of Python ints;
dynamic start indices are integer scalar operands. Gather and scatter carry
XLA's dimension numbers (the index vector is the last dimension of the
indices) and a ``GatherScatterMode`` for out-of-bounds indices.
"""
from __future__ import annotations

import builtins
import enum
import functools
import math
from typing import NamedTuple

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxprc import lax
from jaxprc.ir.sharding_type import whole_dims_rule
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, ShapedArray, param_type
from jaxprc.ir.params import Bool, Enum, Int, OneOf, Record, Scalar, Tuple
from .elementwise import INTEGRAL
from jaxprc.engine import dynamic_shapes
from jaxprc.ir.shape_poly import is_constant_shape, is_symbolic_dim, max_dim, slice_bounds
from jaxprc.engine.lowering import broadcast_to_aval as _broadcast, param_name
from jaxprc.passes.jvp import Zero, add_tangents, aval_of, instantiate_zeros, tangent_aval, zeros
from jaxprc.passes.transpose import is_undefined_primal
from jaxprc.passes.vmap import align, axis_size_of, matchaxis, moveaxis, scalar

from .support import operands as ops
from .shapes import DIMS, SIZES, expand_dims, squeeze, type_error

__all__ = [
    "slice", "slice_in_dim", "index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "dynamic_update_index_in_dim", "gather", "scatter", "scatter_add", "scatter_mul", "scatter_min",
    "scatter_max", "GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode",
    "slice_p", "dynamic_slice_p", "dynamic_update_slice_p", "gather_p", "scatter_p", "scatter_add_p",
    "scatter_mul_p", "scatter_min_p", "scatter_max_p",
]


def check_index_scalars(name: str, avals, indices) -> None:
    for i in indices:
        if i.shape != () or not INTEGRAL(i.dtype):
            raise type_error(name, avals, f"start indices to be integer scalars, got {i.str_short()}")


# ----------------------------------------------------------------------- slice
slice_p = Primitive("slice")
slice_p.def_params(start_indices=SIZES, limit_indices=SIZES, strides=OneOf(None, Tuple(Int(min=1))))


@slice_p.def_abstract_eval
def _slice_rule(x, *, start_indices, limit_indices, strides):
    params = dict(start_indices=start_indices, limit_indices=limit_indices, strides=strides)
    strides = (1,) * x.ndim if strides is None else strides
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise type_error("slice", [x], f"one start, limit and stride per dimension ({x.ndim})", **params)
    shape = []
    for d, lo, hi, st in zip(x.shape, start_indices, limit_indices, strides):
        if not 0 <= lo <= hi <= d or st < 1:
            raise type_error("slice", [x], "0 <= start <= limit <= size and strides >= 1", **params)
        shape.append((hi - lo + st - 1) // st)     # (the ceiling as JAX writes it for symbolic sizes)
    return ShapedArray(shape, x.dtype, x.weak_type)


slice_p.def_sharding_rule(whole_dims_rule("slice"))


# --------------------------------------------------------------- dynamic_slice
dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.def_params(slice_sizes=SIZES)
dynamic_slice_p.def_sharding_rule(whole_dims_rule("dynamic_slice"))


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_rule(x, *start_indices, slice_sizes):
    avals = [x, *start_indices]
    if len(start_indices) != x.ndim or len(slice_sizes) != x.ndim:
        raise type_error("dynamic_slice", avals, f"one start index and slice size per dimension "
                         f"({x.ndim})", slice_sizes=slice_sizes)
    check_index_scalars("dynamic_slice", avals, start_indices)
    if any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise type_error("dynamic_slice", avals, "0 <= slice size <= operand size",
                         slice_sizes=slice_sizes)
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


dynamic_update_slice_p = Primitive("dynamic_update_slice").def_params()


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_rule(x, update, *start_indices):
    avals = [x, update, *start_indices]
    if update.dtype != x.dtype or update.ndim != x.ndim or \
            any(u > d for u, d in zip(update.shape, x.shape)):
        raise type_error("dynamic_update_slice", avals, "an update of the operand's dtype and rank, "
                         "no larger than the operand")
    if len(start_indices) != x.ndim:
        raise type_error("dynamic_update_slice", avals, f"one start index per dimension ({x.ndim})")
    check_index_scalars("dynamic_update_slice", avals, start_indices)
    return x.update(weak_type=all(a.weak_type for a in avals))   # JAX's rule: weak iff all operands are


# -------------------------------------------------------------- gather/scatter
@param_type
class GatherScatterMode(enum.Enum):
    """What out-of-bounds indices do: clamp, fill/drop, or the caller promises none occur."""
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2

    @staticmethod
    def from_any(mode) -> "GatherScatterMode":
        if isinstance(mode, GatherScatterMode):
            return mode
        names = {"clip": GatherScatterMode.CLIP, None: GatherScatterMode.FILL_OR_DROP,
                 "fill": GatherScatterMode.FILL_OR_DROP, "drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}
        if mode not in names:
            raise ValueError(f"Unknown gather/scatter mode {mode!r}; expected one of "
                             "'clip', 'fill', 'drop', 'promise_in_bounds', None")
        return names[mode]


@param_type
class GatherDimensionNumbers(NamedTuple):
    """XLA's gather dimension numbers; the index vector is the last dimension of the indices."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


@param_type
class ScatterDimensionNumbers(NamedTuple):
    """XLA's scatter dimension numbers; the index vector is the last dimension of the indices."""
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _sorted_within(dims, bound) -> bool:
    return all(0 <= d < bound for d in dims) and list(dims) == sorted(set(dims))


def _check_index_map(name, avals, operand, indices, index_map, batch_dims, indices_batch_dims, **params):
    """Checks shared by gather and scatter on the indices and where they point."""
    if indices.ndim < 1 or not INTEGRAL(indices.dtype):
        raise type_error(name, avals, "integer indices of rank >= 1 (the index vector is the last "
                         "dimension)", **params)
    if len(index_map) != indices.shape[-1]:
        raise type_error(name, avals, f"{len(index_map)} operand dimensions mapped, the size of the "
                         f"index vector ({indices.shape[-1]})", **params)
    if len(set(index_map)) != len(index_map) or not all(0 <= d < operand.ndim for d in index_map):
        raise type_error(name, avals, "distinct operand dimensions in the index map", **params)
    if not _sorted_within(batch_dims, operand.ndim) or len(batch_dims) != len(indices_batch_dims) \
            or len(set(indices_batch_dims)) != len(indices_batch_dims) \
            or not all(0 <= d < indices.ndim - 1 for d in indices_batch_dims) \
            or any(operand.shape[o] != indices.shape[i] for o, i in zip(batch_dims, indices_batch_dims)) \
            or set(batch_dims) & set(index_map):
        raise type_error(name, avals, "matching operand and indices batching dimensions of equal "
                         "sizes, not in the index map", **params)


GATHER_DIMENSION_NUMBERS = Record(GatherDimensionNumbers, **dict.fromkeys(GatherDimensionNumbers._fields, DIMS))
SCATTER_DIMENSION_NUMBERS = Record(ScatterDimensionNumbers, **dict.fromkeys(ScatterDimensionNumbers._fields, DIMS))

gather_p = Primitive("gather")
gather_p.def_params(dimension_numbers=GATHER_DIMENSION_NUMBERS, slice_sizes=SIZES, indices_are_sorted=Bool(),
                    unique_indices=Bool(), mode=Enum(GatherScatterMode), fill_value=OneOf(None, Scalar()))


@gather_p.def_abstract_eval
def _gather_rule(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                 unique_indices, mode, fill_value):
    dn = dimension_numbers
    avals = [operand, indices]
    params = dict(dimension_numbers=dn, slice_sizes=slice_sizes)
    _check_index_map("gather", avals, operand, indices, dn.start_index_map, dn.operand_batching_dims,
                     dn.start_indices_batching_dims, **params)
    if len(slice_sizes) != operand.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, operand.shape)):
        raise type_error("gather", avals, "one slice size per operand dimension, 0 <= size <= "
                         "the operand's", **params)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    if not _sorted_within(dn.collapsed_slice_dims, operand.ndim) or \
            set(dn.collapsed_slice_dims) & set(dn.operand_batching_dims) or \
            any(slice_sizes[d] > 1 for d in dropped):
        raise type_error("gather", avals, "sorted collapsed_slice_dims, disjoint from the batching "
                         "dims, with slice sizes <= 1", **params)
    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in dropped]
    batch_sizes = list(indices.shape[:-1])
    rank = len(offset_sizes) + len(batch_sizes)
    if len(dn.offset_dims) != len(offset_sizes) or not _sorted_within(dn.offset_dims, rank):
        raise type_error("gather", avals, f"{len(offset_sizes)} sorted offset_dims in [0, {rank})",
                         **params)
    offsets, batches = iter(offset_sizes), iter(batch_sizes)
    shape = [next(offsets) if d in dn.offset_dims else next(batches) for d in range(rank)]
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _scatter_rule(name):
    def rule(operand, indices, updates, *, dimension_numbers, indices_are_sorted, unique_indices, mode):
        dn = dimension_numbers
        avals = [operand, indices, updates]
        params = dict(dimension_numbers=dn)
        if updates.dtype != operand.dtype:
            raise type_error(name, avals, "updates of the operand's dtype", **params)
        if operand.dtype == dt.bool_ and name in ("scatter-add", "scatter-mul"):
            raise type_error(name, avals, "a numeric dtype (JAX's scatter_add and scatter_mul refuse booleans)",
                             **params)
        _check_index_map(name, avals, operand, indices, dn.scatter_dims_to_operand_dims,
                         dn.operand_batching_dims, dn.scatter_indices_batching_dims, **params)
        window_operand_dims = [d for d in range(operand.ndim)
                               if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
        if not _sorted_within(dn.inserted_window_dims, operand.ndim) or \
                set(dn.inserted_window_dims) & set(dn.operand_batching_dims) or \
                len(dn.update_window_dims) != len(window_operand_dims) or \
                not _sorted_within(dn.update_window_dims, updates.ndim):
            raise type_error(name, avals, "sorted, distinct update_window_dims (one per operand "
                             "dimension not inserted or batched) and inserted_window_dims", **params)
        scatter_sizes = [s for d, s in enumerate(updates.shape) if d not in dn.update_window_dims]
        window_sizes = [updates.shape[d] for d in dn.update_window_dims]
        if scatter_sizes != list(indices.shape[:-1]) or \
                any(w > operand.shape[d] for w, d in zip(window_sizes, window_operand_dims)):
            raise type_error(name, avals, "update scatter dimensions equal to the indices' batch "
                             "dimensions and windows no larger than the operand", **params)
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return rule


def _scatter_primitive(name: str) -> Primitive:
    prim = Primitive(name)
    prim.def_abstract_eval(_scatter_rule(name))
    prim.def_params(dimension_numbers=SCATTER_DIMENSION_NUMBERS, indices_are_sorted=Bool(),
                    unique_indices=Bool(), mode=Enum(GatherScatterMode))
    return prim


scatter_p = _scatter_primitive("scatter")
scatter_add_p = _scatter_primitive("scatter-add")
scatter_mul_p = _scatter_primitive("scatter-mul")
scatter_min_p = _scatter_primitive("scatter-min")
scatter_max_p = _scatter_primitive("scatter-max")


# ---------------------------------------------------------------- builders

def slice(operand, start_indices, limit_indices, strides=None):
    """Static slice ``operand[start:limit:stride]`` per dimension."""
    return slice_p.bind(operand, start_indices=ops.ints(start_indices), limit_indices=ops.ints(limit_indices),
                        strides=None if strides is None else ops.ints(strides))


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """Static slice along one axis; ``None`` and negative bounds as in Python."""
    shape = ops.aval(operand).shape
    axis = ops.canonical_axis(axis, len(shape))
    if is_symbolic_dim(shape[axis]):
        start, limit, _ = slice_bounds(start_index, limit_index, 1, shape[axis])
    else:
        start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, max_dim(limit, start), stride
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Static ``operand[..., index, ...]`` along ``axis``."""
    shape = ops.aval(operand).shape
    axis = ops.canonical_axis(axis, len(shape))
    index = int(index)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {shape[axis]}")
    index %= shape[axis]
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def _dynamic_index(i, size: int):
    """A start index as an integer scalar; negative indices count from the end, as in JAX."""
    if isinstance(i, (int, np.integer)):
        i = int(i)
        return np.int32(i + size if i < 0 else i)
    aval = ops.aval(i)
    if aval.shape != () or not dt.is_int(aval.dtype):
        raise TypeError(f"start indices must be integer scalars, got {aval.str_short()}")
    if dt.is_unsigned(aval.dtype):
        return i
    return lax.select(lax.lt(i, 0), lax.add(i, size), i)


def _start_indices(operand, start_indices):
    shape = ops.aval(operand).shape
    if not isinstance(start_indices, (list, tuple)):   # a 1-D array of indices
        start_indices = [index_in_dim(start_indices, k, 0, keepdims=False) for k in range(len(shape))]
    if len(start_indices) != len(shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions "       # JAX's
                         f"({len(start_indices)} vs {tuple(shape)})")
    return [_dynamic_index(i, d) for i, d in zip(start_indices, shape)]


def dynamic_slice(operand, start_indices, slice_sizes):
    """``operand[start:start+size]`` per dimension, with starts clamped into bounds."""
    starts = _start_indices(operand, start_indices)
    return dynamic_slice_p.bind(operand, *starts, slice_sizes=ops.ints(slice_sizes))


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with ``update`` written at ``start_indices`` (clamped so it fits)."""
    starts = _start_indices(operand, start_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    shape = ops.aval(operand).shape
    axis = ops.canonical_axis(axis, len(shape))
    starts = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    axis = ops.canonical_axis(axis, ops.aval(operand).ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    ndim = ops.aval(operand).ndim
    axis = ops.canonical_axis(axis, ndim)
    starts = [0] * ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    axis = ops.canonical_axis(axis, ops.aval(operand).ndim)
    if ops.aval(update).ndim == ops.aval(operand).ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def _gather_dnums(dn) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(*(ops.ints(f) for f in dn))


def _scatter_dnums(dn) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*(ops.ints(f) for f in dn))


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's gather; the index vector is the last dimension of ``start_indices``."""
    return gather_p.bind(operand, start_indices, dimension_numbers=_gather_dnums(dimension_numbers),
                         slice_sizes=ops.ints(slice_sizes), indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=GatherScatterMode.from_any(mode),
                         fill_value=fill_value)


def _scatter_op(prim, name):
    def op(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        operand, updates = ops.match_python_scalars(name, (operand, updates))
        if ops.aval(updates).shape == () and ops.aval(scatter_indices).ndim > 1:
            updates = lax.broadcast_in_dim(updates, ops.aval(scatter_indices).shape[:-1], ())
        return prim.bind(operand, scatter_indices, updates,
                         dimension_numbers=_scatter_dnums(dimension_numbers),
                         indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"XLA's scatter combining with ``{prim.name}``; index vector = last indices dimension."
    return op


scatter = _scatter_op(scatter_p, "scatter")
scatter_add = _scatter_op(scatter_add_p, "scatter_add")
scatter_mul = _scatter_op(scatter_mul_p, "scatter_mul")
scatter_min = _scatter_op(scatter_min_p, "scatter_min")
scatter_max = _scatter_op(scatter_max_p, "scatter_max")


def take_along_axis(x, indices, axis: int, permutation: bool = False):
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis`` (indices: int32 of
    x's shape): a gather whose other dimensions are batch dimensions. ``permutation``: the
    indices are a permutation along ``axis`` (unique, in bounds)."""
    aval = aval_of(x)
    batch = tuple(d for d in range(aval.ndim) if d != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,), operand_batching_dims=batch,
                                   start_indices_batching_dims=batch)
    return gather_p.bind(
        x, lax.reshape(indices, aval.shape + (1,)), dimension_numbers=dnums,
        slice_sizes=(1,) * aval.ndim, indices_are_sorted=False, unique_indices=permutation,
        mode=GatherScatterMode.PROMISE_IN_BOUNDS if permutation else GatherScatterMode.CLIP,
        fill_value=None)


def scatter_window_gather(x, indices, updates_shape, *, dimension_numbers, indices_are_sorted,
                          unique_indices, mode, fill_value=None):
    """The windows of ``x`` that a scatter with these params writes, shaped like its updates (the
    gather inverse to the scatter). Windows a dropping scatter skips read ``fill_value``: 0 in
    transposes, where a dropped update gets no cotangent."""
    dn = dimension_numbers
    slice_sizes, pos = [], 0
    for d in range(aval_of(x).ndim):
        if d in dn.inserted_window_dims or d in dn.operand_batching_dims:
            slice_sizes.append(1)
        else:
            slice_sizes.append(updates_shape[dn.update_window_dims[pos]])
            pos += 1
    gdn = GatherDimensionNumbers(offset_dims=dn.update_window_dims,
                                 collapsed_slice_dims=dn.inserted_window_dims,
                                 start_index_map=dn.scatter_dims_to_operand_dims,
                                 operand_batching_dims=dn.operand_batching_dims,
                                 start_indices_batching_dims=dn.scatter_indices_batching_dims)
    return gather_p.bind(x, indices, dimension_numbers=gdn, slice_sizes=tuple(slice_sizes),
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                         mode=mode, fill_value=fill_value)


# --------------------------------------------------------------------- jvp
for _p in (slice_p, dynamic_slice_p):
    ad.defjvp_linear(_p)


def _gather_jvp(primals, tangents, **params):
    """Linear in the operand; out-of-bounds positions of a filling gather hold a constant, so
    their tangent is 0 whatever the fill value."""
    out = gather_p.bind(*primals, **params)
    if params["mode"] == GatherScatterMode.FILL_OR_DROP:
        params = dict(params, fill_value=0)
    return out, gather_p.bind(instantiate_zeros(tangents[0]), primals[1], **params)


ad.primitive_jvps[gather_p] = _gather_jvp


def _dynamic_update_slice_jvp(primals, tangents):
    x, update, *idx = primals
    return (dynamic_update_slice_p.bind(x, update, *idx),
            dynamic_update_slice_p.bind(instantiate_zeros(tangents[0]), instantiate_zeros(tangents[1]), *idx))


def _scatter_linear_jvp(prim, primals, tangents, **params):
    """scatter-add is linear in (operand, updates); plain scatter too when indices are unique."""
    operand, indices, updates = primals
    out = prim.bind(operand, indices, updates, **params)
    return out, prim.bind(instantiate_zeros(tangents[0]), indices, instantiate_zeros(tangents[2]),
                          **params)


def _scatter_jvp(primals, tangents, **params):
    """With duplicate indices, which update lands is XLA's choice, so the program asks: it
    scatters an id per update (0 stands for the operand), reads the ids back, and masks out the
    values that lost. Value and tangent are then scatter-adds of the masked values (as JAX does),
    which transpose."""
    if params["unique_indices"]:
        return _scatter_linear_jvp(scatter_p, primals, tangents, **params)
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    u_shape = aval_of(updates).shape
    window = params["dimension_numbers"].update_window_dims
    id_shape = tuple(1 if d in window else n for d, n in enumerate(u_shape))
    ids = lax.add(lax.reshape(lax.iota(np.int32, math.prod(id_shape)), id_shape), 1)
    ids = lax.broadcast_in_dim(ids, u_shape, tuple(range(len(u_shape))))
    landed = scatter_p.bind(lax.full(aval_of(operand).shape, 0, np.int32), indices, ids, **params)
    operand_kept = lax.eq(landed, 0)
    update_kept = lax.eq(ids, scatter_window_gather(landed, indices, u_shape, **params))
    keep = lambda kept, x: lax.select_n(kept, lax.full_like(x, 0), x)
    scatter_add = lambda x, u: scatter_add_p.bind(x, indices, u, **params)
    out = scatter_add(keep(operand_kept, operand), keep(update_kept, updates))
    if isinstance(t_operand, Zero) and isinstance(t_updates, Zero):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, scatter_add(keep(operand_kept, instantiate_zeros(t_operand)),
                            keep(update_kept, instantiate_zeros(t_updates)))


def _scatter_mul_jvp(primals, tangents, **params):
    """As JAX: linear in the operand; the updates' tangent only with unique indices
    (out = x * u there, so d out = x * du scattered)."""
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    t_out = Zero(tangent_aval(aval_of(out)))
    if not isinstance(t_operand, Zero):
        t_out = scatter_mul_p.bind(t_operand, indices, updates, **params)
    if not isinstance(t_updates, Zero):
        if not params["unique_indices"]:
            raise NotImplementedError(
                "Differentiation rule for 'scatter-mul' with respect to its updates is only "
                "implemented with unique_indices=True (jvp pass), as in JAX.")
        spread = scatter_add_p.bind(zeros(aval_of(operand)), indices, t_updates, **params)
        t_out = add_tangents(t_out, lax.mul(operand, spread))
    return out, t_out


def _scatter_extremum_jvp(prim, primals, tangents, **params):
    """At each position the tangent of the value that won, averaged over ties (JAX's convention,
    as for max): the operand and every update equal to the result there are the winners."""
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    out = prim.bind(operand, indices, updates, **params)
    if isinstance(t_operand, Zero) and isinstance(t_updates, Zero):
        return out, Zero(tangent_aval(aval_of(out)))
    dtype = aval_of(operand).dtype
    scatter_add = lambda x, u: scatter_add_p.bind(x, indices, u, **params)
    won = lambda x, y: lax.convert_element_type(lax.eq(x, y), dtype)
    update_won = won(updates, scatter_window_gather(out, indices, aval_of(updates).shape, **params))
    operand_won = won(operand, out)
    winners = scatter_add(operand_won, update_won)
    total = scatter_add(lax.mul(instantiate_zeros(t_operand), operand_won),
                        lax.mul(instantiate_zeros(t_updates), update_won))
    return out, lax.div(total, winners)


ad.primitive_jvps[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.primitive_jvps[scatter_add_p] = functools.partial(_scatter_linear_jvp, scatter_add_p)
ad.primitive_jvps[scatter_p] = _scatter_jvp
ad.primitive_jvps[scatter_mul_p] = _scatter_mul_jvp
ad.primitive_jvps[scatter_min_p] = functools.partial(_scatter_extremum_jvp, scatter_min_p)
ad.primitive_jvps[scatter_max_p] = functools.partial(_scatter_extremum_jvp, scatter_max_p)


# --------------------------------------------------------------- transpose

def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    shape = x.aval.shape
    strides = strides or (1,) * len(shape)
    real_limits = [s + (n - 1) * st + 1 if n else s for s, n, st in zip(start_indices, ct.shape, strides)]
    config = [(s, d - lim, st - 1) for s, d, lim, st in zip(start_indices, shape, real_limits, strides)]
    return [lax.pad(ct, lax.full((), 0, ct.dtype), config)]


def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    if isinstance(ct, Zero):
        return [Zero(x.aval)] + [None] * len(idx)
    return [dynamic_update_slice_p.bind(zeros(x.aval), ct, *idx)] + [None] * len(idx)


def _dynamic_update_slice_transpose(ct, x, update, *idx):
    u_aval = aval_of(update)
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(u_aval) if is_undefined_primal(update) else None] + [None] * len(idx)
    ct_x = dynamic_update_slice_p.bind(ct, zeros(u_aval), *idx) if is_undefined_primal(x) else None
    ct_u = dynamic_slice_p.bind(ct, *idx, slice_sizes=u_aval.shape) if is_undefined_primal(update) else None
    return [ct_x, ct_u] + [None] * len(idx)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                      unique_indices, mode, fill_value):
    if isinstance(ct, Zero):
        return [Zero(operand.aval), None]
    dn = dimension_numbers
    sdn = _gather_scatter_dnums(offset_dims=dn.offset_dims, collapsed=dn.collapsed_slice_dims,
                                index_map=dn.start_index_map, operand_batching=dn.operand_batching_dims,
                                indices_batching=dn.start_indices_batching_dims)
    out = scatter_add_p.bind(zeros(operand.aval), indices, ct, dimension_numbers=sdn,
                             indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    return [out, None]


def _gather_scatter_dnums(offset_dims, collapsed, index_map, operand_batching, indices_batching):
    """The scatter dimension numbers that write back the windows a gather read."""
    return ScatterDimensionNumbers(update_window_dims=offset_dims, inserted_window_dims=collapsed,
                                   scatter_dims_to_operand_dims=index_map,
                                   operand_batching_dims=operand_batching,
                                   scatter_indices_batching_dims=indices_batching)


def _scatter_add_transpose(ct, operand, indices, updates, **params):
    u_aval = aval_of(updates)
    if isinstance(ct, Zero):
        return [Zero(operand.aval) if is_undefined_primal(operand) else None, None,
                Zero(u_aval) if is_undefined_primal(updates) else None]
    ct_updates = None
    if is_undefined_primal(updates):
        ct_updates = scatter_window_gather(ct, indices, u_aval.shape, **params, fill_value=0)
    return [ct if is_undefined_primal(operand) else None, None, ct_updates]


def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    """Linear in the operand (a scaling by the scattered products), and in the updates when the
    indices are unique (out = operand * update there), like mul."""
    if is_undefined_primal(operand) and is_undefined_primal(updates):
        raise ValueError("transpose of scatter-mul: operand and updates are both linear, so the "
                         "program is not linear")
    if is_undefined_primal(operand):
        if isinstance(ct, Zero):
            return [Zero(operand.aval), None, None]
        return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]
    if not params["unique_indices"]:
        raise NotImplementedError("Transpose rule for 'scatter-mul' with respect to its updates is only "
                                  "implemented with unique_indices=True (transpose pass), as in JAX.")
    if isinstance(ct, Zero):
        return [None, None, Zero(updates.aval)]
    return [None, None, scatter_window_gather(lax.mul(ct, operand), indices, updates.aval.shape, **params,
                                              fill_value=0)]


def _scatter_transpose(ct, operand, indices, updates, **params):
    """Linear only with unique indices (the jvp pass masks duplicates into scatter-adds): the
    operand's cotangent is ct with the overwritten windows zeroed, the updates' those windows."""
    if not params["unique_indices"]:
        raise NotImplementedError("Transpose rule for 'scatter' is only implemented with "
                                  "unique_indices=True (transpose pass), as in JAX.")
    u_aval = aval_of(updates)
    if isinstance(ct, Zero):
        return [Zero(operand.aval) if is_undefined_primal(operand) else None, None,
                Zero(u_aval) if is_undefined_primal(updates) else None]
    ct_operand = ct_updates = None
    if is_undefined_primal(operand):
        ct_operand = scatter_p.bind(ct, indices, zeros(u_aval), **params)
    if is_undefined_primal(updates):
        ct_updates = scatter_window_gather(ct, indices, u_aval.shape, **params, fill_value=0)
    return [ct_operand, None, ct_updates]


ad.primitive_transposes[slice_p] = _slice_transpose
ad.primitive_transposes[dynamic_slice_p] = _dynamic_slice_transpose
ad.primitive_transposes[dynamic_update_slice_p] = _dynamic_update_slice_transpose
ad.primitive_transposes[gather_p] = _gather_transpose
ad.primitive_transposes[scatter_add_p] = _scatter_add_transpose
ad.primitive_transposes[scatter_mul_p] = _scatter_mul_transpose
ad.primitive_transposes[scatter_p] = _scatter_transpose


# ---------------------------------------------------------------- batching

def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]

    def insert(t, v):
        return None if t is None else (*t[:d], v, *t[d:])
    return slice_p.bind(x, start_indices=insert(start_indices, 0),
                        limit_indices=insert(limit_indices, size),
                        strides=insert(strides, 1)), d


def _stack_indices(indices, dims, size: int):
    """Per-example scalar start indices as one ``(size, len(indices))`` index array."""
    dtype = next(aval_of(i).dtype for i, d in zip(indices, dims) if d is not None)
    columns = []
    for i, d in zip(indices, dims):
        if aval_of(i).dtype != dtype:
            i = lax.convert_element_type_p.bind(i, new_dtype=dtype, weak_type=False)
        columns.append(lax.broadcast_in_dim_p.bind(
            i, shape=(size, 1), broadcast_dimensions=() if d is None else (0,)))
    if len(columns) == 1:
        return columns[0]
    return lax.concatenate_p.bind(*columns, dimension=1)


def _zero_index(indices):
    dtype = aval_of(indices[0]).dtype if indices else dt.int32
    return scalar(0, dtype)


def _dynamic_slice_batch(args, dims, *, slice_sizes):
    (x, *indices), (xd, *idims) = args, dims
    size = axis_size_of(args, dims)
    if all(d is None for d in idims):
        indices.insert(xd, _zero_index(indices))
        sizes = (*slice_sizes[:xd], size, *slice_sizes[xd:])
        return dynamic_slice_p.bind(x, *indices, slice_sizes=sizes), xd
    # Per-example start indices: a gather with one index vector per example (JAX does the same).
    index = _stack_indices(indices, idims, size)
    rank = len(slice_sizes)
    if xd is None:
        dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)), collapsed_slice_dims=(),
                                       start_index_map=tuple(range(rank)))
        sizes = tuple(slice_sizes)
    else:
        x = moveaxis(x, xd, 0)
        dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)), collapsed_slice_dims=(),
                                       start_index_map=tuple(range(1, rank + 1)),
                                       operand_batching_dims=(0,), start_indices_batching_dims=(0,))
        sizes = (1, *slice_sizes)
    return gather_p.bind(x, index, dimension_numbers=dnums, slice_sizes=sizes,
                         indices_are_sorted=False, unique_indices=False,
                         mode=GatherScatterMode.CLIP, fill_value=None), 0


def _dynamic_update_slice_batch(args, dims):
    (x, update, *indices), (xd, ud, *idims) = args, dims
    size = axis_size_of(args, dims)
    if all(d is None for d in idims):
        (x, update), d = align([x, update], [xd, ud])
        indices.insert(d, _zero_index(indices))
        return dynamic_update_slice_p.bind(x, update, *indices), d
    # Per-example start indices: a scatter with one window per example.
    index = _stack_indices(indices, idims, size)
    x, update = matchaxis(x, xd, 0, size), matchaxis(update, ud, 0, size)
    rank = len(indices)
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, rank + 1)), inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=tuple(range(1, rank + 1)),
                                    operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    return scatter_p.bind(x, index, update, dimension_numbers=dnums, indices_are_sorted=True,
                          unique_indices=True, mode=GatherScatterMode.CLIP), 0


def _plus1(axes) -> tuple:
    return tuple(a + 1 for a in axes)


def _gather_batch(args, dims, *, dimension_numbers, slice_sizes, **params):
    (x, index), (xd, id_) = args, dims
    dn = dimension_numbers
    if id_ is None:      # the batch axis of the operand becomes a leading offset (window) axis
        x = moveaxis(x, xd, 0)
        dn = GatherDimensionNumbers(
            offset_dims=(0, *_plus1(dn.offset_dims)), collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
            start_index_map=_plus1(dn.start_index_map), operand_batching_dims=_plus1(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        slice_sizes = (aval_of(x).shape[0], *slice_sizes)
    elif xd is None:     # a leading batch axis of the indices is a leading batch axis of the result
        index = moveaxis(index, id_, 0)
        dn = dn._replace(offset_dims=_plus1(dn.offset_dims),
                         start_indices_batching_dims=_plus1(dn.start_indices_batching_dims))
    else:                # both batched: a new pair of batching dims
        x, index = moveaxis(x, xd, 0), moveaxis(index, id_, 0)
        dn = GatherDimensionNumbers(
            offset_dims=_plus1(dn.offset_dims), collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
            start_index_map=_plus1(dn.start_index_map),
            operand_batching_dims=(0, *_plus1(dn.operand_batching_dims)),
            start_indices_batching_dims=(0, *_plus1(dn.start_indices_batching_dims)))
        slice_sizes = (1, *slice_sizes)
    return gather_p.bind(x, index, dimension_numbers=dn, slice_sizes=slice_sizes, **params), 0


def _scatter_batch_rule(prim: Primitive):
    def rule(args, dims, *, dimension_numbers, **params):
        (x, index, updates), (xd, id_, ud) = args, dims
        size = axis_size_of(args, dims)
        dn = dimension_numbers
        x, updates = matchaxis(x, xd, 0, size), matchaxis(updates, ud, 0, size)
        if id_ is None:  # the batch axis is a leading window axis of the updates
            dn = ScatterDimensionNumbers(
                update_window_dims=(0, *_plus1(dn.update_window_dims)),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_plus1(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
        else:            # operand and indices batched together
            index = moveaxis(index, id_, 0)
            dn = ScatterDimensionNumbers(
                update_window_dims=_plus1(dn.update_window_dims),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0, *_plus1(dn.operand_batching_dims)),
                scatter_indices_batching_dims=(0, *_plus1(dn.scatter_indices_batching_dims)))
        return prim.bind(x, index, updates, dimension_numbers=dn, **params), 0
    return rule


batching.primitive_batchers[slice_p] = _slice_batch
batching.primitive_batchers[dynamic_slice_p] = _dynamic_slice_batch
batching.primitive_batchers[dynamic_update_slice_p] = _dynamic_update_slice_batch
batching.primitive_batchers[gather_p] = _gather_batch
for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    batching.primitive_batchers[_p] = _scatter_batch_rule(_p)


# ---------------------------------------------------------------- lowering

def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides=None):
    strides = list(strides) if strides is not None else [1] * len(start_indices)
    if not is_constant_shape((*start_indices, *limit_indices, *strides)):     # a dynamic lowering
        return hlo.real_dynamic_slice(mlir.aval_to_ir_type(ctx.avals_out[0]), x,
                                      *map(dynamic_shapes.shape_value, (start_indices, limit_indices, strides)))
    return hlo.slice(x, list(start_indices), list(limit_indices), strides)


def _index_scalars(idxs, avals):
    """Start indices of one common type (stablehlo requires it); int32 unless one needs 64 bits."""
    wide = any(a.dtype.itemsize > 4 for a in avals)
    target = dt.int64 if wide else dt.int32
    return [i if a.dtype == target else hlo.convert(mlir.scalar_type(target), i) for i, a in zip(idxs, avals)]


def _dynamic_slice_lowering(ctx, x, *idxs, slice_sizes):
    if not is_constant_shape(slice_sizes):
        return _real_dynamic_slice(ctx, x, idxs, slice_sizes)
    return hlo.dynamic_slice(x, _index_scalars(idxs, ctx.avals_in[1:]), list(slice_sizes))


def _real_dynamic_slice(ctx, x, idxs, slice_sizes):
    """A dynamic_slice of symbolic sizes (export): ``real_dynamic_slice`` from the start indices,
    clamped as dynamic_slice clamps them so that the window fits."""
    i64 = mlir.aval_to_ir_type(ShapedArray((), dt.int64))
    one = mlir.aval_to_ir_type(ShapedArray((1,), dt.int64))
    starts = []
    for idx, size, dim in zip(idxs, slice_sizes, ctx.avals_in[0].shape):
        start = hlo.clamp(mlir.full((), 0, dt.int64), hlo.convert(i64, idx),
                          hlo.subtract(dynamic_shapes.dim_value(dim), dynamic_shapes.dim_value(size)))
        starts.append(hlo.reshape(one, start))
    starts = starts[0] if len(starts) == 1 else hlo.concatenate(starts, 0)
    # limits = starts + sizes: once refinement makes the sizes constants, this is a dynamic_slice
    limits = hlo.add(starts, dynamic_shapes.shape_value(slice_sizes))
    strides = dynamic_shapes.shape_value((1,) * len(slice_sizes))
    return hlo.real_dynamic_slice(mlir.aval_to_ir_type(ctx.avals_out[0]), x, starts, limits, strides)


def _dynamic_update_slice_lowering(ctx, x, update, *idxs):
    return hlo.dynamic_update_slice(x, update, _index_scalars(idxs, ctx.avals_in[2:]))


def _hlo_gather_dnums(dnums, index_vector_dim):
    return hlo.GatherDimensionNumbers.get(
        offset_dims=list(dnums.offset_dims), collapsed_slice_dims=list(dnums.collapsed_slice_dims),
        operand_batching_dims=list(dnums.operand_batching_dims),
        start_indices_batching_dims=list(dnums.start_indices_batching_dims),
        start_index_map=list(dnums.start_index_map), index_vector_dim=index_vector_dim)


def default_fill_value(dtype):
    """JAX's fill for out-of-bounds FILL_OR_DROP gathers: NaN, the minimum (signed), the maximum (unsigned), True."""
    if dt.is_inexact(dtype):
        return np.nan
    if dt.is_signed(dtype):
        return dt.iinfo(dtype).min
    if dt.is_unsigned(dtype):
        return dt.iinfo(dtype).max
    return True


def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None,
                     indices_are_sorted=False, unique_indices=False):
    """XLA clamps start indices (CLIP, PROMISE_IN_BOUNDS); FILL_OR_DROP masks windows that do not fit."""
    op_aval, idx_aval = ctx.avals_in
    out_aval = ctx.avals_out[0]
    batch_ndim = idx_aval.ndim - 1
    if is_constant_shape(slice_sizes):
        out = hlo.gather(operand, indices, _hlo_gather_dnums(dimension_numbers, batch_ndim), list(slice_sizes),
                         indices_are_sorted=bool(indices_are_sorted))
    else:           # symbolic window sizes (export): the sizes are an operand
        out = hlo.dynamic_gather(operand, indices, dynamic_shapes.shape_value(slice_sizes),
                                 _hlo_gather_dnums(dimension_numbers, batch_ndim),
                                 indices_are_sorted=bool(indices_are_sorted))
        out = hlo.convert(mlir.aval_to_ir_type(out_aval), out) if out.type != mlir.aval_to_ir_type(out_aval) else out
    if param_name(mode) != "FILL_OR_DROP":
        return out
    # Signed 64-bit indices, so large unsigned ones compare correctly.
    idx_dtype = dt.int64
    idx = indices if idx_aval.dtype == idx_dtype else hlo.convert(
        mlir.aval_to_ir_type(idx_aval.update(dtype=idx_dtype)), indices)
    upper = tuple(op_aval.shape[d] - slice_sizes[d] for d in dimension_numbers.start_index_map)
    upper = (mlir.ir_constant(np.array(upper, idx_dtype)) if is_constant_shape(upper)
             else dynamic_shapes.shape_value(upper))
    upper = _broadcast(upper, idx_aval.update(dtype=idx_dtype), [batch_ndim])
    in_bounds = hlo.and_(mlir.compare(idx, mlir.full(idx_aval.shape, 0, idx_dtype), "GE", idx_dtype),
                         mlir.compare(idx, upper, "LE", idx_dtype))
    mask_t = mlir.aval_to_ir_type(ShapedArray(idx_aval.shape[:-1], dt.bool_))
    (mask,) = mlir.reduce([in_bounds], [mlir.ir_constant(True)], [batch_ndim], [mask_t], hlo.and_)
    batch_dims_in_out = [d for d in range(out_aval.ndim) if d not in dimension_numbers.offset_dims]
    mask = _broadcast(mask, out_aval.update(dtype=dt.bool_), batch_dims_in_out)
    fill = default_fill_value(out_aval.dtype) if fill_value is None else fill_value
    return hlo.select(mask, out, mlir.full(out_aval.shape, fill, out_aval.dtype))


_SCATTER_COMBINERS = {scatter_p: lambda old, new: new, scatter_add_p: hlo.add, scatter_mul_p: hlo.multiply,
                      scatter_min_p: "min", scatter_max_p: "max"}


def _clamp_scatter_indices(indices, idx_aval, op_aval, upd_aval, dnums):
    """CLIP mode: clamp each index so its whole update window lies inside the operand (as JAX)."""
    window = iter(dnums.update_window_dims)
    sizes = [1 if d in dnums.inserted_window_dims or d in dnums.operand_batching_dims
             else upd_aval.shape[next(window)] for d in range(op_aval.ndim)]
    upper = np.array([op_aval.shape[d] - sizes[d] for d in dnums.scatter_dims_to_operand_dims])
    upper = np.minimum(upper, np.iinfo(idx_aval.dtype).max).astype(idx_aval.dtype)
    upper = hlo.broadcast_in_dim(mlir.aval_to_ir_type(idx_aval), mlir.ir_constant(upper), [idx_aval.ndim - 1])
    return hlo.clamp(mlir.full(idx_aval.shape, 0, idx_aval.dtype), indices, upper)


def _scatter_lowering(ctx, operand, indices, updates, *, dimension_numbers, mode, indices_are_sorted=False,
                      unique_indices=False, **_):
    """XLA drops out-of-bounds updates (FILL_OR_DROP, PROMISE_IN_BOUNDS); CLIP clamps first."""
    op_aval, idx_aval, upd_aval = ctx.avals_in
    dnums = dimension_numbers
    if param_name(mode) == "CLIP":
        indices = _clamp_scatter_indices(indices, idx_aval, op_aval, upd_aval, dnums)
    sdn = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(dnums.update_window_dims), inserted_window_dims=list(dnums.inserted_window_dims),
        input_batching_dims=list(dnums.operand_batching_dims),
        scatter_indices_batching_dims=list(dnums.scatter_indices_batching_dims),
        scattered_dims_to_operand_dims=list(dnums.scatter_dims_to_operand_dims),
        index_vector_dim=idx_aval.ndim - 1)
    op = hlo.ScatterOp([operand.type], [operand], indices, [updates], sdn,
                       indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))
    combine = _SCATTER_COMBINERS[ctx.primitive]
    if isinstance(combine, str):
        combine = mlir.max_min(combine, op_aval.dtype)
    scalar_t = mlir.scalar_type(op_aval.dtype)
    mlir.add_region(op.update_computation, [scalar_t, scalar_t], combine)
    return op.result


mlir.register_lowering(slice_p, _slice_lowering)
mlir.register_lowering(dynamic_slice_p, _dynamic_slice_lowering)
mlir.register_lowering(dynamic_update_slice_p, _dynamic_update_slice_lowering)
mlir.register_lowering(gather_p, _gather_lowering)
for _p in _SCATTER_COMBINERS:
    mlir.register_lowering(_p, _scatter_lowering)


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(slice_p)
jet.deflinear_in(dynamic_slice_p, {0})
jet.deflinear_in(dynamic_update_slice_p, {0, 1})
jet.deflinear_in(gather_p, {0})
jet.deflinear_in(scatter_add_p, {0, 2})
