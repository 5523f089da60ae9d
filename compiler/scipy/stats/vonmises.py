"""The von Mises distribution on the circle."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, kappa):
    x, kappa = promote_inexact("vonmises.logpdf", x, kappa)
    value = kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * lax.bessel_i0e(kappa))
    return jnp.where(kappa > 0, value, np.nan)


def pdf(x, kappa):
    return jnp.exp(logpdf(x, kappa))
