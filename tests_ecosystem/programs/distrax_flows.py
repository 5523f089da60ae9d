"""distrax: log-probabilities and samples of a Normal, a tanh-transformed Normal and a diagonal
MVN; the gradient of a log-probability through a bijector."""
import json

import distrax
import jax
import jax.numpy as jnp

normal = distrax.Normal(0.5, 2.0)
flow = distrax.Transformed(distrax.Normal(0.0, 1.0), distrax.Tanh())
mvn = distrax.MultivariateNormalDiag(jnp.array([0.0, 1.0]), jnp.array([1.0, 0.5]))
xs = jnp.array([-0.5, 0.1, 0.7])
print(json.dumps({
    "normal_lp": normal.log_prob(xs).tolist(),
    "normal_sample": normal.sample(seed=jax.random.PRNGKey(0), sample_shape=4).tolist(),
    "flow_lp": flow.log_prob(xs).tolist(),
    "flow_sample": jnp.ravel(flow.sample(seed=jax.random.PRNGKey(1), sample_shape=3)).tolist(),
    "mvn_lp": float(mvn.log_prob(jnp.array([0.3, 0.8]))),
    "flow_grad": jax.grad(lambda x: flow.log_prob(x).sum())(xs).tolist(),
}))
