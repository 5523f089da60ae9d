"""``jaxprc.random``: JAX's ``jax.random``, everything random in one package.

- ``prng``: the PRNG implementations (threefry2x32, rbg, unsafe_rbg, user-defined), typed and raw
  keys, and the basic draws (bits, uniform, normal, randint, permutation, choice, ...);
- ``distributions``: the distributions built on those draws (gamma, beta, poisson, binomial, ...),
  and the ``random_gamma`` primitive their gamma draws bind (as ``jax.random.random_gamma_p``).

XLA's own generators (``rng_bit_generator``, ``rng_uniform``) are ``jax.lax`` primitives and stay
in their family, ``jaxprc.lax`` (``compiler/lax/rng.py``); so does ``random_gamma_grad``
(``compiler/lax/special.py``), an elementwise special function.
"""
from .prng import *  # noqa: F401,F403
from .prng import (KEY_DTYPE, KeyArrayType, PRNGImpl, PRNGKeyDType, define_prng_impl, prngs,  # noqa: F401
                   rbg_prng_impl, register_prng, threefry_prng_impl, unsafe_rbg_prng_impl)
from .prng import __all__ as _prng_all
from .distributions import *  # noqa: F401,F403
from .distributions import __all__ as _distributions_all

__all__ = [*_prng_all, *_distributions_all]
