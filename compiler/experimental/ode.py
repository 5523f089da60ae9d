"""odeint: adaptive Dormand–Prince (RK45) integration with an adjoint-method custom VJP.

The design document's canonical power user of custom_vjp. The forward pass
steps an embedded 5(4) Runge–Kutta pair inside ``lax.while_loop`` (one loop
per output time, driven by ``lax.scan``), accepting a step when its error
estimate is within tolerance and reading outputs off the step's 4th-order
interpolant. The backward pass solves the adjoint system backwards in time
with odeint itself, giving cotangents for ``y0``, the times ``t`` and the
extra ``args``. Results follow ``jax.experimental.ode.odeint``.
"""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from .. import numpy as jnp
from ..ad import vjp
from ..custom_derivatives import closure_convert, custom_vjp
from ..lax.control_flow import fori_loop, scan, while_loop
from ..ir.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = ["odeint"]

# Dormand–Prince tableau: nodes, stage weights, 5th-order solution, error (5th - 4th order)
_NODES = [1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0.]
_STAGES = [[1 / 5, 0, 0, 0, 0, 0, 0],
           [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
           [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
           [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
           [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
           [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]]
_SOLUTION = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]
_ERROR = [35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60]
# weights giving y at the step's midpoint, for the interpolating polynomial
_MIDPOINT = [6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2,
             -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
             -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2]


def _const(values, dtype):
    return jnp.asarray(np.asarray(values, dtype=dtype))


def _rk_step(func, y0, f0, t0, dt):
    """One Dormand–Prince step: (y1, f(y1), error estimate, the 7 stage derivatives)."""
    dtype = f0.dtype
    nodes, stages = _const(_NODES, dtype), _const(_STAGES, dtype)
    h = dt.astype(dtype)

    def stage(i, k):
        y = y0 + h * jnp.dot(stages[i - 1, :], k)
        return k.at[i, :].set(func(y, t0 + dt * nodes[i - 1]))
    k = jnp.zeros((7, f0.shape[0]), dtype).at[0, :].set(f0)
    k = fori_loop(1, 7, stage, k)
    y1 = h * jnp.dot(_const(_SOLUTION, dtype), k) + y0
    return y1, k[-1], h * jnp.dot(_const(_ERROR, dtype), k), k


def _interpolant(y0, y1, k, dt):
    """Coefficients (highest power first) of the quartic through the step, in relative time."""
    h = dt.astype(y0.dtype)
    y_mid = y0 + h * jnp.dot(_const(_MIDPOINT, y0.dtype), k)
    dy0, dy1 = h * k[0], h * k[-1]
    a = -2. * dy0 + 2. * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid
    b = 5. * dy0 - 3. * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid
    c = -4. * dy0 + dy1 - 11. * y0 - 5. * y1 + 16. * y_mid
    return jnp.stack([a, b, c, dy0, y0])


def _polyval(coeffs, x):
    out = coeffs[0]
    for i in range(1, coeffs.shape[0]):
        out = out * x + coeffs[i]
    return out


def _error_ratio(error, rtol, atol, y0, y1):
    tolerance = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    scaled = error / tolerance.astype(error.dtype)
    return jnp.sqrt(jnp.mean(jnp.real(scaled * jnp.conj(scaled))))     # real for complex states too


def _next_step_size(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    dfactor = jnp.where(ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0, dt * ifactor, dt * factor)


def _initial_step_size(func, t0, y0, order, rtol, atol, f0):
    """Hairer, Nørsett & Wanner, Solving ODEs I, sec. II.4."""
    scale = (atol + jnp.abs(y0) * rtol).astype(y0.dtype)
    d0, d1 = jnp.linalg.norm(y0 / scale), jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = func(y0 + h0.astype(y0.dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y0`` at ``t[0]``; returns y at every time in
    ``t`` (stacked on a leading axis). ``y0`` may be a pytree; ``t`` must increase. Differentiable
    with respect to ``y0``, ``t`` and ``args`` (by the adjoint method)."""
    for a in tree_leaves(args):
        if not hasattr(a, "dtype") and not isinstance(a, (bool, int, float, complex)):
            raise TypeError(f"odeint: the extra arguments must be arrays or scalars, got {a!r}; close "
                            "over other values in func instead")
    t = jnp.asarray(t)
    converted, consts = closure_convert(func, y0, t[0], *args)
    leaves, tree = tree_flatten(y0)
    leaves = [jnp.asarray(x) for x in leaves]
    shapes, sizes = [x.shape for x in leaves], [int(np.prod(x.shape)) for x in leaves]
    dtype = jnp.result_type(*leaves)

    def unravel(flat):
        parts, start = [], 0
        for shape, size, leaf in zip(shapes, sizes, leaves):
            parts.append(flat[start:start + size].reshape(shape).astype(leaf.dtype))
            start += size
        return tree_unflatten(tree, parts)

    def ravel(tree_value):
        return jnp.concatenate([jnp.ravel(x).astype(dtype) for x in tree_leaves(tree_value)])

    def flat_func(y, t, *args):
        return ravel(converted(unravel(y), t, *args))
    ys = _odeint(flat_func, rtol, atol, mxstep, hmax, ravel(y0), t, *args, *consts)
    return tree_unflatten(tree, [ys[:, start:start + size].reshape((ys.shape[0],) + shape).astype(leaf.dtype)
                                 for start, size, shape, leaf in zip(np.cumsum([0] + sizes[:-1]), sizes,
                                                                     shapes, leaves)])


@partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    f = lambda y, t: func(y, t, *args)

    def to_time(carry, target):
        def more_steps(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def step(state):
            i, y, fy, t, dt, last_t, coeffs = state
            next_y, next_f, error, k = _rk_step(f, y, fy, t, dt)
            ratio = _error_ratio(error, rtol, atol, y, next_y)
            new_coeffs = _interpolant(y, next_y, k, dt)
            next_dt = jnp.clip(_next_step_size(dt, ratio), 0., hmax)
            accepted = [i + 1, next_y, next_f, t + dt, next_dt, t, new_coeffs]
            rejected = [i + 1, y, fy, t, next_dt, last_t, coeffs]
            return [jnp.where(ratio <= 1., a, r) for a, r in zip(accepted, rejected)]
        _, *carry = while_loop(more_steps, step, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        fraction = (target - last_t) / (t - last_t)
        return carry, _polyval(coeffs, fraction.astype(coeffs.dtype))

    f0 = f(y0, ts[0])
    dt = jnp.clip(_initial_step_size(f, ts[0], y0, 4, rtol, atol, f0), 0., hmax)
    init = [y0, f0, ts[0], dt, ts[0], jnp.stack([y0] * 5)]
    _, ys = scan(to_time, init, ts[1:])
    return jnp.concatenate([y0[None], ys])


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, res, g):
    """The adjoint method: integrate (y, a = dL/dy, dL/dt0, dL/dargs) backwards between outputs."""
    ys, ts, args = res

    def augmented(state, minus_t, *args):
        y, y_bar, *_ = state
        y_dot, pullback = vjp(func, y, -minus_t, *args)
        return (-y_dot, *pullback(y_bar))

    def between_outputs(carry, i):
        y_bar, t0_bar, args_bar = carry
        t_bar = jnp.real(jnp.dot(func(ys[i], ts[i], *args), g[i]))     # moving output time i (real)
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(augmented, (ys[i], y_bar, t0_bar, args_bar),
                                            jnp.stack([-ts[i], -ts[i - 1]]), *args,
                                            rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_map(operator.itemgetter(1), (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], jnp.zeros((), ts.dtype), tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = scan(between_outputs, init,
                                                 jnp.arange(ts.shape[0] - 1, 0, -1))
    ts_bar = jnp.concatenate([t0_bar[None], rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)
