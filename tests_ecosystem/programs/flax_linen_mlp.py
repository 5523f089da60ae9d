"""flax.linen: a two-layer Dense MLP, init and 10 adam steps."""
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(16)(x))
        return nn.Dense(1)(x)


model = MLP()
x = jax.random.normal(jax.random.PRNGKey(0), (8, 4))
y = jnp.cos(x[:, :1])
params = model.init(jax.random.PRNGKey(1), x)
opt = optax.adam(1e-2)
state = opt.init(params)


@jax.jit
def step(params, state):
    loss, g = jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)
    updates, state = opt.update(g, state)
    return optax.apply_updates(params, updates), state, loss


losses = []
for _ in range(10):
    params, state, loss = step(params, state)
    losses.append(float(loss))
print(json.dumps({"losses": losses, "out": jnp.ravel(model.apply(params, x)).tolist()}))
