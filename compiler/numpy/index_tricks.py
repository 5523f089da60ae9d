"""Index helpers: ``c_``, ``r_``, ``s_``, ``index_exp``, ``mgrid``, ``ogrid``, ``ix_``,
``indices``, the diag/tril/triu index functions, ``mask_indices``, ``ravel_multi_index``
and ``unravel_index``.

Index sets with static sizes are computed in numpy (they depend only on shapes), then made
jaxprc arrays of the default integer dtype, as in JAX.
"""
from __future__ import annotations

import operator

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import is_symbolic_dim, min_dim

from . import ufuncs as uf
from ._util import aval_of, canonical_axis, convert, located
from .creation import arange, array, as_array, asarray, linspace
from .selection import tril, triu, where
from .shape_ops import concatenate, meshgrid, moveaxis, stack

s_ = np.s_
index_exp = np.index_exp


def _int_array(value):
    return asarray(np.asarray(value).astype(dt.default_int_dtype()))


def _grid_axis(s, name):
    """The 1-D grid a slice describes: arange, or linspace when the step is imaginary (a count)."""
    if not isinstance(s, slice):
        raise IndexError(f"jnp.{name}: only slices are supported, got {s!r}")
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return linspace(start, s.stop, int(abs(step)))
    return arange(start, s.stop, step)


class _Mgrid:
    """``jnp.mgrid[a:b:c, ...]``: a dense stack of coordinate grids."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_axis(key, "mgrid")
        axes = [_grid_axis(k, "mgrid") for k in key]
        if not axes:
            return arange(0)
        from .shape_ops import _promote_all
        return stack(meshgrid(*_promote_all(axes, "mgrid"), indexing="ij"), 0)


class _Ogrid:
    """``jnp.ogrid[a:b:c, ...]``: open (broadcastable) coordinate grids."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_axis(key, "ogrid")
        from .shape_ops import _promote_all
        axes = _promote_all([_grid_axis(k, "ogrid") for k in key], "ogrid")
        return meshgrid(*axes, indexing="ij", sparse=True)


mgrid, ogrid = _Mgrid(), _Ogrid()


class _AxisConcat:
    """numpy's ``r_``/``c_``: slices become ranges, scalars and arrays are concatenated, and a
    leading string ``"axis,ndmin,trans1d"`` (or "r"/"c") says how."""
    axis, ndmin, trans1d = 0, 1, -1

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = directive
            else:
                parts = [int(p) for p in directive.split(",")]
                if len(parts) > 3:
                    raise ValueError(f"jnp.r_/c_: too many parts in the directive {directive!r}")
                axis = parts[0]
                if len(parts) > 1:
                    ndmin = parts[1]
                if len(parts) > 2:
                    trans1d = parts[2]
        arrays = []
        for item in items:
            if isinstance(item, slice):
                out = _grid_axis(item, "r_")
            elif isinstance(item, str):
                raise ValueError("jnp.r_/c_: string directive must be the first argument")
            else:
                out = array(item, copy=False)
            out = _raise_rank(out, ndmin, trans1d)
            arrays.append(out)
        if not arrays:
            return array([])
        from .shape_ops import _promote_all
        result = concatenate(_promote_all(arrays, "r_"), axis=axis)
        if matrix is not None and aval_of(result).ndim == 1:
            result = result[None, :] if matrix == "r" else result[:, None]
        return result

    def __len__(self):
        return 0


def _raise_rank(x, ndmin, trans1d):
    """``x`` with leading unit dimensions up to ``ndmin``; ``trans1d`` (numpy's rule) says
    where its own dimensions go among them."""
    n = aval_of(x).ndim
    if n >= ndmin:
        return x
    x = array(x, ndmin=ndmin, copy=False)
    if trans1d != -1 and n > 0:
        from .shape_ops import transpose
        k2 = ndmin - n
        k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
        axes = list(range(ndmin))
        x = transpose(x, axes[:k1] + axes[k2:] + axes[k1:k2])
    return x


class RClass(_AxisConcat):
    axis, ndmin, trans1d = 0, 1, -1


class CClass(_AxisConcat):
    axis, ndmin, trans1d = -1, 2, 0


r_, c_ = RClass(), CClass()


def ix_(*args):
    """Open-mesh index arrays from 1-D sequences (booleans become their nonzero indices)."""
    out = []
    n = len(args)
    for i, a in enumerate(args):
        a = as_array(a, "ix_")
        if aval_of(a).ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {aval_of(a).shape}")
        if dt.is_bool(aval_of(a).dtype):
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = aval_of(a).shape[0]
        from .shape_ops import reshape
        out.append(reshape(a, tuple(shape)))
    return tuple(out)


