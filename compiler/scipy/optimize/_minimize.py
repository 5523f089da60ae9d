"""``minimize`` by method name, results as scipy's OptimizeResult fields."""
from __future__ import annotations

from typing import NamedTuple

from ... import numpy as jnp
from ._bfgs import minimize_bfgs
from ._lbfgs import minimize_lbfgs

LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


class OptimizeResults(NamedTuple):
    """x: the solution; success; status (0 converged, 1 max iterations, 2+ line search failed);
    fun, jac: value and gradient at x; hess_inv; nfev, njev: evaluations; nit: iterations."""
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


def minimize(fun, x0, args: tuple = (), *, method: str, tol=None, options=None) -> OptimizeResults:
    """Minimize ``fun(x, *args)`` from the 1-D ``x0``; ``method`` is "BFGS" (``options`` go to it:
    maxiter, norm, gtol, line_search_maxiter) or JAX's experimental L-BFGS, named
    "l-bfgs-experimental-do-not-rely-on-this" (options maxiter, norm, maxcor, ftol, gtol, maxfun,
    maxgrad, maxls; no hess_inv). ``tol`` is accepted and unused, as in JAX."""
    options = {} if options is None else options
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")
    if method.lower() == LBFGS:
        results = minimize_lbfgs(lambda x: fun(x, *args), x0, **options)
        return OptimizeResults(x=results.x_k, success=results.converged & jnp.logical_not(results.failed),
                               status=results.status, fun=results.f_k, jac=results.g_k, hess_inv=None,
                               nfev=results.nfev, njev=results.ngev, nit=results.k)
    if method.lower() != "bfgs":
        raise ValueError(f"Method {method} not recognized")
    results = minimize_bfgs(lambda x: fun(x, *args), x0, **options)
    return OptimizeResults(x=results.x_k, success=results.converged & jnp.logical_not(results.failed),
                           status=results.status, fun=results.f_k, jac=results.g_k, hess_inv=results.H_k,
                           nfev=results.nfev, njev=results.ngev, nit=results.k)
