"""The multivariate normal distribution (mean's last axis is the dimension; cov a scalar or
a (..., n, n) matrix, factored by Cholesky)."""
import numpy as np

from ... import numpy as jnp
from ._util import promote_dtypes_inexact


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_dtypes_inexact(x, mean, cov)
    if not mean.shape:
        return -1 / 2 * jnp.square(x - mean) / cov - 1 / 2 * (np.log(2 * np.pi) + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:
        return -1 / 2 * jnp.sum(y * y, axis=-1) / cov - n / 2 * (np.log(2 * np.pi) + jnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    from ...lax import linalg     # the Cholesky factorization and triangular solves
    factor = linalg.cholesky(cov)
    batch = jnp.broadcast_shapes(factor.shape[:-2], y.shape[:-1])
    factor = jnp.broadcast_to(factor, batch + (n, n))
    z = linalg.triangular_solve(factor, jnp.broadcast_to(y, batch + (n,))[..., None], left_side=True,
                                lower=True)[..., 0]
    log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), -1)
    return -1 / 2 * jnp.sum(z * z, axis=-1) - n / 2 * np.log(2 * np.pi) - log_det


def pdf(x, mean, cov):
    return jnp.exp(logpdf(x, mean, cov))
