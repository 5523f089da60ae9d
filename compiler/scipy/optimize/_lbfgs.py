"""L-BFGS (JAX's ``method="l-bfgs-experimental-do-not-rely-on-this"``): the inverse Hessian is
never formed; the search direction comes from the last ``maxcor`` steps and gradient changes by
the two-loop recursion, so memory is linear in the dimension."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...transformations.ad import value_and_grad
from ._bfgs import _norm
from ._line_search import line_search


class LBFGSResults(NamedTuple):
    converged: object
    failed: object
    k: object
    nfev: object
    ngev: object
    x_k: object
    f_k: object
    g_k: object
    s_history: object        # the last maxcor steps, oldest first
    y_history: object        # the last maxcor gradient changes
    rho_history: object      # 1 / <y, s> of each
    gamma: object            # the initial inverse-Hessian scale <s, y> / <y, y> of the last pair
    status: object           # 0 converged, 1 maxiter, 2 maxfun, 3 maxgrad, 4 f stalled (ftol), 5 line search failed
    ls_status: object


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _direction(state: LBFGSResults):
    """-H g for the implicit inverse Hessian of the stored pairs (newest first, then back)."""
    memory = state.rho_history.shape[0]
    used = jnp.minimum(state.k, memory)
    real = state.rho_history.dtype

    def newest_first(j, carry):
        q, alphas = carry
        i = memory - 1 - j
        alpha = state.rho_history[i] * _dot(jnp.conj(state.s_history[i]), q).real.astype(real)
        return q - alpha * jnp.conj(state.y_history[i]), alphas.at[i].set(alpha)

    q, alphas = lax.fori_loop(0, used, newest_first, (-jnp.conj(state.g_k), jnp.zeros_like(state.rho_history)))

    def oldest_first(j, q):
        i = memory - used + j
        beta = state.rho_history[i] * _dot(state.y_history[i], q).real.astype(real)
        return q + (alphas[i] - beta) * state.s_history[i]

    return lax.fori_loop(0, used, oldest_first, state.gamma * q)


def _pushed(history, new):
    """``history`` with its oldest entry dropped and ``new`` appended."""
    return jnp.roll(history, -1, axis=0).at[-1].set(new)


def minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor: int = 10, ftol: float = 2.220446049250313e-09,
                   gtol: float = 1e-05, maxfun=None, maxgrad=None, maxls: int = 20) -> LBFGSResults:
    """Minimize ``fun`` from ``x0`` (1-D) until the ``norm`` of the gradient is below ``gtol``, or a
    limit (iterations, evaluations, an ``ftol`` decrease, a failed line search) stops it."""
    d = x0.shape[0]
    dtype = jnp.result_type(x0)
    limits = [np.inf if v is None else v for v in (maxiter, maxfun, maxgrad)]
    f_0, g_0 = value_and_grad(fun)(x0)
    init = LBFGSResults(
        converged=jnp.array(False), failed=jnp.array(False), k=jnp.array(0), nfev=jnp.array(1),
        ngev=jnp.array(1), x_k=x0, f_k=f_0, g_k=g_0, s_history=jnp.zeros((maxcor, d), dtype),
        y_history=jnp.zeros((maxcor, d), dtype), rho_history=jnp.zeros((maxcor,), dtype),
        gamma=jnp.array(1.0, dtype), status=jnp.array(0), ls_status=jnp.array(0))

    def step(state: LBFGSResults) -> LBFGSResults:
        p = _direction(state)
        ls = line_search(fun, state.x_k, p, old_fval=state.f_k, gfk=state.g_k, maxiter=maxls)
        s = ls.a_k.astype(p.dtype) * p
        y = ls.g_k - state.g_k
        sy = jnp.real(_dot(y, s))
        # the first limit that holds names the stop (later checks override earlier ones)
        status = jnp.array(0)
        for code, stopped in ((4, state.f_k - ls.f_k < ftol), (3, state.ngev >= limits[2]),
                              (2, state.nfev >= limits[1]), (1, state.k >= limits[0]), (5, ls.failed)):
            status = jnp.where(stopped, code, status)
        converged = _norm(ls.g_k, norm) < gtol
        return state._replace(
            converged=converged, failed=(status > 0) & ~converged, k=state.k + 1,
            nfev=state.nfev + ls.nfev, ngev=state.ngev + ls.ngev, x_k=(state.x_k + s).astype(state.x_k.dtype),
            f_k=ls.f_k.astype(state.f_k.dtype), g_k=ls.g_k.astype(state.g_k.dtype),
            s_history=_pushed(state.s_history, s), y_history=_pushed(state.y_history, y),
            rho_history=_pushed(state.rho_history, jnp.reciprocal(sy).astype(y.dtype)),
            gamma=(sy / jnp.real(_dot(jnp.conj(y), y))).astype(state.g_k.dtype),
            status=jnp.where(converged, 0, status), ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, step, init)
