"""blackjax: 50 HMC and 50 NUTS steps on a 2-d Gaussian, scanned under jit."""
import json

import blackjax
import jax
import jax.numpy as jnp


def logdensity(x):
    return -0.5 * jnp.sum((x - jnp.array([1.0, -1.0])) ** 2 / jnp.array([1.0, 0.5]))


def run(kernel, key, n=50):
    state = kernel.init(jnp.zeros(2))

    def one(state, k):
        state, info = kernel.step(k, state)
        return state, state.position
    _, xs = jax.lax.scan(one, state, jax.random.split(key, n))
    return xs


hmc = blackjax.hmc(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones(2), num_integration_steps=5)
nuts = blackjax.nuts(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones(2))
xs_hmc = jax.jit(lambda k: run(hmc, k))(jax.random.PRNGKey(0))
xs_nuts = jax.jit(lambda k: run(nuts, k))(jax.random.PRNGKey(1))
print(json.dumps({"hmc_mean": xs_hmc.mean(0).tolist(), "hmc_last": xs_hmc[-1].tolist(),
                  "nuts_mean": xs_nuts.mean(0).tolist(), "nuts_last": xs_nuts[-1].tolist()}))
