"""Polynomials as coefficient arrays, highest power first: poly, polyval, polyadd, polysub,
polymul, polydiv, polyder, polyint."""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import ufuncs as uf
from ._util import aval_of, broadcast_shapes, convert
from .creation import arange, as_array, full, ones, zeros
from .editing import convolve, trim_zeros
from .reductions import prod
from .shape_ops import _promote_all, atleast_1d, concatenate


def _inexact(fn, *args):
    arrays = _promote_all(list(args), fn)
    if not dt.is_inexact(aval_of(arrays[0]).dtype):
        arrays = [convert(a, dt.default_float_dtype(), aval_of(a).weak_type) for a in arrays]
    return arrays


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots."""
    (z,) = _inexact("poly", seq_of_zeros)
    z = atleast_1d(z)
    shape = aval_of(z).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        raise NotImplementedError("jnp.poly of a square matrix needs its eigenvalues, which jaxprc.numpy "
                                  "does not compute yet; pass the roots instead")
    if len(shape) != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    dtype = aval_of(z).dtype
    if shape[0] == 0:
        return ones((), dtype)
    a = ones((1,), dtype)
    for k in range(shape[0]):
        a = convolve(a, concatenate([ones((1,), dtype), uf.negative(z[k:k + 1])]), mode="full")
    return a


def polyval(p, x, *, unroll=16):
    """``p`` evaluated at ``x`` by Horner's rule (a scan over the coefficients)."""
    p, x = _promote_all([as_array(p, "polyval"), as_array(x, "polyval")], "polyval")
    shape = broadcast_shapes(aval_of(p).shape[1:], aval_of(x).shape, fn="polyval")
    y = zeros(shape, aval_of(x).dtype)
    y, _ = lax.scan(lambda y, c: (uf.add(uf.multiply(y, x), c), None), y, p, unroll=unroll)
    return y


def polyadd(a1, a2):
    a1, a2 = _promote_all([a1, a2], "polyadd")
    n1, n2 = aval_of(a1).shape[0], aval_of(a2).shape[0]
    if n2 <= n1:
        return a1.at[n1 - n2:].add(a2)
    return a2.at[n2 - n1:].add(a1)


def polysub(a1, a2):
    a1, a2 = _promote_all([a1, a2], "polysub")
    return polyadd(a1, uf.negative(a2))


def polymul(a1, a2, *, trim_leading_zeros=False):
    a1, a2 = _inexact("polymul", a1, a2)
    if trim_leading_zeros and (aval_of(a1).shape[0] > 1 or aval_of(a2).shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if aval_of(a1).shape[0] == 0:
        a1 = zeros(1, aval_of(a2).dtype)
    if aval_of(a2).shape[0] == 0:
        a2 = zeros(1, aval_of(a1).dtype)
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """Quotient and remainder of polynomial long division."""
    u, v = _inexact("polydiv", u, v)
    m, n = aval_of(u).shape[0] - 1, aval_of(v).shape[0] - 1
    scale = uf.divide(1.0, v[0])
    q = zeros(max(m - n + 1, 1), aval_of(u).dtype)
    for k in range(0, m - n + 1):
        d = uf.multiply(scale, u[k])
        q = q.at[k].set(d)
        u = u.at[k:k + n + 1].add(uf.negative(uf.multiply(d, v)))
    if trim_leading_zeros:
        from .statistics import concrete
        tol = float(np.sqrt(dt.finfo(aval_of(u).dtype).eps))
        big = np.flatnonzero(np.abs(concrete(u, "jnp.polydiv with trim_leading_zeros")) > tol)
        u = u[big[0]:] if big.size else u[:0]
    return q, u


def polyder(p, m=1):
    """The ``m``-th derivative's coefficients."""
    (p,) = _inexact("polyder", p)
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    n = aval_of(p).shape[0]
    dtype = aval_of(p).dtype
    coeff = prod(uf.subtract(arange(m, n, dtype=dtype)[None, :], arange(m, dtype=dtype)[:, None]), axis=0)
    return uf.multiply(p[:-m], lax.rev(coeff, (0,)) if aval_of(coeff).shape[0] else coeff)


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative's coefficients, with integration constants ``k``."""
    m = operator.index(m)
    p, k = _inexact("polyint", p, 0 if k is None else k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if aval_of(k).shape[0] == 1:
        k = full((m,), k[0], aval_of(k).dtype)
    if aval_of(k).shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    dtype = aval_of(p).dtype
    grid = uf.subtract(arange(aval_of(p).shape[0] + m, dtype=dtype)[None, :], arange(m, dtype=dtype)[:, None])
    coeff = lax.rev(prod(uf.maximum(1, grid), axis=0), (0,))
    return uf.true_divide(concatenate([p, k]), coeff)
