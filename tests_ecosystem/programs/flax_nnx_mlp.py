"""flax.nnx: a two-layer Linear MLP, an nnx.Optimizer (adam) and 10 steps under nnx.jit; then a
layer whose variables are array refs (jax.new_ref), updated in place inside jax.jit."""
import json

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(4, 16, rngs=rngs)
        self.out = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.hidden(x)))


model = MLP(nnx.Rngs(1))
x = jax.random.normal(jax.random.PRNGKey(0), (8, 4))
y = jnp.cos(x[:, :1])
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def step(model, optimizer):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


losses = [float(step(model, optimizer)) for _ in range(10)]

with nnx.var_defaults(ref=True):
    layer = nnx.Linear(4, 2, rngs=nnx.Rngs(2))


@jax.jit
def sgd_step(layer):          # the refs are arguments: jit threads their values and writes them back
    g = jax.grad(lambda k: jnp.sum(jnp.tanh(x @ k + layer.bias[...])))(layer.kernel[...])
    layer.kernel[...] = layer.kernel[...] - 0.1 * g
    return jnp.sum(layer(x))


ref_sums = [float(sgd_step(layer)) for _ in range(3)]
print(json.dumps({"losses": losses, "out": jnp.ravel(model(x)).tolist(), "ref_sums": ref_sums,
                  "kernel": jnp.ravel(layer.kernel[...]).tolist()}))
