"""diffrax: an ODE (Tsit5, adaptive steps) and an SDE (Euler, virtual Brownian tree)."""
import json

import diffrax
import jax
import jax.numpy as jnp

ode = diffrax.ODETerm(lambda t, y, args: -args * y)
sol = diffrax.diffeqsolve(ode, diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1, y0=jnp.array([1.0, 2.0]),
                          args=0.7, saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 2.0, 5)),
                          stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8))

brownian = diffrax.VirtualBrownianTree(0.0, 1.0, tol=1e-3, shape=(), key=jax.random.PRNGKey(0))
sde = diffrax.MultiTerm(diffrax.ODETerm(lambda t, y, args: -y),
                        diffrax.ControlTerm(lambda t, y, args: 0.3, brownian))
sde_sol = diffrax.diffeqsolve(sde, diffrax.Euler(), t0=0.0, t1=1.0, dt0=0.05, y0=1.0)
print(json.dumps({"ode": jnp.ravel(sol.ys).tolist(), "sde": jnp.ravel(sde_sol.ys).tolist(),
                  "ode_steps": int(sol.stats["num_steps"])}))
