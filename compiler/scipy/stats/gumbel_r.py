"""The right-skewed Gumbel distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import xlogy
from ._util import promote_inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(scale > 0, xlogy(-1, scale) - (z + jnp.exp(-z)), np.nan)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.logcdf", x, loc, scale)
    return jnp.where(scale > 0, -jnp.exp(-((x - loc) / scale)), np.nan)


def cdf(x, loc=0, scale=1):
    return jnp.exp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_inexact("gumbel_r.ppf", p, loc, scale)
    return jnp.where((p > 0) & (p < 1), loc - scale * jnp.log(xlogy(-1, p)), np.nan)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.sf", x, loc, scale)
    return jnp.where(scale > 0, 1 - jnp.exp(-jnp.exp((loc - x) / scale)), np.nan)


def logsf(x, loc=0, scale=1):
    """log(1 - exp(-exp(-z))), by log1mexp: log(-expm1(-u)) for small u, log1p(-exp(-u)) beyond."""
    x, loc, scale = promote_inexact("gumbel_r.logsf", x, loc, scale)
    u = jnp.exp((loc - x) / scale)
    log1mexp = jnp.where(u < float(np.log(2)), jnp.log(-jnp.expm1(-u)), jnp.log1p(-jnp.exp(-u)))
    return jnp.where(scale > 0, log1mexp, np.nan)
