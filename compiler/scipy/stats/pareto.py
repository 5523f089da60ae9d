"""The Pareto distribution."""
import numpy as np

from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, -np.inf, -(jnp.log(scale / b) + (b + 1) * jnp.log(z)))


def pdf(x, b, loc=0, scale=1):
    return jnp.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.cdf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, 0.0, 1 - jnp.power(z, -b))


def logcdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logcdf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, -np.inf, jnp.log1p(-jnp.power(z, -b)))


def logsf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logsf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, 0.0, -(b * jnp.log(z)))


def sf(x, b, loc=0, scale=1):
    return jnp.exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote_inexact("pareto.ppf", q, b, loc, scale)
    value = loc + scale * jnp.power(1 - q, -(1 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, value)
