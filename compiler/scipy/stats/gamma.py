"""The gamma distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import gammainc, gammaincc, gammaln, xlogy
from ._util import promote_inexact


def logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = jnp.where(ok, (x - loc) / scale, 1)
    return jnp.where(ok, xlogy(a - 1, y) - y - (gammaln(a) + jnp.log(scale)), -np.inf)


def pdf(x, a, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.cdf", x, a, loc, scale)
    return gammainc(a, jnp.clip((x - loc) / scale, 0, np.inf))


def logcdf(x, a, loc=0, scale=1):
    return jnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 0, 1, gammaincc(a, y))


def logsf(x, a, loc=0, scale=1):
    return jnp.log(sf(x, a, loc, scale))
