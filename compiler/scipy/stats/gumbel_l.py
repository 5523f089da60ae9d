"""The left-skewed Gumbel distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import xlog1py, xlogy
from ._util import promote_inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(scale > 0, xlogy(-1, scale) + (z - jnp.exp(z)), np.nan)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(scale > 0, jnp.log(-jnp.expm1(-jnp.exp(z))), np.nan)


def cdf(x, loc=0, scale=1):
    return jnp.exp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_inexact("gumbel_l.ppf", p, loc, scale)
    return jnp.where((p > 0) & (p < 1), loc + scale * jnp.log(xlog1py(-1, -p)), np.nan)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logsf", x, loc, scale)
    return jnp.where(scale > 0, -jnp.exp((x - loc) / scale), np.nan)


def sf(x, loc=0, scale=1):
    return jnp.exp(logsf(x, loc, scale))
