"""Set operations: unique (and unique_all/counts/inverse/values), isin, union1d,
intersect1d, setdiff1d, setxor1d.

One mechanism gives every data-dependent result a static shape: ``compact`` moves the
selected elements of an array to the front of an array of ``size`` entries (a cumulative
sum gives each one its slot, a dropping scatter puts it there) and fills the rest. With
``size=None`` the size is the concrete number of selected elements, so these functions
work eagerly and raise JAX's concretization error under ``jit`` unless ``size`` is given.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import ufuncs as uf
from ._util import aval_of, convert, located
from .creation import arange, as_array, full, zeros
from .reductions import all, any, cumsum, sum
from .selection import where
from .shape_ops import _promote_all, concatenate, moveaxis, ravel, reshape
from .statistics import concrete

_SIZE_HINT = ("To make jnp.{fn}() compatible with JIT and other transforms, you can specify a concrete "
              "value for the size argument, which will determine the output size.")


def static_size(keep, size, fn: str) -> int:
    """``size``, or the concrete number of selected elements when it is None."""
    if size is not None:
        return operator.index(size)
    return int(np.count_nonzero(concrete(keep, f"jnp.{fn}() (the result's size depends on the data). "
                                              + _SIZE_HINT.format(fn=fn))))


def compact(values, keep, size: int, fill=None):
    """The elements of ``values`` (along axis 0) where ``keep`` holds, in order, in ``size``
    slots; the remaining slots hold ``fill`` (default: the first kept element, or 0 if none)."""
    n = aval_of(keep).shape[0]
    va = aval_of(values)
    if n == 0 or size == 0:
        return full((size,) + va.shape[1:], 0 if fill is None else fill, va.dtype)
    slot = where(keep, uf.subtract(cumsum(keep, dtype=dt.default_int_dtype()), 1), n + size)
    out = zeros((size,) + va.shape[1:], va.dtype).at[slot].set(values, mode="drop")
    count = sum(keep, dtype=dt.default_int_dtype())
    valid = uf.less(arange(size), count)
    valid = reshape(valid, (size,) + (1,) * (va.ndim - 1))
    if fill is None:
        if size == 0:
            return out
        fill = where(uf.greater(count, 0), out[0], convert(0, va.dtype))
    return where(valid, out, convert(as_array(fill, "fill_value"), va.dtype))


def nonzero_sized(mask, size: int, fill_value=None):
    """``nonzero`` of a possibly traced mask with a static ``size`` (padding with ``fill_value``,
    default 0; one value per dimension or a tuple of them)."""
    mask = uf.not_equal(as_array(mask, "nonzero"), False)
    shape = aval_of(mask).shape
    flat = ravel(mask)
    idx = compact(arange(aval_of(flat).shape[0]), flat, size, 0)
    count = sum(flat, dtype=dt.default_int_dtype())
    fills = fill_value if isinstance(fill_value, (tuple, list)) else (fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"nonzero: fill_value must be a scalar or a tuple of length {len(shape)}")
    out, rest = [], idx
    for d in reversed(range(len(shape))):
        out.append(lax.rem(rest, convert(shape[d], dt.default_int_dtype())) if shape[d] else rest)
        rest = uf.floor_divide(rest, max(shape[d], 1))
    valid = uf.less(arange(size), count)
    return tuple(where(valid, o, convert(0 if f is None else f, dt.default_int_dtype()))
                 for o, f in zip(reversed(out), fills))


# ------------------------------------------------------------------ unique

def _sorted_with_runs(x, equal_nan: bool):
    """``x`` (rows along axis 0) sorted lexicographically, the permutation, and the mask of the
    first row of each run of equal rows."""
    n = aval_of(x).shape[0]
    width = int(np.prod(aval_of(x).shape[1:], dtype=np.int64))
    rows = reshape(x, (n, width))
    iota = arange(n)
    if dt.is_complex(aval_of(rows).dtype):     # NaN anywhere in a complex number: one canonical NaN
        rows = where(uf.isnan(rows), convert(complex(np.nan, 0), aval_of(rows).dtype), rows)
    if n == 0 or width == 0:
        return x, iota, uf.equal(iota, 0)
    keys = [rows[:, j] for j in range(width)]
    *keys, perm = lax.sort((*keys, iota), 0, num_keys=width)
    srt = rows[perm]
    diff = uf.not_equal(srt[1:], srt[:-1])
    if equal_nan and dt.is_inexact(aval_of(srt).dtype):
        diff = uf.logical_and(diff, uf.logical_not(uf.logical_and(uf.isnan(srt[1:]), uf.isnan(srt[:-1]))))
    first = concatenate([full((1,), True, dt.bool_), any(diff, axis=1)])
    return x[perm], perm, first


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class _UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique(ar, axis: int, size, fill_value, equal_nan, fn="unique"):
    """(values, first indices, inverse, counts, number of unique values) along ``axis``."""
    ar = moveaxis(ar, axis, 0)
    n = aval_of(ar).shape[0]
    if n == 0 and size and fill_value is None:
        raise ValueError(f"jnp.{fn}: for zero-sized input with nonzero size argument, fill_value must be specified")
    srt, perm, first = _sorted_with_runs(ar, equal_nan)
    size = static_size(first, size, fn)
    values = compact(srt, first, size, fill_value)
    index = compact(perm, first, size)
    run = uf.subtract(cumsum(first, dtype=dt.default_int_dtype()), 1)
    inverse = zeros(n, dt.default_int_dtype()).at[perm].set(run)
    counts = zeros(size, dt.default_int_dtype()).at[run].add(1, mode="drop")
    return moveaxis(values, 0, axis), index, inverse, counts, sum(first, dtype=dt.default_int_dtype())


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique elements (rows along ``axis``); optionally the first index of each,
    the inverse indices and the counts. ``size`` pads the result (with ``fill_value``,
    default the smallest unique value) to a static length."""
    ar = as_array(ar, "unique")
    shape = aval_of(ar).shape
    if axis is None:
        flat, ax = ravel(ar), 0
    else:
        from ._util import canonical_axis
        flat, ax = ar, canonical_axis(axis, len(shape), "unique")
    values, index, inverse, counts, _ = _unique(flat, ax, size, fill_value, equal_nan)
    if axis is None:
        inverse = reshape(inverse, shape)
    out = (values,) + ((index,) if return_index else ()) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def unique_all(x, /, *, size=None, fill_value=None):
    values, index, inverse, counts = unique(x, True, True, True, equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueAllResult(values, index, inverse, counts)


def unique_counts(x, /, *, size=None, fill_value=None):
    values, counts = unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueInverseResult(values, inverse)


def unique_values(x, /, *, size=None, fill_value=None):
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


# ------------------------------------------------------------------ membership and set algebra

def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Whether each element of ``element`` occurs in ``test_elements`` (shape of ``element``)."""
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"{located('isin')}: method={method!r} is not implemented; options are "
                         "'compare_all', 'binary_search', 'sort', and 'auto'")
    a, b = _promote_all([element, test_elements], "isin")
    shape = aval_of(as_array(element, "isin")).shape
    a, b = ravel(a), ravel(b)
    if aval_of(a).size == 0 or aval_of(b).size == 0:
        return full(shape, bool(invert), dt.bool_)
    eq = uf.equal(a[:, None], b[None, :])
    found = any(eq, axis=-1)
    return reshape(uf.logical_not(found) if invert else found, shape)


def _flat_pair(fn, ar1, ar2):
    a, b = _promote_all([ar1, ar2], fn)
    return ravel(a), ravel(b)


def _uniques(x, assume_unique, fn):
    """Unique values of 1-D ``x`` padded to its length, their first indices and validity."""
    n = aval_of(x).shape[0]
    if assume_unique:
        return x, arange(n), full((n,), True, dt.bool_)
    values, index, _, _, count = _unique(x, 0, n, 0 if n == 0 else None, True, fn)
    return values, index, uf.less(arange(n), count)


def _sorted_pool(a, b, assume_unique, fn):
    """The unique values of a and b pooled and sorted (invalid padding last): values, source
    positions in the pool, validity, and the unique parts."""
    va, ia, ka = _uniques(a, assume_unique, fn)
    vb, ib, kb = _uniques(b, assume_unique, fn)
    pool = concatenate([va, vb])
    valid = concatenate([ka, kb])
    src = arange(aval_of(pool).shape[0])
    invalid, pool, src = lax.sort((uf.logical_not(valid), pool, src), 0, num_keys=2)
    return pool, src, uf.logical_not(invalid), (ia, ib)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """Sorted unique values found in either array."""
    a, b = as_array(ar1, "union1d"), as_array(ar2, "union1d")
    return unique(concatenate([ravel(a), ravel(b)]), size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values of ``ar1`` not in ``ar2`` (``fill_value`` default 0)."""
    a, b = _flat_pair("setdiff1d", ar1, ar2)
    values, _, valid = _uniques(a, assume_unique, "setdiff1d")
    keep = uf.logical_and(valid, isin(values, b, invert=True))
    return compact(values, keep, static_size(keep, size, "setdiff1d"), 0 if fill_value is None else fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values in exactly one of the arrays."""
    a, b = _flat_pair("setxor1d", ar1, ar2)
    pool, _, valid, _ = _sorted_pool(a, b, assume_unique, "setxor1d")
    n = aval_of(pool).shape[0]
    if n == 0:
        return compact(pool, valid, static_size(valid, size, "setxor1d"), fill_value)
    same = uf.equal(pool[1:], pool[:-1])
    false = full((1,), False, dt.bool_)
    keep = uf.logical_and(valid, uf.logical_not(uf.logical_or(concatenate([false, same]),
                                                               concatenate([same, false]))))
    return compact(pool, keep, static_size(keep, size, "setxor1d"), fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """Sorted unique values in both arrays; with ``return_indices`` also the index of each in
    ``ar1`` and ``ar2`` (first occurrences)."""
    a, b = _flat_pair("intersect1d", ar1, ar2)
    na = aval_of(a).shape[0]
    pool, src, valid, (ia, ib) = _sorted_pool(a, b, assume_unique, "intersect1d")
    if aval_of(pool).shape[0] < 2:
        keep = zeros(max(aval_of(pool).shape[0] - 1, 0), dt.bool_)
        pool, src = pool[:0], src[:0]
        nxt = src
    else:
        keep = uf.logical_and(uf.equal(pool[1:], pool[:-1]), valid[1:])
        pool, nxt, src = pool[:-1], src[1:], src[:-1]
    size = static_size(keep, size, "intersect1d")
    values = compact(pool, keep, size, fill_value)
    if not return_indices:
        return values
    count = sum(keep, dtype=dt.default_int_dtype())
    valid_out = uf.less(arange(size), count)
    i1 = compact(src, keep, size, 0)
    i2 = uf.subtract(compact(nxt, keep, size, na), na)
    i1 = where(valid_out, ia.at[i1].get(mode="fill", fill_value=na), na)
    i2 = where(valid_out, ib.at[i2].get(mode="fill", fill_value=aval_of(b).shape[0]), aval_of(b).shape[0])
    return values, i1, i2
