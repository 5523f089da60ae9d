"""The normal distribution truncated to [a, b] (in standard units)."""
import numpy as np

from ... import numpy as jnp
from ..special import log_ndtr, logsumexp, ndtr
from . import norm
from ._util import promote_inexact


def _log_diff(x, y):
    """log(exp(x) - exp(y))."""
    return logsumexp(jnp.stack([x, y]), b=jnp.stack([jnp.ones_like(x), -jnp.ones_like(y)]), axis=0)


def _log_gauss_mass(a, b):
    """log(Phi(b) - Phi(a)), from the tail nearer zero's side of each case."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail, b_tail = jnp.where(right, -b, a), jnp.where(right, -a, b)
    tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    return jnp.where(central, jnp.log1p(-ndtr(a) - ndtr(-b)), tail)


def logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    value = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    value = jnp.where((z < a) | (z > b), -np.inf, value)
    return jnp.where(a >= b, np.nan, value)


def pdf(x, a, b, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x = (x - loc) / scale
    mass = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, x) - mass
    log_sf = _log_gauss_mass(x, b) - mass
    # none of the cases (x NaN) gives 0, as in JAX
    out = jnp.where(x >= b, 0.0, jnp.where(x <= a, -np.inf,
                    jnp.where(log_cdf > -0.1, jnp.log1p(-jnp.exp(log_sf)), jnp.where(x > a, log_cdf, 0.0))))
    return jnp.where(a >= b, np.nan, out)


def cdf(x, a, b, loc=0, scale=1):
    return jnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    return jnp.exp(logsf(x, a, b, loc, scale))
