"""jaxprc.scipy.sparse.linalg: matrix-free Krylov solvers (``cg``, ``bicgstab``, ``gmres``) with JAX's
semantics, differentiated implicitly through ``lax.custom_linear_solve``.

``A`` (and the preconditioner ``M``) is a function of a pytree shaped like
``b``, or a square matrix. The iteration is a ``while_loop`` stopping at
``|r|^2 <= max(tol^2 |b|^2, atol^2)`` or after ``maxiter`` steps (10 times the
size of b by default); derivatives never go through the loop: the solve is
linear in b, so its tangent and transpose are further solves.
"""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from jaxprc import lax
from jaxprc.array_type import Array
from jaxprc.ir import dtypes as dt
from jaxprc.ir import tree_util as tu
from jaxprc import numpy as jnp
from jaxprc.scipy import linalg as sp_linalg

__all__ = ["cg", "bicgstab", "gmres"]

_dot = partial(jnp.dot, precision=lax.Precision.HIGHEST)
_vdot = partial(jnp.vdot, precision=lax.Precision.HIGHEST)


def _vdot_real_part(x, y):
    """Re(<x, y>) without forming the complex product."""
    result = _vdot(jnp.real(x), jnp.real(y))
    if dt.is_complex(jnp.result_type(x)) or dt.is_complex(jnp.result_type(y)):
        result = result + _vdot(jnp.imag(x), jnp.imag(y))
    return result


def _vdot_real_tree(x, y):
    return sum(tu.tree_leaves(tu.tree_map(_vdot_real_part, x, y)))


def _vdot_tree(x, y):
    return sum(tu.tree_leaves(tu.tree_map(_vdot, x, y)))


def _mul(scalar, tree):
    return tu.tree_map(partial(operator.mul, scalar), tree)


_add = partial(tu.tree_map, operator.add)
_sub = partial(tu.tree_map, operator.sub)


def _identity(x):
    return x


def _normalize_matvec(f):
    """A linear operator as a function: a callable as it is, a square matrix as its product, and
    an operator object (anything with ``@``, a square ``shape`` if it has one) as its ``@``."""
    if callable(f):
        return f
    is_array = isinstance(f, (np.ndarray, Array))
    if not is_array and not hasattr(f, "__matmul__"):
        raise TypeError(f"linear operator must be either a function or ndarray: {f}")
    shape = getattr(f, "shape", None)
    if (is_array or shape is not None) and (len(shape) != 2 or shape[0] != shape[1]):
        raise ValueError(f"linear operator must be a square matrix, but has shape: {shape}")
    return partial(_dot, f) if is_array else partial(operator.matmul, f)



def _cg_solve(A, b, x0, *, maxiter, tol, atol, M):
    """Conjugate gradients (preconditioned by M); the residual test uses r.z when M is the identity."""
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))

    def cond_fun(value):
        _, r, gamma, _, k = value
        rs = jnp.real(gamma) if M is _identity else _vdot_real_tree(r, r)
        return (rs > atol2) & (k < maxiter)

    def body_fun(value):
        x, r, gamma, p, k = value
        Ap = A(p)
        alpha = gamma / _vdot_real_tree(p, Ap).astype(dtype)
        x_ = _add(x, _mul(alpha, p))
        r_ = _sub(r, _mul(alpha, Ap))
        z_ = M(r_)
        gamma_ = _vdot_real_tree(r_, z_).astype(dtype)
        p_ = _add(z_, _mul(gamma_ / gamma, p))
        return x_, r_, gamma_, p_, k + 1

    r0 = _sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = jnp.result_type(*tu.tree_leaves(p0))
    gamma0 = _vdot_real_tree(r0, z0).astype(dtype)
    return lax.while_loop(cond_fun, body_fun, (x0, r0, gamma0, p0, 0))[0]


