"""optax: adam on a small MLP regression, 20 steps under jit; prints the losses and final params."""
import json

import jax
import jax.numpy as jnp
import optax

key = jax.random.key(0)
k1, k2, k3 = jax.random.split(key, 3)
x = jax.random.normal(k1, (32, 3))
y = jnp.sin(x.sum(axis=1, keepdims=True))
params = {"w1": jax.random.normal(k2, (3, 8)) * 0.5, "b1": jnp.zeros(8),
          "w2": jax.random.normal(k3, (8, 1)) * 0.5, "b2": jnp.zeros(1)}


def loss_fn(p):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))
state = opt.init(params)


@jax.jit
def step(p, s):
    loss, g = jax.value_and_grad(loss_fn)(p)
    updates, s = opt.update(g, s, p)
    return optax.apply_updates(p, updates), s, loss


losses = []
for _ in range(20):
    params, state, loss = step(params, state)
    losses.append(float(loss))
print(json.dumps({"losses": losses, "w2": jnp.ravel(params["w2"]).tolist()}))
