"""The generalized normal distribution (exponential power) with shape beta."""
from ... import lax
from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, beta):
    x, beta = promote_inexact("gennorm.logpdf", x, beta)
    return jnp.log(0.5 * beta) - lax.lgamma(1 / beta) - jnp.abs(x) ** beta


def cdf(x, beta):
    x, beta = promote_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1 + jnp.sign(x) * lax.igamma(1 / beta, jnp.abs(x) ** beta))


def pdf(x, beta):
    return jnp.exp(logpdf(x, beta))
