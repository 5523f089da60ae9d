"""Numerical calculus on sampled data: interp, gradient, trapezoid, unwrap; and the
logarithmic grids logspace and geomspace (differentiable in their end points)."""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import is_symbolic_dim

from . import ufuncs as uf
from ._dtypes import result_type, to_dtype
from ._util import aval_of, canonical_axes, canonical_axis, convert, located, promote
from .creation import as_array, asarray, linspace
from .reductions import cumsum, sum
from .selection import clip, searchsorted, where
from .shape_ops import concatenate, diff, moveaxis, reshape


def _inexact(fn, *args):
    """Each argument converted to its own inexact dtype (no joint promotion)."""
    out = []
    for a in args:
        a = as_array(a, fn)
        (a,), _, _ = promote(fn, a, to_inexact=True)
        out.append(a)
    return out


def _joint_inexact(fn, *args):
    from .shape_ops import _promote_all
    arrays = _promote_all([as_array(a, fn) for a in args], fn)
    dtype = aval_of(arrays[0]).dtype
    if not dt.is_inexact(dtype):
        weak = aval_of(arrays[0]).weak_type
        arrays = [convert(a, dt.to_inexact_dtype(dtype), weak) for a in arrays]
    return arrays


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at ``x``; ``left``/``right``
    values beyond the ends (or "extrapolate"), or a ``period`` for periodic data."""
    x, xp, fp = as_array(x, "interp"), as_array(xp, "interp"), as_array(fp, "interp")
    if aval_of(xp).shape != aval_of(fp).shape or aval_of(xp).ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = _joint_inexact("interp", x, xp)
    (fp,) = _inexact("interp", fp)
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but got: {v!r}")
    if dt.is_complex(aval_of(x).dtype):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = uf.absolute(period)
        x, xp = uf.remainder(x, period), uf.remainder(xp, period)
        xp, fp = lax.sort((xp, fp), 0, num_keys=1)
        xp = concatenate([uf.subtract(xp[-1:], period), xp, uf.add(xp[:1], period)])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    n = aval_of(xp).shape[0]
    i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
    lo_x, hi_x, lo_f, hi_f = xp[i - 1], xp[i], fp[i - 1], fp[i]
    dx = uf.subtract(hi_x, lo_x)
    # A zero-width interval takes its left value, with no NaN in the gradient.
    tiny = float(np.spacing(dt.finfo(aval_of(xp).dtype).eps))
    flat = uf.less_equal(uf.absolute(dx), tiny)
    slope_part = uf.multiply(uf.divide(uf.subtract(x, lo_x), where(flat, 1, dx)), uf.subtract(hi_f, lo_f))
    f = where(flat, lo_f, uf.add(lo_f, slope_part))
    if period is None:
        if not isinstance(left, str):
            f = where(uf.less(x, xp[0]), fp[0] if left is None else left, f)
        if not isinstance(right, str):
            f = where(uf.greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return f


def _slice(a, start, stop, axis):
    idx = [slice(None)] * aval_of(a).ndim
    idx[axis] = slice(start, stop)
    return a[tuple(idx)]


def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, first-order at the edges, along each axis;
    spacings are scalars or coordinate arrays (one per axis)."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    a, *spacing = _joint_inexact("gradient", f, *varargs)
    nd = aval_of(a).ndim
    axes = tuple(range(nd)) if axis is None else tuple(
        canonical_axis(i, nd, "gradient") for i in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if min(aval_of(a).shape[i] for i in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least 2 elements "
                         "are required.")
    if not spacing:
        spacing = [1.0] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")

    def along(ax, h):
        first = uf.subtract(_slice(a, 1, 2, ax), _slice(a, 0, 1, ax))
        last = uf.subtract(_slice(a, -1, None, ax), _slice(a, -2, -1, ax))
        hn = aval_of(h).ndim if not isinstance(h, float) else 0
        if hn == 0:
            inner = uf.divide(uf.multiply(uf.subtract(_slice(a, 2, None, ax), _slice(a, None, -2, ax)), 0.5), h)
            first, last = uf.divide(first, h), uf.divide(last, h)
        elif hn == 1:
            if aval_of(h).shape[0] != aval_of(a).shape[ax]:
                raise ValueError("Spacing arrays must have the same length as the dimension along which the "
                                 "gradient is calculated.")
            shape = [1] * nd
            shape[ax] = aval_of(h).shape[0]
            h = reshape(h, tuple(shape))
            first = uf.divide(first, uf.subtract(_slice(h, 1, 2, ax), _slice(h, 0, 1, ax)))
            last = uf.divide(last, uf.subtract(_slice(h, -1, None, ax), _slice(h, -2, -1, ax)))
            d1 = uf.subtract(_slice(h, 1, -1, ax), _slice(h, 0, -2, ax))
            d2 = uf.subtract(_slice(h, 2, None, ax), _slice(h, 1, -1, ax))
            w0 = uf.divide(uf.negative(d2), uf.multiply(d1, uf.add(d1, d2)))
            w1 = uf.divide(uf.subtract(d2, d1), uf.multiply(d1, d2))
            w2 = uf.divide(d1, uf.multiply(d2, uf.add(d1, d2)))
            inner = uf.add(uf.add(uf.multiply(w0, _slice(a, 0, -2, ax)), uf.multiply(w1, _slice(a, 1, -1, ax))),
                           uf.multiply(w2, _slice(a, 2, None, ax)))
        else:
            raise ValueError("Spacing arrays must be 1D arrays or scalars.")
        return concatenate([first, inner, last], axis=ax)

    grads = [along(ax, h) for ax, h in zip(axes, spacing)]
    return grads[0] if len(axes) == 1 else grads


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (sample points ``x`` or spacing ``dx``)."""
    if x is None:
        (y,) = _inexact("trapezoid", y)
        d = asarray(dx)
        if aval_of(d).ndim > 0:
            d = reshape(d, (1,) * (aval_of(y).ndim - aval_of(d).ndim) + aval_of(d).shape)
            d = moveaxis(d, axis, -1)
    else:
        y, x = _joint_inexact("trapezoid", y, x)
        d = diff(x) if aval_of(x).ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    y = moveaxis(y, axis, -1)
    if aval_of(d).ndim == 0 or aval_of(d).shape[-1] == 1:
        step = d if aval_of(d).ndim == 0 else d[..., 0]
        ends = uf.multiply(0.5, uf.add(y[..., 0], y[..., -1]))
        return uf.multiply(step, uf.subtract(sum(y, axis=-1), ends))
    return uf.multiply(0.5, sum(uf.multiply(d, uf.add(y[..., 1:], y[..., :-1])), axis=-1))


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """``p`` with jumps larger than ``discont`` (default period/2) replaced by their
    complement modulo ``period``."""
    from .shape_ops import _promote_all
    p, period = _promote_all([p, period], "unwrap")
    dtype = aval_of(p).dtype
    if dt.is_complex(dtype):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    axis = canonical_axis(axis, aval_of(p).ndim, "unwrap")
    if aval_of(p).shape[axis] == 0:
        return p
    if discont is None:
        discont = uf.divide(period, 2)
    half = uf.floor_divide(period, 2) if dt.is_int(dtype) else uf.divide(period, 2)
    dd = diff(p, axis=axis)
    ddmod = uf.subtract(uf.mod(uf.add(dd, half), period), half)
    ddmod = where(uf.logical_and(uf.equal(ddmod, uf.negative(half)), uf.greater(dd, 0)), half, ddmod)
    correction = where(uf.less(uf.absolute(dd), discont), 0, uf.subtract(ddmod, dd))
    rest = uf.add(_slice(p, 1, None, axis), cumsum(correction, axis=axis))
    return concatenate([_slice(p, 0, 1, axis), rest], axis=axis)


