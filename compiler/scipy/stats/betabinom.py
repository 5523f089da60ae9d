"""The beta-binomial distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import betaln
from ._util import promote_inexact


def logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = promote_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = jnp.floor(k) - loc
    log_comb = -(jnp.log1p(n) + betaln(n - y + 1, y + 1))
    log_probs = log_comb + betaln(y + a, n - y + b) - betaln(a, b)
    log_probs = jnp.where((y == 0) & (n == 0), 0.0, log_probs)
    log_probs = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def pmf(k, n, a, b, loc=0):
    return jnp.exp(logpmf(k, n, a, b, loc))
