"""The gamma function and its principal-branch logarithm for complex arguments, as JAX computes
them: Lanczos' approximation (g = 7, 9 coefficients) with the reflection formula for Re z < 1/2;
``loggamma`` first shifts z into the right half-plane (log Gamma(z) = log Gamma(z + n) -
sum_k log(z + k)) so that its one branch cut is the negative real axis, as SciPy's. Poles
(non-positive integers) and NaN give nan+nanj."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...api import jit
from ._common import dtype_of

_G = 7.0
# GSL's lanczos_7_c (specfunc/gamma.c), the coefficients JAX uses.
_COEFFICIENTS = np.array([0.99999999999980993, 676.5203681218851, -1259.1392167224028,
                          771.32342877765313, -176.61502916214059, 12.507343278686905,
                          -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7])


def _lanczos_loggamma(z):
    """log Gamma(z) with the reflection Gamma(z) = pi / (sin(pi z) Gamma(1 - z)) for Re z < 1/2."""
    dtype = dtype_of(z)
    reflect = jnp.real(z) < 0.5
    zz = jnp.where(reflect, 1.0 - z, z) - 1.0
    coefficients = jnp.asarray(_COEFFICIENTS, dtype=dtype)
    ks = jnp.asarray(np.arange(1, 9), dtype=dtype)
    # the series summed as one reduction over a trailing axis (JAX's order, so the bits agree)
    ag = coefficients[0] + jnp.sum(coefficients[1:] / (zz[..., None] + ks), axis=-1)
    t = zz + _G + 0.5
    log_gamma = jnp.asarray(0.5 * np.log(2.0 * np.pi), dtype=dtype) + (zz + 0.5) * jnp.log(t) - t \
        + jnp.log(ag)
    # the unselected branch sees a harmless point, so no NaN reaches a gradient through where
    z_reflect = jnp.where(reflect, z, jnp.full_like(z, 0.5))
    reflected = jnp.log(jnp.asarray(np.pi, dtype=dtype)) - jnp.log(jnp.sin(np.pi * z_reflect)) - log_gamma
    return jnp.where(reflect, reflected, log_gamma)


def _undefined(z):
    """Poles and NaN (both answered nan+nanj), and z with those replaced by 1."""
    pole = (jnp.imag(z) == 0) & (jnp.real(z) == jnp.floor(jnp.real(z))) & (jnp.real(z) <= 0)
    undefined = pole | jnp.isnan(z)
    return undefined, jnp.where(undefined, jnp.ones_like(z), z)


def _nan(z):
    return jnp.asarray(complex(np.nan, np.nan), dtype=dtype_of(z))


def complex_gamma(z):
    undefined, safe = _undefined(z)
    return jnp.where(undefined, _nan(z), jnp.exp(_lanczos_loggamma(safe)))


@jit      # as in JAX (eager calls compile the loop once, and round as the jitted form)
def complex_loggamma(z):
    undefined, safe = _undefined(z)
    n = jnp.maximum(0, jnp.ceil(0.5 - jnp.real(safe)).astype(int))

    def more(state):
        return jnp.any(state[0] < n)

    def add_log(state):
        k, total = state
        on = k < n
        zk = jnp.where(on, safe + k, jnp.ones_like(safe))
        return k + 1, total + jnp.where(on, jnp.log(zk), jnp.zeros_like(total))

    _, total = lax.while_loop(more, add_log, (0, jnp.zeros_like(safe)))
    return jnp.where(undefined, _nan(z), _lanczos_loggamma(safe + n) - total)
