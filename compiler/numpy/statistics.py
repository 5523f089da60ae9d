"""Order statistics and data summaries: quantile/percentile/median (and their NaN-skipping
forms), the remaining nan-reductions, average, cov, corrcoef, histograms, bincount, digitize.

Quantiles sort the reduced axes (moved last and flattened) and gather the two neighbours of
the fractional position; gradients flow through the sort and the gather, as in JAX.
Data-dependent output sizes (bincount without ``length``) need concrete inputs, as in JAX.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import ConcretizationTypeError

from . import ufuncs as uf
from ._util import aval_of, broadcast_to_shape, canonical_axes, canonical_axis, convert, located, promote
from ._dtypes import to_dtype
from .creation import as_array, asarray, full, linspace, zeros
from .indexing import take_along_axis
from .reductions import (_keepdims, all, any, argmax, argmin, cumprod, cumsum, max, mean, min, std, sum,
                         var)
from .selection import where
from .selection import where as where_
from .shape_ops import diff, expand_dims, moveaxis, ravel, reshape, transpose


def concrete(x, what: str):
    """``x`` as a numpy value, or JAX's concretization error naming ``what`` needs it."""
    try:
        return np.asarray(x)
    except ConcretizationTypeError as e:
        raise ConcretizationTypeError(f"{what} needs a concrete value, but got a traced array "
                                      f"({e}). Pass the static size argument instead.") from None


def _inexact(fn, *args):
    out, dtype, _ = promote(fn, *(as_array(a, fn) for a in args), to_inexact=True)
    if dt.is_complex(dtype):
        raise ValueError(f"{located(fn)} does not support complex input, as the operation is poorly defined.")
    return out, dtype


def _reduced_last(a, axis, fn):
    """``a`` with the axes ``axis`` reduces moved last and flattened into one: ``(a, kept_axes)``."""
    shape = aval_of(a).shape
    axes = canonical_axes(axis, len(shape), fn)
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    a = transpose(a, kept + axes)
    return reshape(a, tuple(shape[i] for i in kept) + (math.prod(shape[i] for i in axes),)), axes


