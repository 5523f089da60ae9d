"""Polynomials as coefficient arrays, highest power first: poly, polyval, polyadd, polysub,
polymul, polydiv, polyder, polyint, polyfit (least squares through a small Jacobi SVD) and
roots (the Aberth-Ehrlich iteration)."""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import ufuncs as uf
from ._util import aval_of, broadcast_shapes, convert
from .creation import arange, as_array, asarray, full, ones, zeros
from .convolve import convolve
from .editing import trim_zeros
from .reductions import prod, sum
from .selection import where
from .shape_ops import _promote_all, atleast_1d, concatenate, transpose


def _inexact(fn, *args):
    arrays = _promote_all(list(args), fn)
    dtype = aval_of(arrays[0]).dtype
    if not dt.is_inexact(dtype):
        arrays = [convert(a, dt.to_inexact_dtype(dtype), aval_of(a).weak_type) for a in arrays]
    return arrays


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots."""
    (z,) = _inexact("poly", seq_of_zeros)
    z = atleast_1d(z)
    shape = aval_of(z).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        from .linalg import eigvals         # the characteristic polynomial, as in numpy and JAX
        z = eigvals(z)
        shape = aval_of(z).shape
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


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit of degree ``deg`` (coefficients highest power first);
    ``full`` adds the residuals, rank, singular values and rcond, ``cov`` the covariance."""
    from .editing import vander
    deg = operator.index(deg)
    order = deg + 1
    x, y = as_array(x, "polyfit"), as_array(y, "polyfit")
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if aval_of(x).ndim != 1:
        raise TypeError("expected 1D vector for x")
    if aval_of(x).size == 0:
        raise TypeError("expected non-empty vector for x")
    if aval_of(y).ndim < 1 or aval_of(y).ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if aval_of(x).shape[0] != aval_of(y).shape[0]:
        raise TypeError("expected x and y to have same length")
    x, y = _inexact("polyfit", x, y)
    dtype = aval_of(x).dtype
    m = aval_of(x).shape[0]
    if rcond is None:
        rcond = m * float(dt.finfo(dtype).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        (w,) = _inexact("polyfit", w)
        if aval_of(w).ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if aval_of(w).shape[0] != aval_of(y).shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = uf.multiply(lhs, w[:, None])
        rhs = uf.multiply(rhs, w[:, None] if aval_of(rhs).ndim == 2 else w)
    scale = uf.sqrt(sum(uf.multiply(lhs, lhs), axis=0))
    lhs = uf.divide(lhs, scale[None, :])
    # Least squares through the SVD lhs = U S V^T: c = V S^+ U^T rhs, singular values below
    # rcond * max(S) treated as zero (numpy's lstsq rule).
    from .linalg import svd
    u, s, vt = svd(lhs, full_matrices=False)           # s in descending order
    v = transpose(vt)
    keep = uf.greater(s, uf.multiply(convert(rcond, dtype), s[0]))
    inv_s = where(keep, uf.divide(1, where(keep, s, convert(1, dtype))), convert(0, dtype))
    inv_s2 = uf.square(inv_s)
    rhs2 = rhs if aval_of(rhs).ndim == 2 else rhs[:, None]
    coef = v @ (inv_s[:, None] * (transpose(u) @ rhs2))
    resids = sum(uf.square(uf.subtract(rhs2, lhs @ coef)), axis=0)
    coef = uf.divide(coef, scale[:, None])
    if aval_of(rhs).ndim == 1:
        coef = coef[:, 0]
    if full:
        rank = sum(keep, dtype=dt.int32)
        return coef, resids, rank, s, asarray(float(rcond))
    if cov:
        base = uf.divide(v @ (inv_s2[:, None] * transpose(v)), uf.multiply(scale[:, None], scale[None, :]))
        if cov == "unscaled":
            fac = convert(1.0, dtype)
        else:
            if m <= order:
                raise ValueError("the number of data points must exceed order to scale the covariance matrix")
            fac = uf.divide(resids, m - order)
        if aval_of(y).ndim == 1:
            return coef, uf.multiply(base, fac)
        return coef, uf.multiply(base[:, :, None], fac[None, None, :])
    return coef


def _companion_roots(p):
    """The eigenvalues of ``p``'s companion matrix (JAX's and numpy's method): ``len(p) - 1`` roots."""
    from .selection import diag
    from .linalg import eigvals
    n = aval_of(p).shape[0]
    companion = diag(ones(n - 2, aval_of(p).dtype), -1)
    return eigvals(companion.at[0, :].set(uf.negative(uf.true_divide(p[1:], p[0]))))


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial with coefficients ``p`` (highest first), as complex numbers.
    ``strip_zeros`` drops leading zeros (``p`` must then be concrete); without it, under jit,
    each leading zero gives a NaN root, as in JAX."""
    (p,) = _inexact("roots", p)
    p = atleast_1d(p)
    if aval_of(p).ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    rdtype = aval_of(p).dtype
    cdtype = dt.complex128 if rdtype in (dt.float64, dt.complex128) else dt.complex64
    n = aval_of(p).shape[0]
    if n < 2:
        return zeros(0, cdtype)
    if strip_zeros:
        from .statistics import concrete
        nz = np.flatnonzero(concrete(uf.not_equal(p, 0), "jnp.roots with strip_zeros=True (pass strip_zeros=False "
                                                         "under jit; leading zeros then give NaN roots)"))
        if nz.size == 0:
            return zeros(0, cdtype)
        core = p[nz[0]:]                    # leading zeros only, as in JAX
        return convert(_companion_roots(core), cdtype) if aval_of(core).shape[0] > 1 else zeros(0, cdtype)
    nonzero = uf.not_equal(p, 0)
    from .reductions import any, argmax
    leading = where(any(nonzero), argmax(nonzero), n)
    from .shape_ops import roll
    p = where(uf.equal(leading, n), convert(1, rdtype), p)          # all zeros: no LAPACK error
    found = convert(_companion_roots(roll(p, uf.negative(leading))), cdtype)
    found = lax.sort((uf.equal(found, 0), found), num_keys=1)[1]   # the rolled-in zero roots last
    valid = uf.less(arange(n - 1), uf.subtract(n - 1, leading))
    return where(valid, found, convert(complex(np.nan, np.nan), cdtype))
