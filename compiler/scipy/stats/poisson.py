"""The Poisson distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import entr, gammaincc, gammaln, xlogy
from ._util import promote_inexact


def logpmf(k, mu, loc=0):
    k, mu, loc = promote_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -np.inf, log_probs)


def pmf(k, mu, loc=0):
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    k, mu, loc = promote_inexact("poisson.cdf", k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, 0.0, gammaincc(jnp.floor(1 + x), mu))


def _entropy_by_sum(mu, max_k, upper):
    """-sum p log p over k < min(max_k, upper)."""
    k = jnp.arange(max_k, dtype=mu.dtype)[:, None]
    probs = jnp.where(k < upper[None, :], pmf(k, mu, 0), 0.0)
    return jnp.sum(entr(probs), axis=0)


def entropy(mu, loc=0):
    """The entropy: a direct sum for mu < 100, the asymptotic expansion beyond; loc shifts
    nothing (only its shape broadcasts)."""
    mu, loc = promote_inexact("poisson.entropy", mu, loc)
    flat = jnp.ravel(mu)
    small = _entropy_by_sum(flat, 35, jnp.ceil(flat + 20))
    medium = _entropy_by_sum(flat, 250, jnp.ceil(flat + 10 * jnp.sqrt(flat) + 20))
    large = 0.5 * jnp.log(2 * np.pi * np.e * flat) - 1.0 / (12 * flat)
    out = jnp.where(flat == 0, 0.0, jnp.where(flat < 10, small, jnp.where(flat < 100, medium, large)))
    return jnp.reshape(out, jnp.shape(mu))
