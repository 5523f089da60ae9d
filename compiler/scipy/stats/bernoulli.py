"""The Bernoulli distribution: P(k=1) = p."""
import numpy as np

from ... import numpy as jnp
from ..special import xlog1py, xlogy
from ._util import promote_inexact


def logpmf(k, p, loc=0):
    k, p, loc = promote_inexact("bernoulli.logpmf", k, p, loc)
    x = k - loc
    return jnp.where((x < 0) | (x > 1), -np.inf, xlogy(x, p) + xlog1py(1 - x, -p))


def pmf(k, p, loc=0):
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    k, p = promote_inexact("bernoulli.cdf", k, p)
    invalid = jnp.isnan(k) | jnp.isnan(p) | (p < 0) | (p > 1)
    return jnp.where(invalid, np.nan, jnp.where(k < 0, 0.0, jnp.where(k < 1, 1 - p, 1.0)))


def ppf(q, p):
    q, p = promote_inexact("bernoulli.ppf", q, p)
    invalid = jnp.isnan(q) | jnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    zero, one = jnp.zeros_like(q), jnp.ones_like(q)     # typed as q (strong unless q is weak), as in JAX
    return jnp.where(invalid, np.nan, jnp.where(q <= 1 - p, zero, one))
