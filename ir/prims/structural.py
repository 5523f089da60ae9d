"""Structural primitives: they move, select, combine or index elements without arithmetic.

Params that describe shapes and axes are tuples of Python ints (``lax``
normalises what users pass). Results keep the operand's weak type, as in JAX;
primitives that merge several arrays are weak only when all of them are.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..core import JaxprTypeError, Primitive, ShapedArray, param_type
from .elementwise import INTEGRAL, NUM, fmt_types


def type_error(name: str, avals, expected: str, **params) -> JaxprTypeError:
    """The one-paragraph typing error: primitive, operand types, params, what was expected."""
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    with_params = f" with {shown}" if shown else ""
    return JaxprTypeError(f"{name} got operands ({fmt_types(avals)}){with_params}; expected {expected}")


def check_axes(name: str, aval: ShapedArray, axes, what: str = "axes", **params) -> None:
    """``axes`` are distinct valid dimensions of ``aval``."""
    if len(set(axes)) != len(axes) or any(not 0 <= a < aval.ndim for a in axes):
        raise type_error(name, [aval], f"{what} to be distinct dimensions in [0, {aval.ndim})",
                         **{what: axes}, **params)


def check_index_scalars(name: str, avals, indices) -> None:
    for i in indices:
        if i.shape != () or not INTEGRAL(i.dtype):
            raise type_error(name, avals, f"start indices to be integer scalars, got {i.str_short()}")


# ----------------------------------------------------------- broadcast_in_dim
broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_rule(x, *, shape, broadcast_dimensions):
    params = dict(shape=shape, broadcast_dimensions=broadcast_dimensions)
    if len(broadcast_dimensions) != x.ndim:
        raise type_error("broadcast_in_dim", [x], f"one broadcast dimension per operand dimension "
                         f"({x.ndim})", **params)
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or \
            any(a >= b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:])):
        raise type_error("broadcast_in_dim", [x], f"strictly increasing broadcast_dimensions in "
                         f"[0, {len(shape)})", **params)
    if any(s < 0 for s in shape):
        raise type_error("broadcast_in_dim", [x], "a shape of non-negative sizes", **params)
    for k, d in enumerate(broadcast_dimensions):
        if x.shape[k] not in (1, shape[d]):
            raise type_error("broadcast_in_dim", [x], f"operand dimension {k} (size {x.shape[k]}) "
                             f"to be 1 or the size of result dimension {d} ({shape[d]})", **params)
    return ShapedArray(shape, x.dtype, x.weak_type)


# --------------------------------------------------------------------- reshape
reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_rule(x, *, new_sizes, dimensions):
    if dimensions is not None:
        raise type_error("reshape", [x], "dimensions=None (transpose first)",
                         new_sizes=new_sizes, dimensions=dimensions)
    if any(s < 0 for s in new_sizes) or int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise type_error("reshape", [x], f"new_sizes with the operand's {x.size} elements",
                         new_sizes=new_sizes)
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


# ------------------------------------------------------------------- transpose
transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise type_error("transpose", [x], f"a permutation of (0, ..., {x.ndim - 1})",
                         permutation=permutation)
    return ShapedArray([x.shape[p] for p in permutation], x.dtype, x.weak_type)


# --------------------------------------------------------------------- squeeze
squeeze_p = Primitive("squeeze")


@squeeze_p.def_abstract_eval
def _squeeze_rule(x, *, dimensions):
    check_axes("squeeze", x, dimensions, "dimensions")
    if any(x.shape[d] != 1 for d in dimensions):
        raise type_error("squeeze", [x], "the squeezed dimensions to have size 1", dimensions=dimensions)
    return ShapedArray([s for i, s in enumerate(x.shape) if i not in dimensions], x.dtype, x.weak_type)


# ------------------------------------------------------------------------- rev
rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_rule(x, *, dimensions):
    check_axes("rev", x, dimensions, "dimensions")
    return x


# ------------------------------------------------------------------------- pad
pad_p = Primitive("pad")


@pad_p.def_abstract_eval
def _pad_rule(x, padval, *, padding_config):
    if padval.shape != () or padval.dtype != x.dtype:
        raise type_error("pad", [x, padval], "a scalar padding value of the operand's dtype")
    if len(padding_config) != x.ndim or any(len(c) != 3 for c in padding_config):
        raise type_error("pad", [x, padval], f"a (lo, hi, interior) triple per dimension ({x.ndim})",
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


# ----------------------------------------------------------------------- slice
slice_p = Primitive("slice")


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
        shape.append(-(-(hi - lo) // st))
    return ShapedArray(shape, x.dtype, x.weak_type)


# --------------------------------------------------------------- dynamic_slice
dynamic_slice_p = Primitive("dynamic_slice")


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


dynamic_update_slice_p = Primitive("dynamic_update_slice")


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


gather_p = Primitive("gather")


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
    return prim


scatter_p = _scatter_primitive("scatter")
scatter_add_p = _scatter_primitive("scatter-add")
scatter_mul_p = _scatter_primitive("scatter-mul")
scatter_min_p = _scatter_primitive("scatter-min")
scatter_max_p = _scatter_primitive("scatter-max")


# ------------------------------------------------------------------------ iota
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_rule(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape) or any(s < 0 for s in shape):
        raise type_error("iota", [], f"dimension in [0, {len(shape)}) and non-negative sizes",
                         shape=shape, dimension=dimension)
    if not NUM(dtype):
        raise type_error("iota", [], f"a numeric dtype, got {dt.short_name(dtype)}")
    return ShapedArray(shape, dtype)
