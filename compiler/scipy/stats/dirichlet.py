"""The Dirichlet distribution; x's first axis runs over the categories (K or K - 1 of them)."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ._util import promote_dtypes_inexact
from ..special import gammaln, xlogy


def _is_simplex(x):
    return jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)


def logpdf(x, alpha):
    x, alpha = promote_dtypes_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one entry fewer; "
                         f"got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, 1 - jnp.sum(x, 0, keepdims=True)], axis=0)
    normalizer = jnp.sum(gammaln(alpha)) - gammaln(jnp.sum(alpha))
    if x.ndim > 1:
        alpha = lax.broadcast_in_dim(alpha, alpha.shape + (1,) * (x.ndim - 1), (0,))
    log_probs = jnp.sum(xlogy(alpha - 1, x), axis=0) - normalizer
    return jnp.where(_is_simplex(x), log_probs, -np.inf)


def pdf(x, alpha):
    return jnp.exp(logpdf(x, alpha))
