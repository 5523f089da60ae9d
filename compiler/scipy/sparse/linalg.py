"""jaxprc.scipy.sparse.linalg: matrix-free Krylov solvers (``cg``, ``bicgstab``) with JAX's
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
from jaxprc.ir import dtypes as dt
from jaxprc.ir import tree_util as tu
from jaxprc import numpy as jnp

__all__ = ["cg", "bicgstab"]

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
    """A linear operator as a function: a callable as it is, a square matrix as its product."""
    if callable(f):
        return f
    shape = getattr(f, "shape", None)
    if shape is None:
        raise TypeError(f"linear operator must be either a function or ndarray: {f}")
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"linear operator must be a square matrix, but has shape: {shape}")
    return partial(_dot, f)


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
