"""Selecting and ordering elements: where, select, clip, sort, argsort, diag, diagonal, trace, triu, tril."""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import is_symbolic_dim
from jaxprc.lax import elementwise as ew

from .creation import as_array, eye, full, zeros, zeros_like
from ._util import aval_of, broadcast_shapes, broadcast_to_shape, canonical_axis, convert, promote


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` holds, else ``y`` (``select_n`` after promotion and broadcasting);
    with only ``condition``, its ``nonzero`` indices (``size``/``fill_value`` as there)."""
    if x is None and y is None:
        from .indexing import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where function.")
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y must be given")
    (x, y), _, _ = promote("where", x, y)
    shape = broadcast_shapes(aval_of(condition, "where").shape, aval_of(x).shape, fn="where")
    cond = broadcast_to_shape(convert(condition, dt.bool_), shape)
    x, y = broadcast_to_shape(x, shape), broadcast_to_shape(y, shape)
    return ew.select_n_p.bind(cond, y, x)


def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, elementwise; ``default`` where none does."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: {len(condlist)} conditions but {len(choicelist)} choices")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return out


def clip(arr, min=None, max=None, *, a_min=None, a_max=None):
    """``arr`` limited to [min, max] (either bound may be None)."""
    from .ufuncs import maximum, minimum
    min = a_min if min is None else min
    max = a_max if max is None else max
    out = as_array(arr, "clip")
    if min is not None:
        out = maximum(min, out)
    if max is not None:
        out = minimum(max, out)
    return out


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    a = as_array(a, "sort")
    if axis is None:
        from .shape_ops import ravel
        a, axis = ravel(a), 0
    axis = canonical_axis(axis, aval_of(a).ndim, "sort")
    out = lax.sort(a, axis, is_stable=stable)
    if descending:
        out = lax.rev(out, (axis,))
    return out


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Indices that sort ``a`` along ``axis`` (a two-operand sort carrying an iota)."""
    a = as_array(a, "argsort")
    if axis is None:
        from .shape_ops import ravel
        a, axis = ravel(a), 0
    aval = aval_of(a)
    axis = canonical_axis(axis, aval.ndim, "argsort")
    idx = lax.broadcasted_iota(dt.default_int_dtype(), aval.shape, axis)
    if descending:
        a = lax.rev(a, (axis,))
        idx = lax.rev(idx, (axis,))
    _, perm = lax.sort((a, idx), axis, is_stable=stable, num_keys=1)
    return lax.rev(perm, (axis,)) if descending else perm


def _rows_cols(shape):
    rows = lax.broadcasted_iota(dt.int32, shape, len(shape) - 2)
    cols = lax.broadcasted_iota(dt.int32, shape, len(shape) - 1)
    return rows, cols


def triu(m, k: int = 0):
    """Zeros below the ``k``-th diagonal of the last two axes."""
    from .ufuncs import add, less_equal
    m = as_array(m, "triu")
    rows, cols = _rows_cols(aval_of(m).shape)
    return where(less_equal(add(rows, k), cols), m, zeros_like(m))


def tril(m, k: int = 0):
    """Zeros above the ``k``-th diagonal of the last two axes."""
    from .ufuncs import add, greater_equal
    m = as_array(m, "tril")
    rows, cols = _rows_cols(aval_of(m).shape)
    return where(greater_equal(add(rows, k), cols), m, zeros_like(m))


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The ``offset`` diagonal of the plane (axis1, axis2), as a trailing axis (a static gather)."""
    from .shape_ops import moveaxis
    a = as_array(a, "diagonal")
    n = aval_of(a).ndim
    a = moveaxis(a, (canonical_axis(axis1, n, "diagonal"), canonical_axis(axis2, n, "diagonal")), (-2, -1))
    rows_n, cols_n = aval_of(a).shape[-2:]
    i = np.arange(max(0, -offset), max(0, -offset, min(rows_n, cols_n - offset)))
    return a[..., i, i + offset]


def diag(v, k: int = 0):
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with ``v`` on its ``k``-th diagonal."""
    v = as_array(v, "diag")
    n = aval_of(v).ndim
    if n == 2:
        return diagonal(v, k)
    if n != 1:
        raise ValueError(f"diag: input must be 1-D or 2-D, got {n}-D")
    size = aval_of(v).shape[0] + abs(k)
    out = zeros((size, size), aval_of(v).dtype)
    if size == 0:
        return out
    placed = lax.pad(v, convert(0, aval_of(v).dtype), [(0, abs(k), 0)])
    rows = broadcast_to_shape(lax.expand_dims(placed, (1,)) if k >= 0 else lax.expand_dims(placed, (0,)),
                              (size, size))
    return where(eye(size, k=k, dtype=dt.bool_), rows, out)


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
    from .reductions import sum
    a = as_array(a, "trace")
    shape = aval_of(a).shape
    n, m = shape[canonical_axis(axis1, len(shape))], shape[canonical_axis(axis2, len(shape))]
    if is_symbolic_dim(n) or is_symbolic_dim(m):
        # The diagonal's length min(n, m) may be undecidable: sum the matrix masked by eye (JAX's way).
        from .shape_ops import moveaxis
        a = moveaxis(a, (axis1, axis2), (-2, -1))
        return sum(where(eye(n, m, k=offset, dtype=bool), a, zeros_like(a)), axis=(-2, -1), dtype=dtype)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _precedes_in_sort_order(a, v, or_equal):
    """``a < v`` (``a <= v`` if ``or_equal``) in sort order, where NaN is above everything
    and equal to NaN (numpy's and JAX's order); plain comparisons would put NaN nowhere."""
    from .ufuncs import isnan, less, less_equal, logical_and, logical_not, logical_or
    if not dt.is_inexact(aval_of(a).dtype) and not dt.is_inexact(aval_of(v).dtype):
        return (less_equal if or_equal else less)(a, v)
    if or_equal:
        return logical_or(less_equal(a, v), isnan(v))
    return logical_or(less(a, v), logical_and(isnan(v), logical_not(isnan(a))))


_SEARCH_METHODS = ("compare_all", "scan", "scan_unrolled", "sort")


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion indices keeping ``a`` (1-D, sorted) sorted. ``method`` picks JAX's algorithm,
    which matters only when ``a`` is not sorted: 'scan' (binary search) and 'compare_all' (a
    count of the elements before each value) give different answers there, as in JAX."""
    a, v = as_array(a, "searchsorted"), as_array(v, "searchsorted")
    if aval_of(a).ndim != 1:
        raise ValueError("searchsorted: a should be 1-dimensional")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: invalid argument side={side!r}, expected 'left' or 'right'")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"searchsorted: invalid argument method={method!r}, expected one of "
                         f"{list(_SEARCH_METHODS)}")
    from .convolve import promote_no_broadcast
    a, v = promote_no_broadcast("searchsorted", a, v, to_inexact=False)
    if sorter is not None:
        a = a[as_array(sorter, "searchsorted")]
    n = aval_of(a).shape[0]
    dtype = dt.int64 if n > np.iinfo(np.int32).max else dt.int32
    if n == 0:
        return zeros(aval_of(v).shape, dtype)
    if method == "compare_all":
        return _searchsorted_count(a, v, side, dtype)
    if method == "sort":
        return _searchsorted_sort(a, v, side, dtype)
    return _searchsorted_bisect(a, v, side, dtype)


def _searchsorted_count(a, v, side, dtype):
    from .reductions import sum
    from .shape_ops import expand_dims
    before = _precedes_in_sort_order(a, expand_dims(v, -1), or_equal=side != "left")
    return sum(before, axis=-1, dtype=dtype)


def _searchsorted_bisect(a, v, side, dtype):
    """Binary search, one step per level (ceil(log2(n + 1)) gathers): JAX's 'scan' method."""
    from .ufuncs import add, floor_divide, minimum, subtract
    n = aval_of(a).shape[0]
    low, high = zeros(aval_of(v).shape, dtype), full(aval_of(v).shape, n, dtype)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = add(low, floor_divide(subtract(high, low), 2))
        # mid == n only once low == high == n, where both branches keep it.
        go_left = _precedes_in_sort_order(v, a[minimum(mid, n - 1)], or_equal=side == "left")
        low, high = where(go_left, low, mid), where(go_left, mid, high)
    return high


def _searchsorted_sort(a, v, side, dtype):
    """Ranks in a stable co-sort of ``a`` and ``v`` (queries first on the left side, last on
    the right), less each query's rank among the queries: JAX's 'sort' method."""
    from .shape_ops import ravel, reshape
    from .ufuncs import subtract

    def rank(x):
        idx = lax.iota(dtype, aval_of(x).shape[0])
        order = lax.sort((x, idx), 0, is_stable=True, num_keys=1)[1]
        return zeros_like(idx).at[order].set(idx)

    q = ravel(v)
    m, n = aval_of(q).shape[0], aval_of(a).shape[0]
    if side == "left":
        index = rank(lax.concatenate([q, a], 0))[:m]
    else:
        index = rank(lax.concatenate([a, q], 0))[n:]
    return reshape(subtract(index, rank(q)), aval_of(v).shape)