def _space_dtypes(fn, start, stop, dtype):
    out = dt.canonicalize_dtype(to_dtype(dtype)) if dtype is not None else result_type(start, stop)
    compute = dt.to_inexact_dtype(out)
    if dtype is None:
        out = compute
    return convert(as_array(start, fn), compute), convert(as_array(stop, fn), compute), out, compute


def _static_num(fn: str, num) -> None:
    """Unlike linspace, JAX's logspace and geomspace read ``num`` as a Python int: a symbolic one
    is refused with the TypeError of a dimension that is no integer."""
    if is_symbolic_dim(num):
        raise TypeError(f"'DimExpr' object cannot be interpreted as an integer: the 'num' argument of "
                        f"jnp.{fn} must be an integer, got the symbolic dimension '{num}'")


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``."""
    _static_num("logspace", num)
    start, stop, out, _ = _space_dtypes("logspace", start, stop, dtype)
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    return convert(uf.power(base, lin), out)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Samples evenly spaced on a log scale from ``start`` to ``stop`` (same sign)."""
    _static_num("geomspace", num)
    start, stop, out, compute = _space_dtypes("geomspace", start, stop, dtype)
    sign = uf.sign(start)
    res = uf.multiply(sign, logspace(uf.log10(uf.divide(start, sign)), uf.log10(uf.divide(stop, sign)), num,
                                     endpoint=endpoint, base=10.0, dtype=compute, axis=0))
    axis = canonical_axis(axis, aval_of(res).ndim, "geomspace")
    if axis:
        res = moveaxis(res, 0, axis)
    return convert(res, out)
