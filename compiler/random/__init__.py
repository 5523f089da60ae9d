"""``jaxprc.random``: JAX's ``jax.random``, everything random in one package.

- ``prng``: the PRNG implementations (threefry2x32, rbg, unsafe_rbg, user-defined), typed and raw
  keys, and the basic draws (bits, uniform, normal, randint, permutation, choice, ...);
- ``distributions``: the distributions built on those draws (gamma, beta, poisson, binomial, ...),
  and the ``random_gamma`` primitive their gamma draws bind (as ``jax.random.random_gamma_p``).

XLA's own generators (``rng_bit_generator``, ``rng_uniform``) are ``jax.lax`` primitives and stay
in their family, ``jaxprc.lax`` (``compiler/lax/rng.py``); so does ``random_gamma_grad``
(``compiler/lax/special.py``), an elementwise special function.
"""
import functools
import inspect

from .prng import *  # noqa: F401,F403
from .prng import (KEY_DTYPE, KeyArrayType, PRNGImpl, PRNGKeyDType, define_prng_impl, prngs,  # noqa: F401
                   rbg_prng_impl, register_prng, threefry_prng_impl, unsafe_rbg_prng_impl)
from .prng import __all__ as _prng_all
from .distributions import *  # noqa: F401,F403
from .distributions import __all__ as _distributions_all

__all__ = [*_prng_all, *_distributions_all]


# Every sampler takes out_sharding= (JAX 0.10): the same draws, laid out as it says.
def _takes_out_sharding(sampler):
    from ..lax.sharding_constraint import out_sharding_of

    @functools.wraps(sampler)
    def laid_out(*args, out_sharding=None, **kwargs):
        return out_sharding_of(sampler(*args, **kwargs), out_sharding, sampler.__name__)
    signature = inspect.signature(sampler)
    laid_out.__signature__ = signature.replace(parameters=[
        *signature.parameters.values(), inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return laid_out


for _name in ("ball", "bernoulli", "beta", "bits", "categorical", "cauchy", "chisquare", "dirichlet", "exponential",
              "f", "gamma", "generalized_normal", "geometric", "gumbel", "laplace", "loggamma", "logistic", "lognormal",
              "maxwell", "multivariate_normal", "normal", "orthogonal", "pareto", "permutation", "poisson",
              "rademacher", "randint", "rayleigh", "t", "triangular", "truncated_normal", "uniform", "wald"):
    globals()[_name] = _takes_out_sharding(globals()[_name])
del _name
