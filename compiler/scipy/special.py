"""scipy.special functions whose derivatives are custom rules, as the design document's
canonical library users: the rules are simpler and more stable than differentiating the
definitions."""
from __future__ import annotations

from .. import numpy as jnp
from ..custom_derivatives import custom_jvp
from .. import lax

__all__ = ["expit", "logit"]


def _inexact(x):
    """Integers and booleans promote to the default float, as in JAX."""
    return jnp.asarray(x, dtype=jnp.result_type(x, 1.0))


@custom_jvp
def logit(x):
    """``log(x / (1 - x))``, the inverse of expit."""
    x = _inexact(x)
    return jnp.log(x / (1 - x))


# d/dx logit = 1 / (x (1 - x)): no quotient rule through log
logit.defjvps(lambda t, ans, x: t / (_inexact(x) * (1 - _inexact(x))))


@custom_jvp
def expit(x):
    """``1 / (1 + exp(-x))`` (the logistic function), stable for large |x|."""
    return lax.logistic(_inexact(x))


# d/dx expit = expit (1 - expit), from the answer: no overflowing exp(-x) in the derivative
expit.defjvps(lambda t, ans, x: t * ans * (1 - ans))