def _bicgstab_solve(A, b, x0, *, maxiter, tol, atol, M):
    """BiCGSTAB (preconditioned by M); a breakdown (rho, alpha or omega zero) stops the loop."""
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))

    def cond_fun(value):
        _, r, *_, k = value
        return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)

    def body_fun(value):
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_ = _vdot_tree(rhat, r)
        beta = rho_ / rho * alpha / omega
        p_ = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
        phat = M(p_)
        q_ = A(phat)
        alpha_ = rho_ / _vdot_tree(rhat, q_)
        s = _sub(r, _mul(alpha_, q_))
        exit_early = _vdot_real_tree(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega_ = _vdot_tree(t, s) / _vdot_tree(t, t)
        x_ = tu.tree_map(partial(jnp.where, exit_early), _add(x, _mul(alpha_, phat)),
                         _add(x, _add(_mul(alpha_, phat), _mul(omega_, shat))))
        r_ = tu.tree_map(partial(jnp.where, exit_early), s, _sub(s, _mul(omega_, t)))
        k_ = jnp.where((omega_ == 0) | (alpha_ == 0), -11, k + 1)
        k_ = jnp.where(rho_ == 0, -10, k_)
        return x_, r_, rhat, alpha_, omega_, rho_, p_, q_, k_

    r0 = _sub(b, A(x0))
    dtype, _ = dt.promote_types(*((jnp.result_type(x), False) for x in tu.tree_leaves(b)))
    one = lax.convert_element_type(1, dtype)
    return lax.while_loop(cond_fun, body_fun, (x0, r0, r0, one, one, one, r0, r0, 0))[0]


def _shapes(tree):
    return [np.shape(x) for x in tu.tree_leaves(tree)]


def _isolve(solver, A, b, x0, *, tol, atol, maxiter, M, check_symmetric):
    if x0 is None:
        x0 = tu.tree_map(jnp.zeros_like, b)
    b, x0 = tu.tree_map(jnp.asarray, (b, x0))
    if maxiter is None:
        maxiter = 10 * sum(np.size(x) for x in tu.tree_leaves(b))
    A = _normalize_matvec(A)
    M = _identity if M is None else _normalize_matvec(M)
    if tu.tree_structure(x0) != tu.tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: "
                         f"{tu.tree_structure(x0)} vs {tu.tree_structure(b)}")
    if _shapes(x0) != _shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: {_shapes(x0)} vs {_shapes(b)}")
    solve = partial(solver, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # cg assumes A is Hermitian: for real b it is its own transpose
    symmetric = check_symmetric and not any(dt.is_complex(jnp.result_type(x)) for x in tu.tree_leaves(b))
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=symmetric)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b for a Hermitian positive definite A by conjugate gradients; returns
    ``(x, None)`` as JAX does (no convergence information)."""
    return _isolve(_cg_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve A x = b for a general A by BiCGSTAB; returns ``(x, None)`` as JAX does."""
    return _isolve(_bicgstab_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, check_symmetric=False)


# --- GMRES: restarted Arnoldi; each restart projects the solution on a Krylov space ---

def _norm_tree(x):
    return jnp.sqrt(_vdot_real_tree(x, x))


def _tree_dtype(tree):
    return dt.promote_types(*((jnp.result_type(x), False) for x in tu.tree_leaves(tree)))[0]


def _safe_normalize(x, thresh=None):
    """(x / |x|, |x|), both zero when |x| is at most thresh (by default the dtype's eps)."""
    norm = _norm_tree(x)
    dtype = _tree_dtype(x)
    if thresh is None:
        thresh = jnp.finfo(norm.dtype).eps
    thresh = jnp.real(jnp.asarray(thresh).astype(dtype))
    nonzero = norm > thresh
    unit = tu.tree_map(lambda y: jnp.where(nonzero, y / norm.astype(dtype), 0.0), x)
    return unit, jnp.where(nonzero, norm, 0.0)


def _project_on_columns(Q, v):
    """Q^H v for a basis Q whose leaves hold the vectors along their last axis."""
    return sum(tu.tree_leaves(tu.tree_map(lambda X, y: jnp.einsum("...n,...->n", X.conj(), y), Q, v)))


def _gram_schmidt(Q, x, xnorm, max_iterations=2):
    """Orthogonalize x against Q's columns by classical Gram-Schmidt, repeated ("twice is
    enough") while the overlap norm stays below |q|/sqrt(2); returns (q, overlaps)."""
    Q0 = tu.tree_leaves(Q)[0]

    def body(carry):
        k, q, r, _ = carry
        h = _project_on_columns(Q, q)
        q = _sub(q, tu.tree_map(lambda X: _dot(X, h), Q))
        return k + 1, q, r + h, _safe_normalize(q)[1] / np.sqrt(2.0)

    def cond(carry):
        k, _, r, qnorm_scaled = carry
        return (k < max_iterations - 1) & (_safe_normalize(r)[1] < qnorm_scaled)

    # the first pass keeps the scaled norm of x, as JAX's loop does
    k, q, r, _ = body((0, x, jnp.zeros(Q0.shape[-1], Q0.dtype), None))
    _, q, r, _ = lax.while_loop(cond, body, (k, q, r, xnorm / np.sqrt(2.0)))
    return q, r


def _arnoldi_step(k, A, M, V, H):
    """Append the orthonormalized M(A(V[:, k])) to V as column k+1 and its overlaps as row k of H;
    a new vector below eps * its norm means an invariant subspace was found (breakdown)."""
    dtype = _tree_dtype(V)
    v = M(A(tu.tree_map(lambda X: X[..., k], V)))
    _, v_norm0 = _safe_normalize(v)
    v, h = _gram_schmidt(V, v, v_norm0)
    unit, v_norm1 = _safe_normalize(v, thresh=jnp.finfo(dtype).eps * v_norm0)
    V = tu.tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit)
    H = H.at[k, :].set(h.at[k + 1].set(v_norm1.astype(dtype)))
    return V, H, v_norm1 == 0.0


def _rotate(H, i, cs, sn):
    x, y = H[i], H[i + 1]
    return H.at[i].set(cs.conj() * x - sn.conj() * y).at[i + 1].set(sn * x + cs * y)