_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile(fn, a, q, axis, method, keepdims, squash_nans, weights=None):
    if method not in _METHODS:
        raise ValueError(f"{located(fn)}: method can only be one of {', '.join(map(repr, _METHODS))}; got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{fn}: {method} doesn't support weights. Only method 'inverted_cdf' "
                                  "supports weights.")
    if method == "inverted_cdf" and weights is None:
        weights = full(aval_of(as_array(a, fn)).shape, 1, aval_of(as_array(a, fn)).dtype)
    if weights is not None:
        (a, weights), dtype = _inexact(fn, a, weights)
    else:
        (a,), dtype = _inexact(fn, a)
    q = as_array(q, fn)
    qa = aval_of(q)
    if qa.ndim > 1:
        raise ValueError(f"{located(fn)}: q must have rank <= 1, got shape {qa.shape}")
    if not dt.is_inexact(qa.dtype):
        # q's own dtype carries the interpolation (JAX's floor of it rejects integers).
        raise TypeError(f"{located(fn)}: q must be a floating-point array, got {qa.dtype.name}")
    qdtype = qa.dtype
    shape = aval_of(a).shape
    a, axes = _reduced_last(a, axis, fn)
    if aval_of(a).shape[-1] == 0 and (0 not in qa.shape[:1] if not squash_nans else
                                      int(np.prod(qa.shape + aval_of(a).shape[:-1])) > 0):
        # No values to interpolate between: JAX's gather fails here (TypeError; IndexError for
        # the NaN-ignoring variants, which skip it when there is nothing to compute).
        raise (IndexError if squash_nans else TypeError)(
            f"{located(fn)}: cannot take a quantile over an empty axis (the reduced size is 0)")
    if weights is not None:
        wshape = aval_of(weights).shape
        if wshape != shape:
            if axis is None or wshape != tuple(shape[i] for i in axes):
                raise ValueError(f"{fn}: weights shape {wshape} must match the shape of a or of the "
                                 "reduction axes")
            weights = lax.broadcast_in_dim(weights, shape, axes)
        weights = _reduced_last(weights, axis, fn)[0]
    nan = uf.isnan(a)
    nan_row = any(nan, axis=-1, keepdims=True)
    # NaN sorts last only when positive: normalise the sign first.
    a = where(nan_row if not squash_nans else nan, convert(np.nan, dtype), a)
    if weights is not None:
        a, weights = lax.sort((a, weights), aval_of(a).ndim - 1, num_keys=1)
    else:
        a = lax.sort(a, aval_of(a).ndim - 1)
    n = aval_of(a).shape[-1]
    rest = aval_of(a).shape[:-1]
    q_shape = aval_of(q).shape
    out_shape = q_shape + rest
    qb = broadcast_to_shape(reshape(q, q_shape + (1,) * len(rest)), out_shape)
    ab = broadcast_to_shape(a, q_shape + aval_of(a).shape)
    count = (sum(uf.logical_not(uf.isnan(a)), axis=-1, dtype=qdtype) if squash_nans
             else convert(n, qdtype))

    def at(i):
        return lax.squeeze(take_along_axis(ab, expand_dims(i, -1), axis=-1), (len(out_shape),))

    if method == "inverted_cdf":
        bad_weight = uf.logical_or(uf.less(weights, 0), uf.isnan(weights))
        w = where(uf.logical_or(bad_weight, uf.isnan(a)), convert(0, dtype), weights)
        cw = cumsum(w, axis=-1)
        target = uf.multiply(qb, convert(cw[..., -1], qdtype))
        below = uf.less(broadcast_to_shape(cw, q_shape + aval_of(cw).shape), expand_dims(target, -1))
        idx = sum(below, axis=-1, dtype=dt.default_int_dtype())
        last = convert(uf.subtract(broadcast_to_shape(count, out_shape), 1), dt.default_int_dtype())
        idx = uf.maximum(0, uf.minimum(idx, last))
        result = at(idx)
        bad = any(bad_weight, axis=-1)
        bad = uf.logical_or(bad, uf.equal(count, 0) if squash_nans else nan_row[..., 0])
        result = where(broadcast_to_shape(bad, out_shape), convert(np.nan, dtype), result)
    else:
        pos = uf.multiply(qb, uf.subtract(count, convert(1, qdtype)))
        low, high = uf.floor(pos), uf.ceil(pos)
        high_w = uf.subtract(pos, low)
        low_w = uf.subtract(convert(1, qdtype), high_w)
        hi_bound = uf.subtract(count, convert(1, qdtype))
        low = convert(uf.maximum(convert(0, qdtype), uf.minimum(low, hi_bound)), dt.default_int_dtype())
        high = convert(uf.maximum(convert(0, qdtype), uf.minimum(high, hi_bound)), dt.default_int_dtype())
        lo, hi = at(low), at(high)
        if method == "linear":
            result = uf.add(uf.multiply(convert(lo, qdtype), low_w), uf.multiply(convert(hi, qdtype), high_w))
        elif method == "lower":
            result = lo
        elif method == "higher":
            result = hi
        elif method == "nearest":
            result = where(uf.less_equal(high_w, 0.5), lo, hi)
        else:
            result = uf.multiply(uf.add(lo, hi), convert(0.5, dtype))
    if keepdims:
        # as JAX: a 0-d input keeps one (flattened) dimension
        kept = tuple(1 if i in axes else d for i, d in enumerate(shape)) if shape else (1,)
        result = reshape(result, q_shape + kept)
    return convert(result, dtype)


