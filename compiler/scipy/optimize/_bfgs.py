"""BFGS: the inverse-Hessian approximation updated from each step and gradient change."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...transformations.ad import value_and_grad
from ._line_search import line_search


class BFGSResults(NamedTuple):
    converged: object
    failed: object
    k: object
    nfev: object
    ngev: object
    nhev: object
    x_k: object
    f_k: object
    g_k: object
    H_k: object
    old_old_fval: object
    status: object
    line_search_status: object


def _norm(g, ord):
    return jnp.max(jnp.abs(g)) if ord == np.inf else jnp.sum(jnp.abs(g) ** ord) ** (1.0 / ord)


def minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol: float = 1e-5, line_search_maxiter: int = 10):
    """Minimize ``fun`` from ``x0`` (1-D) until the ``norm`` of the gradient is below ``gtol``."""
    if maxiter is None:
        maxiter = np.size(x0) * 200
    d = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    hp = lax.Precision.HIGHEST
    state = BFGSResults(converged=_norm(g_0, norm) < gtol, failed=jnp.array(False), k=jnp.array(0),
                        nfev=jnp.array(1), ngev=jnp.array(1), nhev=jnp.array(0), x_k=x0, f_k=f_0, g_k=g_0,
                        H_k=jnp.eye(d, dtype=x0.dtype), old_old_fval=f_0 + jnp.sqrt(jnp.sum(g_0 * g_0)) / 2,
                        status=jnp.array(0), line_search_status=jnp.array(0))

    def body(state):
        p_k = -jnp.dot(state.H_k, state.g_k, precision=hp)
        ls = line_search(fun, state.x_k, p_k, old_fval=state.f_k, old_old_fval=state.old_old_fval,
                         gfk=state.g_k, maxiter=line_search_maxiter)
        s_k = ls.a_k * p_k
        y_k = ls.g_k - state.g_k
        rho_k = jnp.reciprocal(jnp.dot(y_k, s_k, precision=hp))
        w = jnp.eye(d, dtype=rho_k.dtype) - rho_k * (s_k[:, None] * y_k[None, :])
        h_next = jnp.einsum("ij,jk,lk", w, state.H_k, w, precision=hp) + rho_k * s_k[:, None] * s_k[None, :]
        h_next = jnp.where(jnp.isfinite(rho_k), h_next, state.H_k)
        return state._replace(nfev=state.nfev + ls.nfev, ngev=state.ngev + ls.ngev, failed=ls.failed,
                              line_search_status=ls.status, converged=_norm(ls.g_k, norm) < gtol,
                              k=state.k + 1, x_k=state.x_k + s_k, f_k=ls.f_k, g_k=ls.g_k, H_k=h_next,
                              old_old_fval=state.f_k)

    state = lax.while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), body, state)
    status = jnp.where(state.converged, 0, jnp.where(state.k == maxiter, 1,
                                                     jnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status)
