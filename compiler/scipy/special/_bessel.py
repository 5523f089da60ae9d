"""Bessel functions and spherical harmonics: i0, i0e, i1, i1e, bessel_jn, sph_harm_y."""
from __future__ import annotations

import operator

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...ir.tracing import Tracer
from ...numpy._util import located
from ...vmap import vmap
from ._common import dtype_of, inexact


def i0e(x):
    """``exp(-|x|) I0(x)``."""
    return lax.bessel_i0e(inexact("i0e", x))


def i0(x):
    """The modified Bessel function ``I0(x) = exp(|x|) i0e(x)``."""
    x = inexact("i0", x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    """``exp(-|x|) I1(x)``."""
    return lax.bessel_i1e(inexact("i1e", x))


def i1(x):
    """The modified Bessel function ``I1(x) = exp(|x|) i1e(x)``."""
    x = inexact("i1", x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


def _bessel_jn_scalar(z, *, v, n_iter):
    """J_0(z) .. J_v(z) by Miller's backward recurrence J_{k-1} = 2k/z J_k - J_{k+1} from
    k = n_iter down, normalized by 1 = J_0 + 2 (J_2 + J_4 + ...)."""
    def step(carry, k):
        f0, f1, even_sum = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        even_sum = jnp.where(jnp.remainder(k, 2) == 0, even_sum + 2.0 * f, even_sum)
        return (f1, f, even_sum), f

    zero = jnp.zeros_like(z)
    (_, _, even_sum), values = lax.scan(step, (zero, zero + 1e-16, zero),
                                        jnp.arange(n_iter + 1, dtype=dtype_of(z)), reverse=True)
    return values[:v + 1] / (even_sum - values[0])


def bessel_jn(z, *, v: int, n_iter: int = 50):
    """Bessel functions of the first kind J_0(z) .. J_v(z), stacked on a new leading axis."""
    z = inexact("bessel_jn", z)
    v, n_iter = operator.index(v), int(n_iter)
    fun = lambda s: _bessel_jn_scalar(s, v=v, n_iter=n_iter)
    for _ in range(jnp.ndim(z)):
        fun = vmap(fun)
    return jnp.moveaxis(fun(z), -1, 0)


def _normalized_legendre(l_max: int, x):
    """P[m][l]: the normalized associated Legendre functions of cos(theta) = x for
    0 <= m <= l <= l_max (zero above the diagonal), by the three-term recurrence in l."""
    zero = jnp.zeros_like(x)
    p = [[zero] * (l_max + 1) for _ in range(l_max + 1)]
    p[0][0] = zero + 0.5 / np.sqrt(np.pi)
    root = jnp.sqrt(1.0 - x * x)
    for m in range(1, l_max + 1):        # the diagonal, then the first off-diagonal
        p[m][m] = p[m - 1][m - 1] * -np.sqrt(1.0 + 0.5 / m) * root
    for m in range(l_max):
        p[m][m + 1] = np.sqrt(2.0 * m + 3.0) * x * p[m][m]
    for l in range(2, l_max + 1):
        for m in range(l - 1):
            d0 = np.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
            d1 = np.sqrt((2.0 * l + 1.0) * ((l - 1.0) ** 2 - m * m) / ((2.0 * l - 3.0) * (l * l - m * m)))
            p[m][l] = d0 * x * p[m][l - 1] - d1 * p[m][l - 2]
    return jnp.stack([jnp.stack(row) for row in p])


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonics Y_n^m(theta, phi) (theta the polar angle), with n_max >= max(n)
    static (required under jit)."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
    if n_max is None:
        if isinstance(n, Tracer):
            raise TypeError(f"{located('sph_harm_y')}: n_max must be given statically when n is traced "
                            "(under jit or another transformation)")
        n_max = int(np.max(np.asarray(n)))
    n_max = operator.index(n_max)
    theta = inexact("sph_harm_y", theta)
    n, m, theta, phi = jnp.broadcast_arrays(jnp.asarray(n), jnp.asarray(m), theta, jnp.asarray(phi, dtype_of(theta)))
    shape = jnp.shape(theta)
    n, m, theta, phi = (jnp.ravel(a) for a in (n, m, theta, phi))
    legendre = _normalized_legendre(n_max, jnp.cos(theta))
    abs_m = jnp.abs(m)
    value = legendre[jnp.clip(abs_m, 0, n_max), jnp.clip(n, 0, n_max), jnp.arange(jnp.shape(theta)[0])]
    angle = abs_m * phi
    harmonic = lax.complex(value * jnp.cos(angle), value * jnp.sin(angle))
    harmonic = jnp.where(m < 0, (-1.0) ** abs_m * jnp.conjugate(harmonic), harmonic)
    return jnp.reshape(harmonic, shape)
