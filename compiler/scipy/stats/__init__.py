"""jax.scipy.stats: a module per distribution (``norm.logpdf``, ``gamma.cdf``, ...) with JAX's
functions and edges, plus ``mode``, ``rankdata``, ``sem`` and ``gaussian_kde``."""
from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma,  # noqa: F401
               gennorm, geom, gumbel_l, gumbel_r, laplace, logistic, multinomial, multivariate_normal,
               nbinom, norm, pareto, poisson, t, truncnorm, uniform, vonmises, wrapcauchy)
from ._core import ModeResult, mode, rankdata, sem  # noqa: F401
from .kde import gaussian_kde  # noqa: F401