def _no_overwrite(fn, out, overwrite_input):
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{fn} does not support overwrite_input=True or out != None")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None, interpolation=None):
    """The ``q``-th quantiles (0 <= q <= 1) along ``axis``; NaN where a reduced slice holds NaN."""
    _no_overwrite("quantile", out, overwrite_input)
    return _quantile("quantile", a, q, axis, interpolation or method, keepdims, False, weights)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                weights=None, interpolation=None):
    """``quantile`` ignoring NaN values."""
    _no_overwrite("nanquantile", out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, interpolation or method, keepdims, True, weights)


def _percent(fn, q):
    q = as_array(q, fn)
    return uf.true_divide(q, 100.0)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None, interpolation=None):
    """The ``q``-th percentiles (0 <= q <= 100) along ``axis``."""
    _no_overwrite("percentile", out, overwrite_input)
    return _quantile("percentile", a, _percent("percentile", q), axis, interpolation or method, keepdims, False,
                     weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None, interpolation=None):
    """``percentile`` ignoring NaN values."""
    _no_overwrite("nanpercentile", out, overwrite_input)
    return _quantile("nanpercentile", a, _percent("nanpercentile", q), axis, interpolation or method, keepdims,
                     True, weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median along ``axis`` (the mean of the two middle values for an even count)."""
    _no_overwrite("median", out, overwrite_input)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``median`` ignoring NaN values."""
    _no_overwrite("nanmedian", out, overwrite_input)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


# ------------------------------------------------------------------ nan-reductions

def _nan_masked(a, fn):
    a = as_array(a, fn)
    return a, dt.is_inexact(aval_of(a).dtype)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Variance of the non-NaN elements (NaN when fewer than ``ddof`` + 1 remain)."""
    from .reductions import _check_where_and_initial, _no_out, _variance
    _no_out("nanvar", out)
    _check_where_and_initial("nanvar", where)
    if correction is not None:
        ddof = correction
    a, inexact = _nan_masked(a, "nanvar")
    if inexact:
        nan = uf.isnan(a)
        keep = uf.logical_not(nan)
        where = keep if where is None else uf.logical_and(where, keep)
        a = where_(nan, convert(0, aval_of(a).dtype), a)     # masked out anyway; keeps NaN out of gradients
    return _variance("nanvar", a, axis, dtype, ddof, keepdims, where, nan_after_cast=False)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Standard deviation of the non-NaN elements."""
    result = nanvar(a, axis, dtype, out, ddof, keepdims, where, correction)
    if not dt.is_inexact(aval_of(result).dtype):
        # JAX takes lax.sqrt of the integer variance an integer dtype gives
        raise TypeError(f"sqrt does not accept dtype {np.dtype(aval_of(result).dtype)}. Accepted dtypes are "
                        "subtypes of floating, complexfloating.")
    return uf.sqrt(result)


def _nan_arg(fn, arg, fill):
    def f(a, axis=None, out=None, keepdims=None):
        a, inexact = _nan_masked(a, fn)
        if not inexact:
            return arg(a, axis, out, keepdims)
        nan = uf.isnan(a)
        found = arg(where(nan, convert(fill, aval_of(a).dtype), a), axis, out, keepdims)
        # All-NaN slices give -1, as in JAX.
        return where(all(nan, axis, keepdims=bool(keepdims)), -1, found)
    f.__name__ = f.__qualname__ = fn
    f.__doc__ = f"``{fn[3:]}`` ignoring NaN values; -1 for an all-NaN slice."
    return f


nanargmax = _nan_arg("nanargmax", argmax, -np.inf)
nanargmin = _nan_arg("nanargmin", argmin, np.inf)


def _nan_cumulative(fn, cumulative, identity):
    def f(a, axis=None, dtype=None, out=None):
        a, inexact = _nan_masked(a, fn)
        if inexact:
            a = where(uf.isnan(a), convert(identity, aval_of(a).dtype), a)
        return cumulative(a, axis, dtype, out)
    f.__name__ = f.__qualname__ = fn
    f.__doc__ = f"``{fn[3:]}`` treating NaN values as {identity}."
    return f


nancumsum = _nan_cumulative("nancumsum", cumsum, 0)
nancumprod = _nan_cumulative("nancumprod", cumprod, 1)


# ------------------------------------------------------------------ averages, covariance

def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted mean along ``axis``; with ``returned`` also the sum of the weights."""
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        size = aval_of(as_array(a, "average")).size if axis is None else math.prod(
            aval_of(a).shape[i] for i in canonical_axes(axis, aval_of(a).ndim, "average"))
        weights_sum = full((), size, aval_of(avg).dtype)
    else:
        (a, weights), _, _ = promote("average", as_array(a, "average"), as_array(weights, "average"),
                                     to_inexact=True, broadcast=False)
        ashape, wshape = aval_of(a).shape, aval_of(weights).shape
        if ashape != wshape:
            if axis is None:
                raise ValueError("average: axis must be specified when shapes of a and weights differ.")
            axes = canonical_axes(axis, len(ashape), "average")
            if wshape != tuple(ashape[i] for i in axes):
                raise ValueError(f"average: shape of weights {wshape} must be consistent with the shape "
                                 f"of a {ashape} along axis {axis}")
            weights = lax.broadcast_in_dim(weights, ashape, axes)
        weights_sum = sum(weights, axis=axis, keepdims=keepdims)
        avg = uf.divide(sum(uf.multiply(a, weights), axis=axis, keepdims=keepdims), weights_sum)
    if returned:
        if aval_of(weights_sum).shape != aval_of(avg).shape:
            weights_sum = broadcast_to_shape(weights_sum, aval_of(avg).shape)
        return avg, weights_sum
    return avg


def _promote_inexact(fn, *args):
    out, dtype, _ = promote(fn, *(as_array(x, fn) for x in args), to_inexact=True)
    return out, dtype


def _cov_weights(w, name, n):
    w = as_array(w, "cov")
    if aval_of(w).ndim > 1:
        raise RuntimeError(f"cov: cannot handle multidimensional {name}")
    if aval_of(w).shape[0] != n:
        raise RuntimeError(f"cov: incompatible numbers of samples and {name}")
    return w


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    """Covariance matrix of the variables (rows if ``rowvar``) of ``m`` (and ``y``)."""
    from .shape_ops import atleast_2d, concatenate, squeeze
    from .products import dot
    if y is not None:
        from .convolve import promote_no_broadcast
        m, y = promote_no_broadcast("cov", m, y)
        if aval_of(y).ndim > 2:
            raise ValueError("cov: y has more than 2 dimensions")
    else:
        (m,), _ = _promote_inexact("cov", m)
    if aval_of(m).ndim > 2:
        raise ValueError("cov: m has more than 2 dimensions")
    dtype = None if dtype is None else dt.canonicalize_dtype(to_dtype(dtype))
    if dtype is not None and not dt.is_inexact(dtype):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype}")
    X = atleast_2d(m)
    if not rowvar and aval_of(m).ndim != 1:
        X = transpose(X)
    if aval_of(X).shape[0] == 0:
        return zeros((0, 0), dt.default_float_dtype())   # JAX's (and numpy's) empty result
    if y is not None:
        Y = atleast_2d(y)
        if not rowvar and aval_of(Y).shape[0] != 1:
            Y = transpose(Y)
        X = concatenate([X, Y], axis=0)
    nvars, n = aval_of(X).shape
    if n == 0:
        # No observations: the mean is undefined, so every covariance is NaN (as in JAX).
        return full(() if nvars == 1 else (nvars, nvars), np.nan, aval_of(X).dtype)
    if ddof is None:
        ddof = 1 if not bias else 0
    w = None
    if fweights is not None:
        fw = _cov_weights(fweights, "fweights", n)
        if not dt.is_int(aval_of(fw).dtype):
            raise TypeError("cov: fweights must be integer.")
        w = uf.abs(fw)          # numpy rejects negative weights; JAX (traced) takes their size
    if aweights is not None:
        aw = uf.abs(_cov_weights(aweights, "aweights", n))
        w = aw if w is None else uf.multiply(w, aw)
    if dtype is not None:
        X = convert(X, dtype)
        w = None if w is None else convert(w, dtype)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = n - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = uf.subtract(w_sum, ddof)
    else:
        f = uf.subtract(w_sum, uf.divide(uf.multiply(ddof, sum(uf.multiply(w, aw))), w_sum))
    X = uf.subtract(X, avg[:, None])
    X_T = transpose(X) if w is None else transpose(uf.multiply(X, w))
    return squeeze(uf.true_divide(dot(X, uf.conj(X_T)), f))


def corrcoef(x, y=None, rowvar=True):
    """Pearson correlation coefficients (real parts clipped to [-1, 1])."""
    from .selection import clip, diag
    c = cov(x, y, rowvar)
    if aval_of(c).ndim == 0:
        return uf.divide(c, c)
    d = diag(c)
    stddev = uf.sqrt(uf.real(d))
    c = uf.divide(c, stddev[:, None])
    c = uf.divide(c, stddev[None, :])
    real = clip(uf.real(c), -1, 1)
    if dt.is_complex(aval_of(c).dtype):
        return lax.complex(real, clip(uf.imag(c), -1, 1))
    return real


# ------------------------------------------------------------------ histograms

def digitize(x, bins, right=False, *, method=None):
    """The index of the bin each value falls in (increasing or decreasing ``bins``)."""
    from .selection import searchsorted
    x, bins = as_array(x, "digitize"), as_array(bins, "digitize")
    b = aval_of(bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got shape {b.shape}")
    if b.shape[0] == 0:
        return zeros(aval_of(x).shape, dt.int32)
    side = "left" if right else "right"
    up = searchsorted(bins, x, side=side)
    down = uf.subtract(b.shape[0], searchsorted(lax.rev(bins, (0,)), x, side=side))
    return where(uf.greater_equal(bins[-1], bins[0]), up, down)


def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed ``weights``) of each non-negative integer in 1-D ``x``; negative
    values count in bin 0 and values beyond ``length`` are dropped, as in JAX."""
    x = as_array(x, "bincount")
    xa = aval_of(x)
    if dt.is_bool(xa.dtype):
        x = convert(x, dt.int32)
    elif not dt.is_int(xa.dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got {xa.dtype}")
    if xa.ndim != 1:
        raise ValueError("bincount: only 1-dimensional input supported.")
    minlength = operator.index(minlength)
    if length is None:
        value = concrete(x, "jnp.bincount without a static `length` argument")
        length = builtins.max(minlength, int(value.max()) + 1 if value.size else 0)
    else:
        length = operator.index(length)
    if weights is None:
        weights, wdtype = 1, dt.default_int_dtype()
    else:
        weights = as_array(weights, "bincount")
        if aval_of(weights).shape != xa.shape:
            raise ValueError(f"bincount: weights shape {aval_of(weights).shape} must match x's {xa.shape}")
        wdtype = aval_of(weights).dtype
    return zeros(length, wdtype).at[uf.maximum(x, 0)].add(weights, mode="drop")


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges ``histogram`` would use: ``bins`` itself if it is an array, else equal bins
    over ``range`` (default: the data's min and max)."""
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    a = as_array(a, "histogram_bin_edges")
    dtype = aval_of(a).dtype
    dtype = dt.to_inexact_dtype(dtype)
    if np.ndim(bins) == 1:
        return asarray(bins, dtype=dtype)
    nbins = operator.index(concrete(bins, "bins argument of histogram_bin_edges").item()
                           if not isinstance(bins, int) else bins)
    lo, hi = (min(a), max(a)) if range is None else range
    lo, hi = convert(as_array(lo, "histogram"), dtype), convert(as_array(hi, "histogram"), dtype)
    same = uf.equal(lo, hi)
    lo, hi = where(same, uf.subtract(lo, 0.5), lo), where(same, uf.add(hi, 0.5), hi)
    return linspace(lo, hi, nbins + 1, dtype=dtype)


def _bin_index(a, edges):
    """The histogram bin of each value, 1-based (0: below, len(edges): above; the last edge
    belongs to the last bin)."""
    from .selection import searchsorted
    n = aval_of(edges).shape[0]
    idx = searchsorted(edges, a, side="right")
    return where(uf.equal(a, edges[-1]), n - 1, idx)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or summed ``weights``) of ``a`` in each bin, and the bin edges."""
    if weights is None:
        (a,), _ = _promote_inexact("histogram", a)
        weights = full(aval_of(a).shape, 1, aval_of(a).dtype)
    else:
        if aval_of(as_array(a, "histogram")).shape != aval_of(as_array(weights, "histogram")).shape:
            raise ValueError("histogram: weights should have the same shape as a.")
        (a, weights), _ = _promote_inexact("histogram", a, weights)
    edges = histogram_bin_edges(a, bins, range, weights)
    n = aval_of(edges).shape[0]
    counts = zeros(n, aval_of(weights).dtype).at[_bin_index(a, edges)].add(weights, mode="drop")[1:]
    if density:
        counts = uf.divide(uf.divide(counts, diff(edges)), sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of N points ``sample`` (shape (N, D)), and the edges per dimension."""
    from .shape_ops import meshgrid
    if weights is None:
        (sample,), _ = _promote_inexact("histogramdd", sample)
    else:
        if aval_of(as_array(weights, "histogramdd")).shape != aval_of(as_array(sample, "histogramdd")).shape[:1]:
            raise ValueError("histogramdd: should have one weight for each sample.")
        # one weight per point: a column, so promotion broadcasts it against the (N, D) sample
        (sample, weights), _ = _promote_inexact("histogramdd", sample, reshape(weights, (-1, 1)))
        weights = weights[:, 0]
    N, D = aval_of(sample).shape
    if range is not None and (len(range) != D or builtins.any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(N, D)}, range must be a sequence of {D} pairs or Nones; got {range}")
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = D * [bins]
    else:
        if len(per_dim) != D:
            raise ValueError("histogramdd: should be a bin for each dimension.")
    edges_by_dim, index_by_dim = [], []
    for i in builtins.range(D):
        r = range[i] if range is not None else None
        edges = histogram_bin_edges(sample[:, i], per_dim[i], r, weights)
        index_by_dim.append(_bin_index(sample[:, i], edges))
        edges_by_dim.append(edges)
    nbins = tuple(aval_of(e).shape[0] + 1 for e in edges_by_dim)
    flat = index_by_dim[0]
    for i in builtins.range(1, D):
        flat = uf.add(uf.multiply(flat, nbins[i]), index_by_dim[i])
    total = int(np.prod(nbins))
    # As in JAX: integer counts without weights (bincount's), float with them or with density.
    w, wdtype = (1, dt.default_int_dtype()) if weights is None else (weights, aval_of(weights).dtype)
    counts = zeros(total, wdtype).at[flat].add(w, mode="drop")
    counts = reshape(counts, nbins)[(slice(1, -1),) * D]
    if density:
        counts = convert(counts, aval_of(sample).dtype)
        counts = uf.divide(counts, sum(counts))
        for i, widths in enumerate(meshgrid(*[diff(e) for e in edges_by_dim], indexing="ij")):
            counts = uf.divide(counts, widths)
    return counts, edges_by_dim


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """The 2-D histogram of points (x, y), and the x and y edges."""
    from .shape_ops import stack
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2) or np.ndim(bins) == 0:
        bins = [bins, bins]
    sample = stack([as_array(x, "histogram2d"), as_array(y, "histogram2d")], axis=1)
    counts, (ex, ey) = histogramdd(sample, bins, range, weights, density)
    return counts, ex, ey
