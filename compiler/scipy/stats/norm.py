"""The normal distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import log_ndtr, ndtr, ndtri
from ._util import promote_inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logpdf", x, loc, scale)
    scale_sq = jnp.square(scale)
    return (jnp.log(2 * np.pi * scale_sq) + jnp.square(x - loc) / scale_sq) / -2


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.cdf", x, loc, scale)
    return ndtr((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logcdf", x, loc, scale)
    return log_ndtr((x - loc) / scale)


def ppf(q, loc=0, scale=1):
    return jnp.asarray(ndtri(q) * scale + loc, float)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def isf(q, loc=0, scale=1):
    return ppf(1 - jnp.asarray(q), loc, scale)
