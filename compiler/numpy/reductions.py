"""Reductions with ``axis``/``keepdims`` and cumulative reductions, with JAX's result dtypes:
sums and products of booleans and small integers accumulate in the default integer,
float16/bfloat16 accumulate in float32, and a reduction's result is never weakly typed."""
from __future__ import annotations

import math

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from ._dtypes import to_dtype
from .creation import as_array
from ._util import aval_of, broadcast_to_shape, canonical_axes, canonical_axis, convert, located


def _no_out(fn_name, out):
    """jaxprc arrays are immutable: an ``out`` buffer cannot be filled, so it is refused (as in JAX)."""
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{fn_name} is not supported.")


def _promote_integers(dtype):
    """Booleans and integers narrower than the default accumulate in the default width."""
    if dt.is_bool(dtype):
        return dt.default_int_dtype()
    if dt.is_int(dtype) and dtype.itemsize < dt.default_int_dtype().itemsize:
        return dt.canonicalize_dtype(dt.uint64 if dt.is_unsigned(dtype) else dt.int64)
    return dtype


def _upcast_low_precision(dtype):
    """The dtype sums and products compute in: f32 for halves, integers for bools (as JAX: a bool
    result is then whether the sum or product is nonzero)."""
    if dt.is_bool(dtype):
        return dt.default_int_dtype()
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype


def _keepdims(out, shape, axes, keepdims):
    if not keepdims:
        return out
    return lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _check_where_and_initial(fn_name, where, initial=None):
    """JAX's argument checks: ``where`` a boolean mask, ``initial`` a scalar."""
    if where is not None and not dt.is_bool(aval_of(as_array(where, fn_name)).dtype):
        raise ValueError(f"jnp.{fn_name}: where must be None or a boolean array; got "
                         f"where.dtype={aval_of(as_array(where, fn_name)).dtype!r}.")
    if initial is not None and aval_of(as_array(initial, fn_name)).ndim:
        raise ValueError(f"initial value must be a scalar. Got array of shape {aval_of(initial).shape}")


def _reduce(fn_name, reducer, a, axis, dtype, keepdims, *, out=None, promote_integers=False,
            upcast=False, initial=None, combine=None, where=None, neutral=None):
    _no_out(fn_name, out)
    _check_where_and_initial(fn_name, where, initial)
    a = as_array(a, fn_name)
    aval = aval_of(a)
    axes = canonical_axes(axis, aval.ndim, fn_name)
    if dtype is not None:
        result_dtype = dt.canonicalize_dtype(to_dtype(dtype))
    elif promote_integers or (upcast and dt.is_bool(aval.dtype)):
        # sum and prod count booleans as integers even without promote_integers, as in JAX
        result_dtype = _promote_integers(aval.dtype)
    else:
        result_dtype = aval.dtype
    compute_dtype = _upcast_low_precision(result_dtype) if upcast else result_dtype
    x = convert(a, compute_dtype)
    if where is not None:
        from .selection import where as select
        x = select(where, x, convert(neutral, compute_dtype))
    out = reducer(x, axes)     # bound over no axes too, as in JAX (reduce_max's jvp masks a NaN)
    if initial is not None:
        out = combine(out, convert(initial, compute_dtype))
    out = convert(out, result_dtype)
    return _keepdims(out, aval.shape, axes, keepdims)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    from .ufuncs import add
    return _reduce("sum", lax.reduce_sum, a, axis, dtype, keepdims, out=out, promote_integers=promote_integers,
                   upcast=True, initial=initial, combine=add, where=where, neutral=0)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    from .ufuncs import multiply
    return _reduce("prod", lax.reduce_prod, a, axis, dtype, keepdims, out=out, promote_integers=promote_integers,
                   upcast=True, initial=initial, combine=multiply, where=where, neutral=1)


def _identity_of_max(dtype, sign):
    if dt.is_bool(dtype):
        return sign < 0
    if dt.is_int(dtype):
        info = dt.iinfo(dtype)
        return info.min if sign > 0 else info.max
    return -np.inf if sign > 0 else np.inf


