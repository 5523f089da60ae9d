"""Functions to try `jaxprc trace` on.

    jaxprc trace examples/model.py:loss --args 'f32[8,4], f32[8]' --transform grad --print-after-all
    jaxprc trace examples/model.py:predict --args-expr "({'w': T('f32[4,2]'), 'b': T('f32[2]')}, T('f32[8,4]'))"
    jaxprc trace examples/model.py:clipped_norm --args 'f32[5]' --transform grad --emit stablehlo
    jaxprc trace examples/model.py:softplus_loss --args 'f32[8,4], f32[8]' --transform grad --print-after-all

The .jaxpr files beside this one were written by `jaxprc trace` from these functions.
"""
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.custom_derivatives import custom_jvp


def loss(w, x):
    """A one-layer network's squared activation: w f32[n,k], x f32[n] -> f32[]."""
    h = jnp.tanh(x @ w)
    return jnp.sum(h ** 2)


def predict(params, x):
    """A dense layer with its parameters in a dict (a pytree argument)."""
    return jnp.tanh(x @ params["w"] + params["b"])


def clipped_norm(x):
    """The norm of x, growing only logarithmically past 1 (a cond: a sub-jaxpr per branch)."""
    norm = jnp.sqrt(jnp.sum(x * x))
    return lax.cond(norm > 1.0, lambda n: 1.0 + jnp.log(n), lambda n: n, norm)


@custom_jvp
def softplus(x):
    """log(1 + e^x), with a derivative rule of its own: the sigmoid."""
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + jnp.exp(-x))


def softplus_loss(w, x):
    """Like loss, with softplus (a custom_jvp_call_jaxpr equation) for tanh."""
    return jnp.sum(softplus(x @ w))