def indices(dimensions, dtype=None, sparse=False):
    """Index grids for an array of shape ``dimensions`` (dense stack, or broadcastable if ``sparse``)."""
    dimensions = tuple(operator.index(d) for d in dimensions)
    dtype = dt.default_int_dtype() if dtype is None else dtype
    from jaxprc import lax
    n = len(dimensions)
    grids = []
    for i, d in enumerate(dimensions):
        shape = (1,) * i + (d,) + (1,) * (n - i - 1)
        g = lax.broadcasted_iota(np.dtype(dtype) if not hasattr(dtype, "dtype") else dtype.dtype, shape, i)
        grids.append(g if sparse else lax.broadcast_in_dim(g, dimensions, tuple(range(n))))
    if sparse:
        return tuple(grids)
    return stack(grids, 0) if grids else asarray(np.zeros((0,), dtype))


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an (n, n, ..., n) array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (_int_array(np.arange(n)),) * ndim


def diag_indices_from(arr):
    shape = aval_of(as_array(arr, "diag_indices_from")).shape
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle of an (n, m) array."""
    if any(map(is_symbolic_dim, (n, k, m))):
        m = n if m is None else m
        return _symbolic_triangle_indices(tril, n, k, m, _triu_size(m, n, -k))
    return tuple(map(_int_array, np.tril_indices(operator.index(n), operator.index(k),
                                                 None if m is None else operator.index(m))))


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle of an (n, m) array."""
    if any(map(is_symbolic_dim, (n, k, m))):
        m = n if m is None else m
        return _symbolic_triangle_indices(triu, n, k, m, _triu_size(n, m, k))
    return tuple(map(_int_array, np.triu_indices(operator.index(n), operator.index(k),
                                                 None if m is None else operator.index(m))))


def _symbolic_triangle_indices(triangle, n, k, m, size):
    """With symbolic sizes numpy cannot list the indices: the nonzeros of a triangle of ones,
    whose count ``size`` is an expression in the sizes (as JAX computes them)."""
    from .creation import ones
    from .indexing import nonzero
    return nonzero(triangle(ones((n, m)), k), size=size)


def _triu_size(n, m, k):
    """The number of elements on and above diagonal ``k`` of an (n, m) matrix."""
    if k < 0:
        return n * m - _triu_size(m, n, 1 - k)
    if k >= m:
        return 0
    mk = min_dim(n, m - k)
    return mk * (mk + 1) // 2 + mk * (m - k - mk)


def _from(fn, arr, k):
    shape = tuple(arr.shape) if hasattr(arr, "shape") else aval_of(as_array(arr, fn.__name__ + "_from")).shape
    if len(shape) != 2:
        raise ValueError(f"{fn.__name__}_from: input array must be 2-d, got shape {tuple(shape)}")
    return fn(shape[0], k, shape[1])


def tril_indices_from(arr, k=0):
    return _from(tril_indices, arr, k)


def triu_indices_from(arr, k=0):
    return _from(triu_indices, arr, k)


def mask_indices(n, mask_func, k=0, *, size=None):
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero."""
    from .creation import ones
    from .indexing import nonzero
    return nonzero(mask_func(ones((n, n)), k), size=size)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat indices of the coordinate arrays ``multi_index`` into an array of shape ``dims``."""
    dims = tuple(operator.index(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: parameter multi_index must be a sequence of length {len(dims)}")
    if order not in ("C", "F"):
        raise ValueError("ravel_multi_index: only 'C' or 'F' order is permitted")
    idx = [as_array(i, "ravel_multi_index") for i in multi_index]
    for i in idx:
        if not dt.is_int(aval_of(i).dtype):
            raise TypeError("only int indices permitted")
    if mode == "raise":
        from .statistics import concrete
        for i, d in zip(idx, dims):
            v = concrete(i, "ravel_multi_index with mode='raise' (use mode='wrap' or mode='clip' under jit)")
            if np.any((v < 0) | (v >= d)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        idx = [uf.minimum(uf.maximum(i, 0), d - 1) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [uf.mod(i, d) for i, d in zip(idx, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
    strides = np.cumprod((1,) + dims[:-1]) if order == "F" else np.cumprod((1,) + dims[::-1][:-1])[::-1]
    out = convert(0, dt.default_int_dtype())
    for i, s in zip(idx, strides):
        out = uf.add(out, uf.multiply(convert(i, dt.default_int_dtype()), int(s)))
    return asarray(out)


def unravel_index(indices, shape):
    """Coordinate arrays of the flat ``indices`` in an array of ``shape``; out-of-range
    indices are clamped, as in JAX. As JAX's, plain ``divmod`` arithmetic: the indices may be
    of any real dtype and the sizes may be (traced) scalars."""
    idx = as_array(indices, "unravel_index")
    shape = list(shape) if np.ndim(shape) else [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out = [None] * len(shape)
    rest = idx
    for i in reversed(range(len(shape))):
        rest, out[i] = uf.divmod(rest, shape[i])
    high = uf.greater(rest, 0)
    low = uf.less(rest, -1) if not dt.is_unsigned(aval_of(idx).dtype) else False
    return tuple(where(high, uf.subtract(s, 1), where(low, 0, o)) for s, o in zip(shape, out))
