"""More of jax.nn's elementwise activations and reductions: glu, mish, squareplus,
sparse_plus, sparse_sigmoid, log1mexp, logmeanexp, identity, tanh.

Each follows JAX's formula (so values and derivatives agree at the kinks:
``sparse_plus``'s branches are selected with JAX's closed/open boundaries).
"""
from __future__ import annotations

import numpy as np

from jaxprc import numpy as jnp
from jaxprc.api import jit
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc.numpy import tanh  # noqa: F401 (jax.nn.tanh is jax.numpy.tanh)
from jaxprc.numpy._util import aval_of

from .functions import logsumexp, sigmoid, softplus

__all__ = ["glu", "mish", "squareplus", "sparse_plus", "sparse_sigmoid", "log1mexp", "logmeanexp",
           "identity", "tanh"]


def identity(x):
    """``x`` as an array (the identity activation)."""
    return jnp.asarray(x)


def glu(x, axis: int = -1):
    """Gated linear unit: the first half of ``x`` along ``axis`` times the sigmoid of the second."""
    x = jnp.asarray(x)
    size = aval_of(x).shape[axis]
    if size % 2:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, got {size}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


# mish and squareplus are jitted as in JAX: a jit call transposes as one unit, so the cotangents
# of its inner uses of x are summed before the outer ones, in JAX's order (second derivatives
# then agree bit for bit).
@jit
def mish(x):
    """``x * tanh(softplus(x))``."""
    x = jnp.asarray(x)
    return x * jnp.tanh(softplus(x))


@jit
def squareplus(x, b=4):
    """``(x + sqrt(x^2 + b)) / 2``, a smooth ReLU."""
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def sparse_plus(x):
    """0 for ``x <= -1``, ``(x + 1)^2 / 4`` on (-1, 1), ``x`` for ``x >= 1``."""
    x = jnp.asarray(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x):
    """``clip((x + 1) / 2, 0, 1)``, the derivative of ``sparse_plus``."""
    return 0.5 * jnp.clip(jnp.asarray(x) + 1.0, 0.0, 2.0)


@custom_jvp
def log1mexp(x):
    """``log(1 - exp(-x))`` without cancellation (expm1 below log 2, log1p above)."""
    x = jnp.asarray(x)
    return jnp.where(x < np.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """``logsumexp(x) - log(n)``, ``n`` the number of (``where``-selected) elements reduced."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    dtype = aval_of(lse).dtype
    if where is None:
        shape = aval_of(x).shape
        axes = range(len(shape)) if axis is None else np.atleast_1d(axis)
        count = jnp.asarray(np.prod([shape[a] for a in axes], dtype=np.int64), dtype=dtype)
    else:
        count = jnp.sum(jnp.broadcast_to(where, aval_of(x).shape), axis, dtype=dtype, keepdims=keepdims)
    return lse - jnp.log(count)
