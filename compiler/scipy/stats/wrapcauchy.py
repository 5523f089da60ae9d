"""The wrapped Cauchy distribution on [0, 2 pi]."""
import numpy as np

from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, c):
    x, c = promote_inexact("wrapcauchy.logpdf", x, c)
    value = jnp.log(1 - c * c) - jnp.log(2 * np.pi) - jnp.log(1 + c * c - 2 * c * jnp.cos(x))
    inside = jnp.where((x >= 0) & (x <= np.pi * 2), value, -np.inf)
    return jnp.where((c > 0) & (c < 1), inside, np.nan)


def pdf(x, c):
    return jnp.exp(logpdf(x, c))