def _require_initial(fn_name, a, axis, initial, where):
    """max and min have no identity: as in JAX, reducing an empty axis or masking with
    ``where`` needs ``initial`` (otherwise the result would be a made-up -inf or iinfo.min)."""
    if initial is not None:
        return
    if where is not None:
        raise ValueError(f"reduction operation {fn_name} does not have an identity, so to use a "
                         "where mask one has to specify 'initial'")
    aval = aval_of(as_array(a, fn_name))
    if 0 in [aval.shape[i] for i in canonical_axes(axis, aval.ndim, fn_name)]:
        raise ValueError(f"zero-size array to reduction operation {fn_name} which has no identity")


def _unchecked_max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    from .ufuncs import maximum
    dtype = aval_of(a, "max").dtype
    return _reduce("max", lax.reduce_max, a, axis, None, keepdims, out=out, initial=initial, combine=maximum,
                   where=where, neutral=_identity_of_max(dtype, 1))


def _unchecked_min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    from .ufuncs import minimum
    dtype = aval_of(a, "min").dtype
    return _reduce("min", lax.reduce_min, a, axis, None, keepdims, out=out, initial=initial, combine=minimum,
                   where=where, neutral=_identity_of_max(dtype, -1))


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _require_initial("max", a, axis, initial, where)
    return _unchecked_max(a, axis, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _require_initial("min", a, axis, initial, where)
    return _unchecked_min(a, axis, out, keepdims, initial, where)


amax, amin = max, min


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    return _reduce("all", lax.reduce_and, convert(as_array(a, "all"), dt.bool_), axis, None, keepdims,
                   out=out, where=where, neutral=True)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    return _reduce("any", lax.reduce_or, convert(as_array(a, "any"), dt.bool_), axis, None, keepdims,
                   out=out, where=where, neutral=False)


def _count(fn_name, shape, axes, keepdims, where, dtype):
    """How many elements each result of a reduction over ``axes`` combines: a Python int, or
    with a ``where`` mask (broadcast to ``shape``) the ``dtype`` count of selected elements."""
    if where is None:
        return math.prod(shape[i] for i in axes)
    mask = broadcast_to_shape(convert(as_array(where, fn_name), dt.bool_), shape)
    return sum(mask, axis=axes, dtype=dtype, keepdims=keepdims)


def _inexact_dtype(dtype, given):
    if given is not None:
        return dt.canonicalize_dtype(to_dtype(given))
    return dt.to_inexact_dtype(dtype)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean; integers average in the default float dtype."""
    from .ufuncs import divide
    _no_out("mean", out)
    _check_where_and_initial("mean", where)
    a = as_array(a, "mean")
    aval = aval_of(a)
    axes = canonical_axes(axis, aval.ndim, "mean")
    result_dtype = _inexact_dtype(aval.dtype, dtype)
    if dt.is_bool(result_dtype):
        raise TypeError(f"{located('mean')}: dtype=bool is not supported (JAX's division does not "
                        "accept booleans)")
    compute = _upcast_low_precision(result_dtype)
    total = sum(a, axis=axes, dtype=compute, keepdims=keepdims, where=where)
    count = convert(_count("mean", aval.shape, axes, keepdims, where, compute), compute)
    if not dt.is_inexact(compute):      # an integer dtype= divides exactly in it (lax.div), as JAX
        return convert(lax.div(total, count), result_dtype)
    return convert(divide(total, count), result_dtype)


_COMPLEX_VAR_REAL_DTYPE = (
    "jax.numpy.var does not yet support real dtype parameters when computing the variance of an "
    "array of complex values. The semantics of numpy.var seem unclear in this case. Please comment "
    "on https://github.com/jax-ml/jax/issues/2283 if this behavior is important to you.")


def _var_dtypes(a_dtype, dtype):
    """(computation dtype, result dtype) of a variance, as JAX: a given ``dtype`` is both (halves
    computing in f32), and a complex input needs a complex one; otherwise integers give the default
    float and a complex input its real counterpart."""
    if dtype is not None:
        dtype = dt.canonicalize_dtype(to_dtype(dtype))
        if dt.is_complex(a_dtype) and not dt.is_complex(dtype):
            raise ValueError(_COMPLEX_VAR_REAL_DTYPE)
        return _upcast_halves(dtype), dtype
    if not dt.is_inexact(a_dtype):
        dtype = dt.to_inexact_dtype(a_dtype)
        return _upcast_halves(dtype), dtype
    return _upcast_halves(a_dtype), _real(a_dtype)


def _upcast_halves(dtype):
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype


def _variance(fn_name, a, axis, dtype, ddof, keepdims, where, nan_after_cast):
    """Mean of squared deviations over ``axis``, divided by ``N - ddof`` (N counts the elements
    ``where`` selects); NaN where no degrees of freedom are left. An integer ``dtype`` computes in
    integers (truncating); ``nan_after_cast`` puts the NaN in after the cast to ``dtype`` (var:
    integer results become floats) rather than before (nanvar: they stay integers), as JAX."""
    from .selection import where as where_
    from .ufuncs import conj, divide, greater, multiply, real, subtract
    a = as_array(a, fn_name)
    aval = aval_of(a)
    axes = canonical_axes(axis, aval.ndim, fn_name)
    compute, result_dtype = _var_dtypes(aval.dtype, dtype)
    x = convert(a, compute)
    centered = subtract(x, mean(x, axis=axes, dtype=compute, keepdims=True, where=where))
    squares = multiply(centered, conj(centered))
    if dt.is_complex(compute):
        squares = real(squares)
    total = sum(squares, axis=axes, dtype=aval_of(squares).dtype, keepdims=keepdims, where=where)
    total_dtype = aval_of(total).dtype
    count = _count(fn_name, aval.shape, axes, keepdims, where, total_dtype)
    divisor = convert(count - ddof if where is None else subtract(count, ddof), total_dtype)
    positive = greater(divisor, 0)
    if dt.is_inexact(total_dtype):
        quotient = divide(total, divisor)
    else:      # integer division, as lax.div (a zero divisor is masked below)
        quotient = lax.div(total, where_(positive, divisor, convert(1, total_dtype)))
    if nan_after_cast:
        return where_(positive, convert(quotient, result_dtype), np.nan)
    return convert(where_(positive, quotient, np.nan), result_dtype)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, correction=None):
    """Variance: mean of squared deviations, divided by ``N - ddof`` (N counts the elements
    ``where`` selects)."""
    _no_out("var", out)
    _check_where_and_initial("var", where)
    if correction is not None:
        ddof = correction
    return _variance("var", a, axis, dtype, ddof, keepdims, where, nan_after_cast=True)


def _real(dtype):
    return {dt.complex64: dt.float32, dt.complex128: dt.float64}.get(dtype, dtype)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, correction=None):
    """Standard deviation: the square root of ``var``."""
    from .ufuncs import sqrt
    if dtype is not None and not dt.is_inexact(dt.canonicalize_dtype(to_dtype(dtype))):
        raise ValueError(f"dtype argument to jnp.std must be inexact; got {np.dtype(to_dtype(dtype))}")
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _arg_reduction(fn_name, lax_fn):
    def fn(a, axis=None, out=None, keepdims=None):
        _no_out(fn_name, out)
        a = as_array(a, fn_name)
        aval = aval_of(a)
        if axis is None:
            a = lax.reshape(a, (aval.size,))
            ax = 0
        else:
            ax = canonical_axis(axis, aval.ndim, fn_name)
        if aval_of(a).shape[ax] == 0:
            raise ValueError(f"{fn_name}: attempt to get {fn_name} of an empty sequence")
        result = lax_fn(a, ax, dt.default_int_dtype())
        if keepdims:
            shape = (1,) * aval.ndim if axis is None else tuple(
                1 if i == ax else d for i, d in enumerate(aval.shape))
            result = lax.reshape(result, shape)
        return result
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = f"Index of the {fn_name[3:]}imum along ``axis`` (of the flattened array if None)."
    return fn


argmax = _arg_reduction("argmax", lax.argmax)
argmin = _arg_reduction("argmin", lax.argmin)


def _cumulative(fn_name, lax_fn_name):
    def fn(a, axis=None, dtype=None, out=None):
        _no_out(fn_name, out)
        a = as_array(a, fn_name)
        aval = aval_of(a)
        if axis is None:
            a = lax.reshape(a, (aval.size,))
            axis = 0
        axis = canonical_axis(axis, aval_of(a).ndim, fn_name)
        dtype = None if dtype is None else dt.canonicalize_dtype(to_dtype(dtype))
        if dtype is not None and dt.is_bool(dtype):
            a = convert(a, dtype)             # as JAX: truth values first, then counted as integers
        if dtype is not None and not dt.is_bool(dtype):
            a = convert(a, dtype)
        elif dt.is_bool(aval_of(a).dtype):    # bools accumulate as integers
            a = convert(a, dt.default_int_dtype())
        elif aval.weak_type:
            a = convert(a, aval.dtype)
        out = getattr(lax, lax_fn_name)(a, axis)
        return out if dtype is None or not dt.is_bool(dtype) else convert(out, dtype)
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = f"Inclusive ``{fn_name}`` along ``axis`` (of the flattened array if None)."
    return fn


cumsum = _cumulative("cumsum", "cumsum")
cumprod = _cumulative("cumprod", "cumprod")


def _cumulative_api(fn_name, cumulative, identity, promote_integers=False):
    """numpy 2's ``cumulative_sum``/``cumulative_prod``: keyword-only options, ``axis`` required
    beyond one dimension, and ``include_initial`` prepends the identity. As in JAX, only
    cumulative_sum widens small integers (``promote_integers``)."""
    def fn(x, /, *, axis=None, dtype=None, include_initial=False):
        aval = aval_of(as_array(x, fn_name))
        ndim = aval.ndim
        if dtype is None and promote_integers:
            dtype = _promote_integers(aval.dtype)
        if ndim == 0 or (axis is None and ndim > 1):
            raise ValueError(f"{fn_name} needs a non-scalar input, and an explicit axis beyond one "
                             f"dimension; got an array of rank {ndim} and axis={axis}")
        axis = canonical_axis(0 if axis is None else axis, ndim, fn_name)
        out = cumulative(x, axis, dtype)
        if not include_initial:
            return out
        aval = aval_of(out)
        shape = aval.shape[:axis] + (1,) + aval.shape[axis + 1:]
        return lax.concatenate([lax.full(shape, identity, aval.dtype), out], axis)
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = f"``{fn_name}`` along ``axis``, optionally starting with the identity ({identity})."
    return fn


cumulative_sum = _cumulative_api("cumulative_sum", cumsum, 0, promote_integers=True)
cumulative_prod = _cumulative_api("cumulative_prod", cumprod, 1)


def _skipping_nan(fn_name, reduction, all_nan_gives_nan=False, identity_free=None):
    """``reduction`` ignoring NaNs through its ``where`` mask (jnp.nansum and friends);
    non-float inputs have no NaN and are reduced as they are. ``identity_free`` names a
    reduction without identity (max, min), whose empty or masked use needs ``initial``."""
    def fn(a, axis=None, **kwargs):
        from .selection import where
        from .ufuncs import isnan, logical_and, logical_not
        if identity_free:
            _require_initial(identity_free, a, axis, kwargs.get("initial"), kwargs.get("where"))
        dtype = aval_of(as_array(a, fn_name)).dtype
        if not dt.is_inexact(dtype):
            return reduction(a, axis, **kwargs)
        nan = isnan(a)
        mask = logical_not(nan) if kwargs.get("where") is None else logical_and(kwargs["where"], logical_not(nan))
        out = reduction(a, axis, **{**kwargs, "where": mask})
        if not all_nan_gives_nan or kwargs.get("initial") is not None:
            return out          # (with an initial value, as JAX: an all-NaN slice gives the initial)
        return where(all(nan, axis, keepdims=kwargs.get("keepdims", False)), convert(np.nan, dtype), out)
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = f"``{fn_name[3:]}`` ignoring NaN values."
    return fn


nansum = _skipping_nan("nansum", sum)
nanprod = _skipping_nan("nanprod", prod)
nanmean = _skipping_nan("nanmean", mean)
nanmax = _skipping_nan("nanmax", _unchecked_max, all_nan_gives_nan=True, identity_free="max")
nanmin = _skipping_nan("nanmin", _unchecked_min, all_nan_gives_nan=True, identity_free="min")


def ptp(a, axis=None, keepdims=False):
    """Peak to peak: ``max - min`` along ``axis``."""
    from .ufuncs import subtract
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    from .ufuncs import not_equal
    return sum(not_equal(a, 0), axis=axis, keepdims=keepdims, dtype=dt.default_int_dtype())
