"""The logistic distribution."""
from ... import numpy as jnp
from ..special import expit, logit
from ._util import promote_inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.logpdf", x, loc, scale)
    half = (x - loc) / scale / 2
    return -2 * jnp.logaddexp(half, -half) - jnp.log(scale)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def ppf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.ppf", x, loc, scale)
    return logit(x) * scale + loc


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.sf", x, loc, scale)
    return expit(-((x - loc) / scale))


def isf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.isf", x, loc, scale)
    return -logit(x) * scale + loc


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.cdf", x, loc, scale)
    return expit((x - loc) / scale)
