"""The geometric distribution on k = 1, 2, ..."""
import numpy as np

from ... import numpy as jnp
from ..special import xlog1py
from ._util import promote_inexact


def logpmf(k, p, loc=0):
    k, p, loc = promote_inexact("geom.logpmf", k, p, loc)
    x = k - loc
    return jnp.where(x <= 0, -np.inf, xlog1py(x - 1, -p) + jnp.log(p))


def pmf(k, p, loc=0):
    return jnp.exp(logpmf(k, p, loc))
