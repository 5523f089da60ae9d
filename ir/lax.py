"""jaxprc.lax's op builders: one function per primitive, with JAX's signatures.

Each function normalises its arguments (Python scalars, negative axes, lists
to tuples, dtypes) and binds a primitive, so the same call records an
equation inside a trace and runs eagerly outside one.

Binary ops require equal dtypes, as in JAX, with two conveniences the
primitives lack: a Python scalar operand takes the dtype of the other
operands (staying weakly typed), when that dtype can hold its kind
(``add(f16_array, 1.0)`` is float16; ``add(i32_array, 1.5)`` is an error);
and rank-0 operands are broadcast to the others' shape with
``broadcast_in_dim``.
"""
from __future__ import annotations

import builtins
import enum

import numpy as np

from . import dtypes as dt
from .core import Literal, ShapedArray
from .prims import elementwise as ew
from .prims import linalg as la
from .prims import reductions as rd
from .prims import structural as st
from .prims.structural import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from .tracing import Tracer, current_builder, get_aval

_PY_SCALARS = (bool, int, float, complex)


# ---------------------------------------------------------------- operands

def _aval(x) -> ShapedArray:
    return x.aval if isinstance(x, Literal) else get_aval(x)


def _is_py_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def _canonical_axis(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else axis


def _canonical_axes(axes, ndim: int) -> tuple[int, ...]:
    return tuple(_canonical_axis(a, ndim) for a in axes)


def _ints(xs) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _scalar_of_dtype(x, dtype, weak: bool):
    """A scalar constant of ``dtype``: a Literal inside a trace, a converted value outside."""
    value = np.asarray(x, dtype=dtype)[()]
    if current_builder() is not None:
        return Literal(value, ShapedArray((), dtype, weak))
    if weak:   # keep the weak bit on the eager value (a plain numpy scalar would lose it)
        return ew.convert_element_type_p.bind(value, new_dtype=np.dtype(dtype), weak_type=True)
    return value


def _match_python_scalars(name: str, args):
    """Give Python scalar operands the dtype of the typed operands (see the module docstring)."""
    typed = [_aval(a) for a in args if not _is_py_scalar(a)]
    if len(typed) == len(args):
        return list(args)
    if typed:
        dtype = typed[0].dtype
    else:
        dtype, _ = dt.promote_types(*[(dt.python_scalar_dtype(a), not isinstance(a, bool)) for a in args])
    out = []
    for a in args:
        if not _is_py_scalar(a):
            out.append(a)
            continue
        weak = not isinstance(a, bool)
        kind = (dt.python_scalar_dtype(a), weak)
        if dt.promote_types((dtype, False), kind)[0] != dtype:
            raise TypeError(f"lax.{name} requires arguments to have the same dtypes: the Python scalar "
                            f"{a!r} cannot take the dtype {dtype.name} of the other operands "
                            f"({', '.join(t.str_short() for t in typed)}). Convert it explicitly, or "
                            f"use jaxprc.numpy.{name}, which promotes.")
        out.append(_scalar_of_dtype(a, dtype, weak))
    return out


def _broadcast_rank0(args):
    """Broadcast rank-0 operands to the shape of the others (lax's only implicit broadcasting)."""
    shapes = [_aval(a).shape for a in args]
    target = next((s for s in shapes if s != ()), None)
    if target is None:
        return list(args)
    return [broadcast_in_dim(a, target, ()) if s == () else a for a, s in zip(args, shapes)]


def _nary(prim, name: str, *args, **params):
    args = _broadcast_rank0(_match_python_scalars(name, args))
    return prim.bind(*args, **params)


class Precision(enum.Enum):
    """Accepted for JAX compatibility; jaxprc's dot_general always uses XLA's default precision."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


# --------------------------------------------------------------- structural

def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Operand dimension ``k`` becomes result dimension ``broadcast_dimensions[k]``."""
    shape, dims = _ints(shape), _ints(broadcast_dimensions)
    aval = _aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))) and isinstance(operand, Tracer):
        return operand
    return st.broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def broadcast(operand, sizes):
    """``operand`` with new leading dimensions of ``sizes``."""
    sizes = _ints(sizes)
    ndim = _aval(operand).ndim
    return broadcast_in_dim(operand, sizes + _aval(operand).shape,
                            range(len(sizes), len(sizes) + ndim))


def broadcast_to_rank(x, rank: int):
    """``x`` with leading dimensions of size 1 added up to ``rank``."""
    aval = _aval(x)
    extra = rank - aval.ndim
    return x if extra <= 0 else broadcast(x, (1,) * extra)


def reshape(operand, new_sizes, dimensions=None):
    """``operand``'s elements in row-major order, transposed by ``dimensions`` first if given."""
    new_sizes = _ints(new_sizes)
    if dimensions is not None:
        operand = transpose(operand, dimensions)
    if _aval(operand).shape == new_sizes and isinstance(operand, Tracer):
        return operand
    return st.reshape_p.bind(operand, new_sizes=new_sizes, dimensions=None)


