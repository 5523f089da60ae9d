"""The uniform distribution on [loc, loc + scale]."""
import numpy as np

from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("uniform.logpdf", x, loc, scale)
    return jnp.where((x > loc + scale) | (x < loc), -np.inf, -jnp.log(scale))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("uniform.cdf", x, loc, scale)
    inside = (x >= loc) & (x <= loc + scale)
    zero, one = jnp.array(0, x.dtype), jnp.array(1, x.dtype)     # strong: JAX's cdf is never weakly typed
    return jnp.where(x < loc, zero, jnp.where(x > loc + scale, one, jnp.where(inside, (x - loc) / scale, zero)))


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_inexact("uniform.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
