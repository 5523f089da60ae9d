"""Functions to try `jaxprc trace` on.

    jaxprc trace examples/model.py:loss --args 'f32[8,4], f32[8]' --transform grad --print-after-all
    jaxprc trace examples/model.py:predict --args-expr "({'w': T('f32[4,2]'), 'b': T('f32[2]')}, T('f32[8,4]'))"
    jaxprc trace examples/model.py:clipped_norm --args 'f32[5]' --transform grad --emit stablehlo
"""
import jaxprc.numpy as jnp
from jaxprc import lax


def loss(w, x):
    """A one-layer network's squared activation: w f32[n,k], x f32[n] -> f32[]."""
    h = jnp.tanh(x @ w)
    return jnp.sum(h ** 2)


def predict(params, x):
    """A dense layer with its parameters in a dict (a pytree argument)."""
    return jnp.tanh(x @ params["w"] + params["b"])


def clipped_norm(x):
    """The norm of x, scaled down to at most 1 (a cond: a sub-jaxpr per branch)."""
    norm = jnp.sqrt(jnp.sum(x * x))
    return lax.cond(norm > 1.0, lambda n: n / n, lambda n: n, norm)
