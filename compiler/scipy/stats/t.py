"""Student's t distribution."""
import numpy as np

from ... import lax
from ... import numpy as jnp
from ._util import promote_inexact


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2
    half_df_plus = half_df + 0.5
    normalizer = lax.lgamma(half_df) + jnp.log(scale * scale * np.pi * df) / 2 - lax.lgamma(half_df_plus)
    return -(normalizer + half_df_plus * jnp.log1p(z * z / df))


def pdf(x, df, loc=0, scale=1):
    return jnp.exp(logpdf(x, df, loc, scale))
