"""numpyro: NUTS (a short chain: 10 warmup, 10 samples) and SVI (Adam, normal guide, 200 steps) on a
small regression. NUTS is chaotic in the float rounding of its warmup: jaxprc and JAX agree to
~1e-5 over a short chain, and longer chains drift apart by rounding alone."""
import json

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal

x = jnp.linspace(-1.0, 1.0, 20)
y = 0.5 + 2.0 * x + 0.1 * jnp.sin(7.0 * x)


def model(x, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(a + b * x, sigma), obs=y)


mcmc = MCMC(NUTS(model), num_warmup=10, num_samples=10, progress_bar=False)
mcmc.run(jax.random.PRNGKey(0), x, y)
samples = mcmc.get_samples()

guide = AutoNormal(model)
svi = SVI(model, guide, numpyro.optim.Adam(0.05), Trace_ELBO())
result = svi.run(jax.random.PRNGKey(1), 200, x, y, progress_bar=False)
print(json.dumps({"nuts_mean": [float(samples[k].mean()) for k in ("a", "b", "sigma")],
                  "nuts_last": [float(samples[k][-1]) for k in ("a", "b", "sigma")],
                  "svi_loss": [float(result.losses[0]), float(result.losses[-1])],
                  "svi_loc": [float(result.params["a_auto_loc"]), float(result.params["b_auto_loc"])]}))
