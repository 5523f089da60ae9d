"""The negative binomial distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import gammaln, xlogy
from ._util import promote_inexact


def logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    return jnp.where(k < loc, -np.inf, log_comb + xlogy(n, p) + xlogy(y, 1 - p))


def pmf(k, n, p, loc=0):
    return jnp.exp(logpmf(k, n, p, loc))
