"""Window functions (bartlett, blackman, hamming, hanning, kaiser): ``M`` samples of the
default float dtype, computed from an iota (``M`` must be concrete)."""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import ufuncs as uf


def _window(name, M, shape_fn):
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"jnp.{name}: M must be a concrete integer, got {M!r}") from None
    dtype = dt.default_float_dtype()
    if M <= 1:
        return lax.full((max(M, 0),), 1, dtype)
    return shape_fn(lax.iota(dtype, M), M)


def _cosine_sum(n, M, *coeffs):
    """sum_k (-1)^k c_k cos(2 pi k n / (M - 1))."""
    out = coeffs[0]
    for k, c in enumerate(coeffs[1:], 1):
        term = uf.multiply(c, uf.cos(uf.divide(uf.multiply(2 * np.pi * k, n), M - 1)))
        out = uf.add(out, term) if k % 2 == 0 else uf.subtract(out, term)
    return out


def bartlett(M):
    """The triangular window."""
    return _window("bartlett", M, lambda n, M: uf.subtract(1, uf.divide(
        uf.absolute(uf.subtract(uf.add(uf.multiply(2, n), 1), M)), M - 1)))


def blackman(M):
    return _window("blackman", M, lambda n, M: _cosine_sum(n, M, 0.42, 0.5, 0.08))


def hamming(M):
    return _window("hamming", M, lambda n, M: _cosine_sum(n, M, 0.54, 0.46))


def hanning(M):
    return _window("hanning", M, lambda n, M: _cosine_sum(n, M, 0.5, 0.5))


def kaiser(M, beta):
    """The Kaiser window: I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta), a = (M - 1) / 2."""
    from .math_extra import i0

    def shape(n, M):
        alpha = 0.5 * (M - 1)
        r = uf.divide(uf.subtract(n, alpha), alpha)
        return uf.divide(i0(uf.multiply(beta, uf.sqrt(uf.subtract(1, uf.square(r))))), i0(beta))
    return _window("kaiser", M, shape)
