"""chex: assertions and dataclasses under jit; jaxopt: LBFGS on a logistic regression."""
import json

import chex
import jax
import jax.numpy as jnp
import jaxopt


@chex.dataclass
class Params:
    w: chex.Array
    b: chex.Array


@jax.jit
def predict(p: Params, x):
    chex.assert_rank(x, 2)
    chex.assert_shape(p.w, (x.shape[1],))
    return jax.nn.sigmoid(x @ p.w + p.b)


x = jax.random.normal(jax.random.PRNGKey(0), (40, 3))
y = (x @ jnp.array([1.0, -2.0, 0.5]) > 0).astype(jnp.float32)


def loss(p: Params):
    q = predict(p, x)
    return -jnp.mean(y * jnp.log(q + 1e-7) + (1 - y) * jnp.log(1 - q + 1e-7)) + 1e-2 * jnp.sum(p.w ** 2)


chex.assert_trees_all_equal_shapes(Params(w=jnp.zeros(3), b=jnp.zeros(())), Params(w=jnp.ones(3), b=jnp.ones(())))
sol = jaxopt.LBFGS(fun=loss, maxiter=50).run(Params(w=jnp.zeros(3), b=jnp.zeros(())))
print(json.dumps({"w": sol.params.w.tolist(), "b": float(sol.params.b), "loss": float(loss(sol.params)),
                  "iters": int(sol.state.iter_num)}))
