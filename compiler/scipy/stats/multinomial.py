"""The multinomial distribution; x (counts, last axis) and n must be integers."""
import numpy as np

from ... import numpy as jnp
from ...ir import dtypes as dt
from ..special import gammaln, xlogy
from ._util import promote_inexact


def logpmf(x, n, p):
    p = promote_inexact("multinomial.logpmf", p)
    x, n = jnp.asarray(x), jnp.asarray(n)
    if not (dt.is_int(jnp.result_type(x, n)) or dt.is_unsigned(jnp.result_type(x, n))):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = gammaln(n + 1) + jnp.sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return jnp.where(jnp.equal(jnp.sum(x), n), log_probs, -np.inf)


def pmf(x, n, p):
    return jnp.exp(logpmf(x, n, p))