def _givens(a, b):
    """(cs, sn) of the rotation zeroing b against a, dividing by the larger of the two."""
    b_zero = abs(b) == 0
    a_small = abs(a) < abs(b)
    t = -jnp.where(a_small, a, b) / jnp.where(a_small, b, a)
    r = lax.rsqrt(1 + abs(t) ** 2).astype(t.dtype)
    return (jnp.where(b_zero, 1, jnp.where(a_small, r * t, r)),
            jnp.where(b_zero, 0, jnp.where(a_small, r, r * t)))


def _krylov_basis(unit_residual, restart):
    return tu.tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)), unit_residual)


def _finish_restart(A, M, b, x0, V, y):
    x = _add(x0, tu.tree_map(lambda X: _dot(X[..., :-1], y), V))
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
    return x, unit_residual, residual_norm


def _gmres_incremental(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart building H's QR factorization by Givens rotations as it goes: the rotated
    right-hand side gives the residual for free, so the restart stops early at ptol."""
    V = _krylov_basis(unit_residual, restart)
    dtype = jnp.result_type(*tu.tree_leaves(b))
    R = jnp.eye(restart, restart + 1, dtype=dtype)  # identity rows keep R invertible on early exit
    givens = jnp.zeros((restart, 2), dtype)
    beta = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))

    def cond(carry):
        k, err, *_ = carry
        return (k < restart) & (err > ptol)

    def step(carry):
        k, _, V, R, beta, givens = carry
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row = lax.fori_loop(0, k, lambda i, row: _rotate(row, i, *givens[i, :]), H[k, :])
        cs_sn = _givens(row[k], row[k + 1])
        givens = givens.at[k, :].set(jnp.stack(cs_sn))
        R = R.at[k, :].set(_rotate(row, k, *cs_sn))
        beta = _rotate(beta, k, *cs_sn)
        return k + 1, abs(beta[k + 1]), V, R, beta, givens

    _, _, V, R, beta, _ = lax.while_loop(cond, step, (0, residual_norm, V, R, beta, givens))
    y = sp_linalg.solve_triangular(R[:, :-1].T, beta[:-1])
    return _finish_restart(A, M, b, x0, V, y)


def _gmres_batched(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart building the whole Arnoldi basis (up to a breakdown), then solving the
    small least-squares problem by its normal equations: less overhead, no early exit."""
    del ptol
    V = _krylov_basis(unit_residual, restart)
    dtype = _tree_dtype(b)
    H = jnp.eye(restart, restart + 1, dtype=dtype)

    def cond(carry):
        _, _, breakdown, k = carry
        return (k < restart) & ~breakdown

    def step(carry):
        V, H, _, k = carry
        V, H, breakdown = _arnoldi_step(k, A, M, V, H)
        return V, H, breakdown, k + 1

    V, H, _, _ = lax.while_loop(cond, step, (V, H, False, 0))
    beta = jnp.zeros(restart + 1, dtype).at[0].set(residual_norm.astype(dtype))
    y = sp_linalg.solve(_dot(H.conj(), H.T), _dot(H.conj(), beta), assume_a="pos")
    return _finish_restart(A, M, b, x0, V, y)


def _gmres_solve(A, b, x0, *, atol, ptol, restart, maxiter, M, restart_fn):
    """Restart until |M(b - A x)| <= atol or maxiter restarts."""
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

    def cond(value):
        _, k, _, residual_norm = value
        return (k < maxiter) & (residual_norm > atol)

    def body(value):
        x, k, unit_residual, residual_norm = value
        x, unit_residual, residual_norm = restart_fn(A, b, x, unit_residual, residual_norm, ptol, restart, M)
        return x, k + 1, unit_residual, residual_norm

    return lax.while_loop(cond, body, (x0, 0, unit_residual, residual_norm))[0]


_GMRES_METHODS = {"incremental": _gmres_incremental, "batched": _gmres_batched}


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None, solve_method="batched"):
    """Solve A x = b for a general A by restarted GMRES (``restart`` Krylov vectors per restart,
    at most ``maxiter`` restarts); returns ``(x, info)`` with info -1 when x has NaNs, else 0,
    as JAX does. ``solve_method`` is 'batched' (normal equations after each restart) or
    'incremental' (Givens QR during it, stopping early)."""
    if solve_method not in _GMRES_METHODS:
        raise ValueError(f"gmres: invalid solve_method {solve_method!r}, must be either 'incremental' or 'batched'")
    if x0 is None:
        x0 = tu.tree_map(jnp.zeros_like, b)
    b, x0 = tu.tree_map(jnp.asarray, (b, x0))
    A = _normalize_matvec(A)
    M = _identity if M is None else _normalize_matvec(M)
    if tu.tree_structure(x0) != tu.tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: "
                         f"{tu.tree_structure(x0)} vs {tu.tree_structure(b)}")
    size = sum(np.size(x) for x in tu.tree_leaves(b))
    if maxiter is None:
        maxiter = 10 * size
    restart = min(restart, size)
    b_norm = _norm_tree(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = _norm_tree(M(b)) * jnp.minimum(1.0, atol / b_norm)
    solve = partial(_gmres_solve, x0=x0, atol=atol, ptol=ptol, restart=restart, maxiter=maxiter,
                    M=M, restart_fn=_GMRES_METHODS[solve_method])
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, jnp.where(jnp.isnan(_norm_tree(x)), -1, 0)
