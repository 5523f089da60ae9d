"""The chi-squared distribution."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ..special import gammainc, gammaincc
from ._util import promote_inexact


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * jnp.log(y) - y / 2
    normalizer = -(lax.lgamma(half_df) + float(np.log(2)) * df / 2)
    return jnp.where(x < loc, -np.inf, normalizer - jnp.log(scale) + kernel)


def pdf(x, df, loc=0, scale=1):
    return jnp.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("chi2.cdf", x, df, loc, scale)
    return gammainc(df / 2, jnp.clip((x - loc) / (scale * 2), 0, np.inf))


def logcdf(x, df, loc=0, scale=1):
    return jnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("chi2.sf", x, df, loc, scale)
    return gammaincc(df / 2, jnp.clip((x - loc) / (scale * 2), 0, np.inf))


def logsf(x, df, loc=0, scale=1):
    return jnp.log(sf(x, df, loc, scale))
