"""The binomial distribution."""
import numpy as np

from ... import numpy as jnp
from ..special import gammaln, xlog1py, xlogy
from ._util import promote_inexact


def logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear = xlogy(y, p) + xlog1py(n - y, -p)
    log_probs = jnp.where(((y == 0) & (n == 0)) | (log_linear == 0), 0.0, log_comb + log_linear)
    return jnp.where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def pmf(k, n, p, loc=0):
    return jnp.exp(logpmf(k, n, p, loc))
