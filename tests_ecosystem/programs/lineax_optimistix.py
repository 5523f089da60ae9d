"""lineax: linear solves (LU, automatic) and a least squares (QR); optimistix: a root, a minimum and
a Levenberg-Marquardt least squares."""
import json

import jax.numpy as jnp
import lineax as lx
import optimistix as optx

A = jnp.array([[3.0, 1.0, 0.5], [1.0, 4.0, 1.0], [0.2, 1.0, 5.0]])
b = jnp.array([1.0, 2.0, 3.0])
x_lu = lx.linear_solve(lx.MatrixLinearOperator(A), b, solver=lx.LU()).value
x_auto = lx.linear_solve(lx.MatrixLinearOperator(A), b).value
tall = A[:, :2]
x_qr = lx.linear_solve(lx.MatrixLinearOperator(tall), b, solver=lx.QR()).value
x_lm = optx.least_squares(lambda y, args: tall @ y - b, optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6),
                          jnp.zeros(2)).value

root = optx.root_find(lambda y, args: jnp.tanh(y) - args, optx.Newton(rtol=1e-6, atol=1e-6),
                      jnp.array([0.1, 0.2]), args=jnp.array([0.3, -0.5])).value
argmin = optx.minimise(lambda y, args: jnp.sum((y - args) ** 2) + jnp.sum(y ** 4),
                       optx.BFGS(rtol=1e-6, atol=1e-6), jnp.zeros(2), args=jnp.array([1.0, -2.0])).value
print(json.dumps({"lu": x_lu.tolist(), "auto": x_auto.tolist(), "qr": x_qr.tolist(), "lm": x_lm.tolist(),
                  "root": root.tolist(),
                  "argmin": argmin.tolist()}))
