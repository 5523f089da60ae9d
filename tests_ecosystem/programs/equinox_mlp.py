"""equinox: an eqx.nn.MLP trained with filter_jit/filter_value_and_grad and optax sgd."""
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

key = jax.random.PRNGKey(1)
mkey, xkey = jax.random.split(key)
model = eqx.nn.MLP(in_size=2, out_size=1, width_size=8, depth=2, key=mkey)
x = jax.random.normal(xkey, (16, 2))
y = (x[:, :1] * x[:, 1:]) ** 2
opt = optax.sgd(0.05)
state = opt.init(eqx.filter(model, eqx.is_inexact_array))


@eqx.filter_value_and_grad
def loss(m, x, y):
    return jnp.mean((jax.vmap(m)(x) - y) ** 2)


@eqx.filter_jit
def step(m, s, x, y):
    l, g = loss(m, x, y)
    updates, s = opt.update(g, s)
    return eqx.apply_updates(m, updates), s, l


losses = []
for _ in range(10):
    model, state, l = step(model, state, x, y)
    losses.append(float(l))
print(json.dumps({"losses": losses, "out": jnp.ravel(jax.vmap(model)(x[:4])).tolist()}))
