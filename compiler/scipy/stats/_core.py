"""Sample statistics: mode, rankdata, sem."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import numpy as jnp
from ...ir import dtypes as dt
from ...numpy._util import canonical_axis, located
from ...transformations.vmap import vmap
from ._util import promote_inexact

_NAN_POLICIES = ("propagate", "omit", "raise")


def _check_nan_policy(fn, nan_policy):
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of {set(_NAN_POLICIES)}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(f"In order to best JIT compile `{fn}`, we cannot know whether `x` "
                                  f"contains nans. Please check if nans exist in `x` outside of the "
                                  f"`{fn}` function.")


class ModeResult(NamedTuple):
    mode: object
    count: object


def _mode_1d(x):
    """The most frequent value (the smallest of the most frequent) and its count, by sorting."""
    s = jnp.sort(x)
    counts = jnp.searchsorted(s, s, side="right") - jnp.searchsorted(s, s, side="left")
    i = jnp.argmax(counts)
    return s[i], counts[i]


def mode(a, axis=0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The modal value along ``axis`` (all elements when None) and how often it occurs."""
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    shape = x.shape
    if axis is not None:
        axis = canonical_axis(axis, x.ndim, "mode")
    if axis is None:
        out_shape = tuple(1 for _ in shape) if keepdims else ()
        x, axis = jnp.ravel(x), 0
    else:
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape)) if keepdims else \
            tuple(s for i, s in enumerate(shape) if i != axis)
    x = jnp.moveaxis(x, axis, 0)
    x = jnp.reshape(x, (x.shape[0], int(np.prod(x.shape[1:]))))
    if x.shape[0] == 0:
        fill = dt.default_float_dtype()
        values = jnp.full((x.shape[1],), np.nan, fill)
        counts = jnp.zeros((x.shape[1],), fill)
    else:
        values, counts = vmap(_mode_1d, in_axes=1)(x)
    return ModeResult(jnp.reshape(values, out_shape), jnp.reshape(counts, out_shape))


def _rank_1d(a, method):
    dtype = dt.default_float_dtype()
    order = jnp.argsort(a, stable=True)
    s = a[order]
    if method == "ordinal":
        ranks = jnp.zeros(a.shape, jnp.int32).at[order].set(jnp.arange(a.shape[0], dtype=jnp.int32))
        return (ranks + 1).astype(dtype)
    lowest = jnp.searchsorted(s, a, side="left")     # elements below a_i
    highest = jnp.searchsorted(s, a, side="right")   # elements at or below a_i
    if method == "min":
        out = lowest + 1
    elif method == "max":
        out = highest
    elif method == "average":
        out = 0.5 * (lowest + 1 + highest)
    else:   # dense: distinct values below a_i, plus one
        first = jnp.concatenate([jnp.array([True]), s[1:] != s[:-1]])
        out = jnp.cumsum(first)[jnp.searchsorted(s, a, side="left")]
    out = jnp.asarray(out, dtype)
    return jnp.where(jnp.any(jnp.isnan(a)), jnp.full_like(out, np.nan), out)


def rankdata(a, method: str = "average", *, axis=None, nan_policy: str = "propagate"):
    """Ranks from 1, ties resolved by ``method`` (average, min, max, dense, ordinal); NaN in the
    data makes every rank NaN."""
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    a = jnp.asarray(a)
    if axis is None:
        return _rank_1d(jnp.ravel(a), method)
    axis = canonical_axis(axis, a.ndim, "rankdata")
    moved = jnp.moveaxis(a, axis, -1)
    flat = jnp.reshape(moved, (-1, moved.shape[-1]))
    ranks = vmap(lambda row: _rank_1d(row, method))(flat)
    return jnp.moveaxis(jnp.reshape(ranks, moved.shape), -1, axis)


def sem(a, axis=0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False):
    """The standard error of the mean, std(ddof) / sqrt(n); ``omit`` leaves NaNs out."""
    b = promote_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return jnp.std(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(jnp.asarray(size, b.dtype))
    if nan_policy == "omit":
        valid = ~jnp.isnan(b)
        count = jnp.sum(valid, axis, keepdims=True)
        mean = jnp.sum(jnp.where(valid, b, 0), axis, keepdims=True) / count
        var = jnp.sum(jnp.where(valid, jnp.square(b - mean), 0), axis, keepdims=True) / (count - ddof)
        out = jnp.sqrt(var) / jnp.sqrt(count.astype(b.dtype))
        return out if keepdims else jnp.squeeze(out, axis)
    raise ValueError(f"{located('sem')}: {nan_policy} is not supported")