def transpose(operand, permutation):
    ndim = _aval(operand).ndim
    permutation = _canonical_axes(permutation, ndim) if len(permutation) == ndim else _ints(permutation)
    if permutation == tuple(range(ndim)) and isinstance(operand, Tracer):
        return operand
    return st.transpose_p.bind(operand, permutation=permutation)


def squeeze(array, dimensions):
    """``array`` without the given size-1 dimensions."""
    dims = tuple(sorted(_canonical_axes(dimensions, _aval(array).ndim)))
    if not dims and isinstance(array, Tracer):
        return array
    return st.squeeze_p.bind(array, dimensions=dims)


def expand_dims(array, dimensions):
    """``array`` with size-1 dimensions inserted at ``dimensions`` (positions in the result)."""
    aval = _aval(array)
    ndim = aval.ndim + len(dimensions)
    inserted = set(_canonical_axes(dimensions, ndim))
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
    shape = _aval(operand).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    size = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return reshape(operand, shape[:start_dimension] + (size,) + shape[stop:])


def rev(operand, dimensions):
    """``operand`` reversed along ``dimensions``."""
    return st.rev_p.bind(operand, dimensions=_canonical_axes(dimensions, _aval(operand).ndim))


def pad(operand, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` amounts per dimension; negative low/high crop."""
    operand, padding_value = _match_python_scalars("pad", (operand, padding_value))
    config = tuple(_ints(c) for c in padding_config)
    return st.pad_p.bind(operand, padding_value, padding_config=config)


def concatenate(operands, dimension: int):
    operands = list(operands)
    if not operands:
        raise ValueError("concatenate requires at least one operand")
    if len(operands) == 1 and isinstance(operands[0], Tracer):
        return operands[0]
    dimension = _canonical_axis(dimension, _aval(operands[0]).ndim)
    return st.concatenate_p.bind(*operands, dimension=dimension)


def slice(operand, start_indices, limit_indices, strides=None):
    """Static slice ``operand[start:limit:stride]`` per dimension."""
    return st.slice_p.bind(operand, start_indices=_ints(start_indices), limit_indices=_ints(limit_indices),
                           strides=None if strides is None else _ints(strides))


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """Static slice along one axis; ``None`` and negative bounds as in Python."""
    shape = _aval(operand).shape
    axis = _canonical_axis(axis, len(shape))
    start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, builtins.max(limit, start), stride
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Static ``operand[..., index, ...]`` along ``axis``."""
    shape = _aval(operand).shape
    axis = _canonical_axis(axis, len(shape))
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
    aval = _aval(i)
    if aval.shape != () or not dt.is_int(aval.dtype):
        raise TypeError(f"start indices must be integer scalars, got {aval.str_short()}")
    if dt.is_unsigned(aval.dtype):
        return i
    return select(lt(i, 0), add(i, size), i)


def _start_indices(operand, start_indices):
    shape = _aval(operand).shape
    if not isinstance(start_indices, (list, tuple)):   # a 1-D array of indices
        start_indices = [index_in_dim(start_indices, k, 0, keepdims=False) for k in range(len(shape))]
    if len(start_indices) != len(shape):
        raise TypeError(f"dynamic slicing of an array of rank {len(shape)} needs {len(shape)} start "
                        f"indices, got {len(start_indices)}")
    return [_dynamic_index(i, d) for i, d in zip(start_indices, shape)]


def dynamic_slice(operand, start_indices, slice_sizes):
    """``operand[start:start+size]`` per dimension, with starts clamped into bounds."""
    starts = _start_indices(operand, start_indices)
    return st.dynamic_slice_p.bind(operand, *starts, slice_sizes=_ints(slice_sizes))


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with ``update`` written at ``start_indices`` (clamped so it fits)."""
    starts = _start_indices(operand, start_indices)
    return st.dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    shape = _aval(operand).shape
    axis = _canonical_axis(axis, len(shape))
    starts = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    axis = _canonical_axis(axis, _aval(operand).ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    ndim = _aval(operand).ndim
    axis = _canonical_axis(axis, ndim)
    starts = [0] * ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    axis = _canonical_axis(axis, _aval(operand).ndim)
    if _aval(update).ndim == _aval(operand).ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def _gather_dnums(dn) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(*(_ints(f) for f in dn))


def _scatter_dnums(dn) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*(_ints(f) for f in dn))


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's gather; the index vector is the last dimension of ``start_indices``."""
    return st.gather_p.bind(operand, start_indices, dimension_numbers=_gather_dnums(dimension_numbers),
                            slice_sizes=_ints(slice_sizes), indices_are_sorted=bool(indices_are_sorted),
                            unique_indices=bool(unique_indices), mode=GatherScatterMode.from_any(mode),
                            fill_value=fill_value)


def _scatter_op(prim, name):
    def op(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        operand, updates = _match_python_scalars(name, (operand, updates))
        if _aval(updates).shape == () and _aval(scatter_indices).ndim > 1:
            updates = broadcast_in_dim(updates, _aval(scatter_indices).shape[:-1], ())
        return prim.bind(operand, scatter_indices, updates,
                         dimension_numbers=_scatter_dnums(dimension_numbers),
                         indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"XLA's scatter combining with ``{prim.name}``; index vector = last indices dimension."
    return op


scatter = _scatter_op(st.scatter_p, "scatter")
scatter_add = _scatter_op(st.scatter_add_p, "scatter_add")
scatter_mul = _scatter_op(st.scatter_mul_p, "scatter_mul")
scatter_min = _scatter_op(st.scatter_min_p, "scatter_min")
scatter_max = _scatter_op(st.scatter_max_p, "scatter_max")


def iota(dtype, size: int):
    """``[0, 1, ..., size-1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension: int):
    """Counts along ``dimension``, constant along the others."""
    shape = _ints(shape)
    return st.iota_p.bind(dtype=dt.canonicalize_dtype(dtype), shape=shape,
                          dimension=_canonical_axis(dimension, len(shape)))


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort one array, or a tuple of arrays lexicographically by the first ``num_keys``."""
    single = not isinstance(operand, (tuple, list))
    operands = [operand] if single else list(operand)
    dimension = _canonical_axis(dimension, _aval(operands[0]).ndim)
    outs = st.sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable), num_keys=int(num_keys))
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """``keys`` sorted, and ``values`` permuted alike."""
    return sort((keys, values), dimension, is_stable, 1)


def _arg_op(prim):
    def op(operand, axis: int, index_dtype):
        axis = _canonical_axis(axis, _aval(operand).ndim)
        return prim.bind(operand, axes=(axis,), index_dtype=dt.canonicalize_dtype(index_dtype))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Index of the {prim.name[3:]}imum along ``axis`` (first one on ties)."
    return op


argmax, argmin = _arg_op(st.argmax_p), _arg_op(st.argmin_p)


def _cumulative_op(prim):
    def op(operand, axis: int = 0, reverse: bool = False):
        axis = _canonical_axis(axis, _aval(operand).ndim)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Inclusive ``{prim.name}`` along ``axis`` (from the end when ``reverse``)."
    return op


cumsum, cumprod, cummax, cummin, cumlogsumexp = map(
    _cumulative_op, (st.cumsum_p, st.cumprod_p, st.cummax_p, st.cummin_p, st.cumlogsumexp_p))


# --------------------------------------------------------------- reductions

def _reduction_op(prim):
    def op(operand, axes):
        return prim.bind(operand, axes=_canonical_axes(axes, _aval(operand).ndim))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"``{prim.name}`` over ``axes``."
    return op


reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and, reduce_or, reduce_xor = map(
    _reduction_op, (rd.reduce_sum_p, rd.reduce_prod_p, rd.reduce_max_p, rd.reduce_min_p,
                    rd.reduce_and_p, rd.reduce_or_p, rd.reduce_xor_p))


# ----------------------------------------------------------- linear algebra

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contract ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    Result dimensions: batch, lhs free, rhs free. ``precision`` is accepted
    and ignored (XLA's default).
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb)))
    pet = None if preferred_element_type is None else dt.canonicalize_dtype(preferred_element_type)
    return la.dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=None,
                                 preferred_element_type=pet)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """Vector/matrix products: contracts lhs's last dimension with rhs's first (ranks 1 or 2),
    or ``dot_general`` when ``dimension_numbers`` is given. Options are keyword-only, as in JAX 0.10."""
    if dimension_numbers is None:
        ln, rn = _aval(lhs).ndim, _aval(rhs).ndim
        if ln not in (1, 2) or rn not in (1, 2):
            raise TypeError(f"lax.dot takes operands of rank 1 or 2, got {_aval(lhs).str_short()} and "
                            f"{_aval(rhs).str_short()}; pass dimension_numbers for other ranks")
        dimension_numbers = (((ln - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


# -------------------------------------------------------------- constants

def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with the scalar ``fill_value`` (weak if it is and no dtype)."""
    shape = _ints(shape)
    aval = _aval(fill_value)
    if aval.shape != ():
        raise TypeError(f"full must be called with a scalar fill_value, got {aval.str_short()}")
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dt.canonicalize_dtype(dtype)
    return broadcast_in_dim(_convert(fill_value, dtype, weak), shape, ())


def full_like(x, fill_value, dtype=None, shape=None):
    """``full`` with ``x``'s shape and dtype (and weak type, when no dtype is given)."""
    aval = _aval(x)
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dt.canonicalize_dtype(dtype)
    fill = _convert(fill_value, dtype, weak)
    return broadcast_in_dim(fill, aval.shape if shape is None else shape, ())


def zeros_like_array(x):
    return full_like(x, 0)


__all__ = [
    # structural
    "broadcast_in_dim", "broadcast", "broadcast_to_rank", "reshape", "transpose", "squeeze",
    "expand_dims", "collapse", "rev", "pad", "concatenate", "slice", "slice_in_dim", "index_in_dim",
    "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "gather", "scatter", "scatter_add",
    "scatter_mul", "scatter_min", "scatter_max", "GatherDimensionNumbers", "ScatterDimensionNumbers",
    "GatherScatterMode", "iota", "broadcasted_iota", "sort", "sort_key_val", "argmax", "argmin",
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    # reductions, linear algebra, constants
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_xor",
    "dot_general", "dot", "Precision", "full", "full_like", "zeros_like_array",
]
