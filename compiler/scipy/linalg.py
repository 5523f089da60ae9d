"""jaxprc.scipy.linalg: JAX's ``jax.scipy.linalg``, on the primitives of ``jaxprc.lax.linalg``.

SciPy's in-place and validation flags (``overwrite_*``, ``check_finite``) are
accepted and ignored, as in JAX. Functions taking matrices batch over leading
dimensions where JAX's do.
"""
from __future__ import annotations

import math
import operator
from functools import partial

import numpy as np

from jaxprc import lax
from jaxprc import numpy as jnp
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc.ir import dtypes as dt
from jaxprc.lax import linalg as lax_linalg
from jaxprc.numpy import linalg as jnp_linalg
from jaxprc.numpy._util import aval_of, broadcast_shapes
from jaxprc.numpy.linalg import _inexact, _square

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix",
           "det", "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion",
           "funm", "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal",
           "leslie", "lu", "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur",
           "solve", "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]


def _H(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2)) if dt.is_complex(aval_of(x).dtype) else jnp.swapaxes(x, -1, -2)


def _complex(x):
    dtype = aval_of(x).dtype
    return x if dt.is_complex(dtype) else x.astype(np.result_type(dtype, np.complex64))


# ----------------------------------------------------------------- Cholesky

def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor: upper ``U`` with ``a = U^H U`` (SciPy's default), or lower ``L``.

    As SciPy (and JAX), only one triangle of ``a`` is read: the lower one for ``lower``, else
    the upper one (the lower triangle of ``a^H``); ``a`` is not symmetrized first."""
    (a,) = _inexact("cholesky", a)
    _square("cholesky", a)
    L = lax_linalg.cholesky(a if lower else _H(a), symmetrize_input=False)
    return L if lower else _H(L)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(c, lower)`` for ``cho_solve``; ``c``'s other triangle is zero (SciPy leaves garbage there)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """Solve ``a x = b`` from ``cho_factor(a)``."""
    c, lower = c_and_lower
    c, b = _inexact("cho_solve", c, b)
    _square("cho_solve", c, "c")
    if aval_of(c).shape[-1] != aval_of(b).shape[0 if aval_of(b).ndim == 1 else -2]:
        raise ValueError(f"cho_solve: incompatible shapes {aval_of(c).shape} and {aval_of(b).shape}")
    # a = L L^H: solve L y = b, then L^H x = y (with L = c, or c^H when c is upper).
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                                    conjugate_a=not lower)
    return lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)


# ------------------------------------------------------------------------ LU

def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """``(lu, piv)``: the packed factors and LAPACK's (0-based) row swaps."""
    (a,) = _inexact("lu_factor", a)
    lu_, pivots, _ = lax_linalg.lu(a)
    return lu_, pivots


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False, check_finite: bool = True):
    """Solve ``a x = b`` (trans=0), ``a^T x = b`` (1) or ``a^H x = b`` (2) from ``lu_factor(a)``."""
    lu_, pivots = lu_and_piv
    lu_, b = _inexact("lu_solve", lu_, b)
    _square("lu_solve", lu_, "lu")
    m = aval_of(lu_).shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(jnp.asarray(pivots, dtype=dt.int32), m)
    vector = aval_of(b).ndim == 1
    if vector:
        b = b[:, None]
    if aval_of(b).shape[-2] != m:
        raise ValueError(f"lu_solve: b's leading dimension must be {m}, got shape {aval_of(b).shape}")
    batch = broadcast_shapes(aval_of(lu_).shape[:-2], aval_of(b).shape[:-2])
    lu_ = jnp.broadcast_to(lu_, batch + (m, m))
    b = jnp.broadcast_to(b, batch + aval_of(b).shape[-2:])
    perm = jnp.broadcast_to(perm, batch + (m,))
    if trans == 0:
        x = jnp.take_along_axis(b, perm[..., None], axis=-2)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=False)
    elif trans in (1, 2):
        conj = trans == 2
        x = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True,
                                        transpose_a=True, conjugate_a=conj)
        inverse = jnp.argsort(perm, axis=-1)
        x = jnp.take_along_axis(x, inverse[..., None], axis=-2)
    else:
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    return x[..., 0] if vector else x


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(p, l, u)`` with ``a = p l u`` (or ``(p l, u)`` when ``permute_l``)."""
    (a,) = _inexact("lu", a)
    lu_, _, perm = lax_linalg.lu(a)
    m, n = aval_of(a).shape[-2:]
    k = min(m, n)
    dtype = aval_of(a).dtype
    # a[perm] = l u, so a = p l u with p the transpose of the identity's rows taken by perm.
    p = jnp.swapaxes((perm[..., :, None] == jnp.arange(m, dtype=dt.int32)).astype(dtype), -1, -2)
    l_ = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=dtype)
    u = jnp.triu(lu_[..., :k, :])
    return (p @ l_, u) if permute_l else (p, l_, u)


# -------------------------------------------------------------------- solves

def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False, overwrite_b: bool = False,
                     debug=None, check_finite: bool = True):
    """Solve ``op(a) x = b`` for triangular ``a``; ``trans`` is 0/'N', 1/'T' or 2/'C'."""
    a, b = _inexact("solve_triangular", a, b)
    _square("solve_triangular", a)
    modes = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
             2: (True, True), "C": (True, True)}
    if trans not in modes:
        raise ValueError(f"solve_triangular: invalid trans {trans!r}; expected 0, 1, 2, 'N', 'T' or 'C'")
    transpose_a, conjugate_a = modes[trans]
    a_aval, b_aval = aval_of(a), aval_of(b)
    vector = b_aval.ndim == a_aval.ndim - 1
    rows = b_aval.shape[-1] if vector else b_aval.shape[-2]
    if rows != a_aval.shape[-1]:
        raise ValueError(f"solve_triangular: incompatible shapes a {a_aval.shape} and b {b_aval.shape}")
    if not vector:
        batch = broadcast_shapes(a_aval.shape[:-2], b_aval.shape[:-2])
        a = jnp.broadcast_to(a, batch + a_aval.shape[-2:])
        b = jnp.broadcast_to(b, batch + b_aval.shape[-2:])
    return lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                       conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False, debug: bool = False,
          check_finite: bool = True, assume_a: str = "gen"):
    """Solve ``a x = b``; ``assume_a='pos'`` uses the Cholesky factor (of the ``lower`` triangle),
    the others ('gen', 'sym', 'her') LU."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: expected assume_a to be one of 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
    if assume_a != "pos":
        return jnp_linalg.solve(a, b)
    a, b = _inexact("solve", a, b)
    _square("solve", a)
    return _solve_pos(a, b, bool(lower))


@partial(custom_jvp, nondiff_argnums=(2,))
def _solve_pos(a, b, lower):
    """Only the named triangle of ``a`` is factored, as LAPACK's posv reads it."""
    tri = jnp.tril(a) if lower else jnp.triu(a)
    full = tri + _H(jnp.tril(a, -1) if lower else jnp.triu(a, 1))
    L = lax_linalg.cholesky(full, symmetrize_input=False)
    return cho_solve((L, True), b)


@_solve_pos.defjvp
def _solve_pos_jvp(lower, primals, tangents):
    # As JAX's custom_linear_solve with the matvec x -> a x: dx = a^-1 (db - da x), the whole of
    # da counting (not only the factored triangle).
    (a, b), (da, db) = primals, tangents
    x = _solve_pos(a, b, lower)
    return x, _solve_pos(a, db - da @ x, lower)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    return jnp_linalg.inv(a)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    return jnp_linalg.det(a)


# ----------------------------------------------------------- decompositions

def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"svd: lapack_driver must be 'gesdd' or 'gesvd', got {lapack_driver!r}")
    out = jnp_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1, check_finite: bool = True):
    """Eigenvalues (ascending) and eigenvectors of Hermitian ``a``, or of the generalized problem
    ``a v = w b v`` (``type=1``) with positive-definite ``b``."""
    if eigvals is not None:
        raise NotImplementedError("eigh: only eigvals=None is supported (as in JAX)")
    if type != 1:
        raise NotImplementedError(f"eigh: only type=1 is supported (as in JAX), got type={type}")
    (a,) = _inexact("eigh", a)
    _square("eigh", a)
    if b is None:
        v, w = lax_linalg.eigh(a, lower=lower)
    else:
        a, b = _inexact("eigh", a, b)
        _square("eigh", b, "b")
        # With b = L L^H: L^-1 a L^-H y = w y and v = L^-H y.
        L = lax_linalg.cholesky(b)
        c = lax_linalg.triangular_solve(L, a, left_side=True, lower=True)
        c = lax_linalg.triangular_solve(L, c, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
        v, w = lax_linalg.eigh(c, lower=lower)
        v = lax_linalg.triangular_solve(L, v, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a", select_range=None, tol=None,
                     key=None):
    """Eigenvalues (and eigenvectors) of the symmetric tridiagonal matrix with diagonal ``d`` and
    off-diagonal ``e``, from the dense matrix's ``eigh`` (JAX bisects instead: equal values,
    eigenvectors possibly of opposite sign)."""
    d, e = jnp.asarray(d), jnp.asarray(e)
    dd, ed = aval_of(d).dtype, aval_of(e).dtype
    if dd != ed:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got {dd} and {ed}")
    if dd not in (np.float32, np.float64, np.complex64, np.complex128):
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        f"jax.scipy.linalg.eigh_tridiagonal, got {dd} and {ed}")
    n = aval_of(d).shape[-1]
    if aval_of(e).shape[-1] != n - 1 or aval_of(d).ndim != 1:
        raise ValueError(f"eigh_tridiagonal: expected d of shape (n,) and e of shape (n-1,), got "
                         f"{aval_of(d).shape} and {aval_of(e).shape}")
    if select not in ("a", "i", "v"):
        raise ValueError("eigh_tridiagonal: select must be one of 'a', 'i', 'v'")
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented (as in JAX)")
    if eigvals_only and dt.is_complex(dd):
        # a Hermitian tridiagonal matrix has the eigenvalues of the real one with |e| off the diagonal
        d, e = jnp.real(d), jnp.abs(e)
    t = jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(jnp.conj(e), -1)
    v, w = lax_linalg.eigh(t, symmetrize_input=False)
    if select == "i":
        if select_range is None:
            raise ValueError("eigh_tridiagonal: for select='i', select_range must be specified")
        lo, hi = int(select_range[0]), int(select_range[1])
        if not 0 <= lo <= hi < n:
            raise ValueError("eigh_tridiagonal: got an empty or out of bounds index range in select_range")
        w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    return w if eigvals_only else (w, v)


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """``(q, r)`` (mode 'full' or 'economic'), ``(r,)`` (mode 'r'), with the column permutation
    ``p`` appended when ``pivoting``."""
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"qr: unsupported mode {mode!r}; expected 'full', 'r' or 'economic'")
    (a,) = _inexact("qr", a)
    outs = lax_linalg.qr(a, pivoting=pivoting, full_matrices=mode != "economic")
    q, r = outs[:2]
    p = outs[2:]
    return ((r,) + p) if mode == "r" else (q, r) + p


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
    """``(Q c, r)`` (mode 'left') or ``(c Q, r)`` (mode 'right') with the economic ``Q`` of ``a``;
    a 1-D ``c`` is a column (left) or a row (right)."""
    if mode not in ("left", "right"):
        raise ValueError(f"qr_multiply: mode must be 'left' or 'right', got {mode!r}")
    a, c = _inexact("qr_multiply", a, c)
    outs = lax_linalg.qr(a, pivoting=pivoting, full_matrices=False)
    q, r = outs[:2]
    if conjugate:
        q = jnp.conj(q)
    vector = aval_of(c).ndim == 1
    if mode == "left":
        out = q @ (c[:, None] if vector else c)
    else:
        out = (c[None, :] if vector else c) @ q
    if vector:
        out = out[:, 0] if mode == "left" else out[0]
    return (out, r) + tuple(outs[2:])


def schur(a, output: str = "real"):
    """``(t, z)`` with ``a = z t z^H`` (CPU only); ``output='complex'`` gives a triangular ``t``."""
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    (a,) = _inexact("schur", a)
    _square("schur", a)
    if output == "complex":
        a = _complex(a)
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The upper Hessenberg form ``h`` of ``a`` (and ``q`` with ``a = q h q^H`` when ``calc_q``)."""
    (a,) = _inexact("hessenberg", a)
    _square("hessenberg", a)
    shape = aval_of(a).shape
    n = shape[-1]
    if n == 0:
        return (jnp.zeros_like(a), jnp.zeros_like(a)) if calc_q else jnp.zeros_like(a)
    packed, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    batch, dtype = shape[:-2], aval_of(a).dtype
    if n == 1:
        return h, jnp.ones(shape, dtype)
    q = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
    top = jnp.concatenate([jnp.ones(batch + (1, 1), dtype), jnp.zeros(batch + (1, n - 1), dtype)], axis=-1)
    rest = jnp.concatenate([jnp.zeros(batch + (n - 1, 1), dtype), q], axis=-1)
    return h, jnp.concatenate([top, rest], axis=-2)


def rsf2csf(T, Z, check_finite: bool = True):
    """The complex Schur form from the real one: each 2x2 diagonal block is triangularised by a
    Givens rotation, applied to ``T``'s rows and columns and to ``Z``'s columns."""
    T, Z = _inexact("rsf2csf", T, Z)
    T, Z = _complex(T), _complex(Z)
    shape = aval_of(T).shape
    if len(shape) != 2 or shape[0] != shape[1] or aval_of(Z).shape != shape:
        raise ValueError(f"rsf2csf: T and Z must be square matrices of one shape, got {shape} and "
                         f"{aval_of(Z).shape}")
    n = shape[0]
    if n <= 1:
        return T, Z
    dtype = aval_of(T).dtype
    eps = float(np.finfo(dtype).eps)
    idx = jnp.arange(n)

    def rotate(m, T, Z):
        block = lax.dynamic_slice(T, (m - 1, m - 1), (2, 2))
        mu = jnp_linalg.eigvals(block) - T[m, m]
        r = jnp_linalg.norm(jnp.stack([mu[0], T[m, m - 1]])).astype(dtype)
        c, s = mu[0] / r, T[m, m - 1] / r
        G = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        rows = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=0)
        cols_right = idx >= m - 1
        rows = jnp.where(cols_right, G @ jnp.where(cols_right, rows, 0), rows)
        T = lax.dynamic_update_slice_in_dim(T, rows, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=1)
        rows_above = idx[:, None] < m + 1
        cols = jnp.where(rows_above, jnp.where(rows_above, cols, 0) @ _H(G), cols)
        T = lax.dynamic_update_slice_in_dim(T, cols, m - 1, axis=1)
        zc = lax.dynamic_slice_in_dim(Z, m - 1, 2, axis=1)
        Z = lax.dynamic_update_slice_in_dim(Z, zc @ _H(G), m - 1, axis=1)
        return T, Z

    def step(i, TZ):
        T, Z = TZ
        m = n - i
        big = jnp.abs(T[m, m - 1]) > eps * (jnp.abs(T[m - 1, m - 1]) + jnp.abs(T[m, m]))
        T, Z = lax.cond(big, rotate, lambda m, T, Z: (T, Z), m, T, Z)
        return T.at[m, m - 1].set(0), Z
    return lax.fori_loop(1, n, step, (T, Z))


def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
    """``(u, p)``: ``a = u p`` (side 'right') or ``p u`` ('left'), ``u`` unitary and ``p`` Hermitian
    positive semi-definite. Both methods are computed from the SVD here (JAX's 'qdwh' iterates;
    the factors are unique for full-rank ``a``, so the values agree to rounding)."""
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: unknown polar decomposition method {method!r}")
    (a,) = _inexact("polar", a)
    if aval_of(a).ndim != 2:
        raise ValueError(f"polar: a must be a 2-D matrix, got shape {aval_of(a).shape}")
    u, s, vh = lax_linalg.svd(a, full_matrices=False)
    s = s.astype(aval_of(u).dtype)
    unitary = u @ vh
    posdef = (_H(vh) * s[None, :]) @ vh if side == "right" else (u * s[None, :]) @ _H(u)
    return unitary, posdef


# --------------------------------------------------------- matrix functions

_PADE = {   # the coefficients b_0..b_m of the [m/m] Padé approximant of exp
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.),
}


def _pade(order):
    """(U, V): the odd and even parts of the order-``order`` Padé numerator p(A) = V + U; the
    denominator is q(A) = V - U and exp(A) ~ q(A)^-1 p(A)."""
    b = _PADE[order]

    def uv(A):
        ident = jnp.eye(aval_of(A).shape[-1], dtype=aval_of(A).dtype)
        A2 = A @ A
        if order == 13:
            A4 = A2 @ A2
            A6 = A4 @ A2
            U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
            V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident
            return U, V
        powers = [ident, A2]
        while len(powers) <= order // 2:
            powers.append(powers[-1] @ A2)
        U = A @ sum(b[2 * k + 1] * powers[k] for k in range(order // 2 + 1))
        V = sum(b[2 * k] * powers[k] for k in range(order // 2 + 1))
        return U, V
    return uv


# Higham's (2005) scaling thresholds: the largest 1-norm each order handles to unit roundoff.
_EXPM_ORDERS = {
    np.dtype(np.float64): (5.371920351148152, (1.495585217958292e-002, 2.539398330063230e-001,
                                               9.504178996162932e-001, 2.097847961257068e+000), (3, 5, 7, 9, 13)),
    np.dtype(np.float32): (3.925724783138660, (4.258730016922831e-001, 1.880152677804762e+000), (3, 5, 7)),
}


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """The matrix exponential by scaling and squaring with a Padé approximant (Higham 2005), as
    JAX computes it (NaN when more than ``max_squarings`` squarings would be needed)."""
    (A,) = _inexact("expm", A)
    _square("expm", A, "A")
    if aval_of(A).ndim > 2:
        from jaxprc import vmap
        f = lambda x: expm(x, upper_triangular=upper_triangular, max_squarings=max_squarings)  # noqa: E731
        for _ in range(aval_of(A).ndim - 2):
            f = vmap(f)
        return f(A)
    dtype = aval_of(A).dtype
    real = np.dtype(np.finfo(dtype).dtype)
    maxnorm, conds, orders = _EXPM_ORDERS[real]
    norm1 = jnp_linalg.norm(A, 1)
    n_squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm1 / maxnorm)))
    A = A / (2 ** n_squarings).astype(dtype)
    index = jnp.sum(jnp.asarray(conds, real) <= norm1, dtype=dt.int32)
    U, V = lax.switch(index, [_pade(o) for o in orders], A)
    P, Q = U + V, V - U

    def compute(A, P, Q):
        R = solve_triangular(Q, P) if upper_triangular else jnp_linalg.solve(Q, P)

        def square(R, i):
            return lax.cond(i < n_squarings, lambda r: r @ r, lambda r: r, R), None
        R, _ = lax.scan(square, R, jnp.arange(max_squarings, dtype=aval_of(n_squarings).dtype))
        return R
    return lax.cond(n_squarings > max_squarings, lambda A, P, Q: jnp.full_like(A, np.nan), compute, A, P, Q)


def expm_frechet(A, E, *, method=None, compute_expm: bool = True):
    """The Fréchet derivative of expm at ``A`` in direction ``E`` (with ``expm(A)`` first when
    ``compute_expm``): the jvp of ``expm``."""
    from jaxprc import jvp
    A, E = _inexact("expm_frechet", A, E)
    if aval_of(A).ndim < 2 or aval_of(A).shape[-1] != aval_of(A).shape[-2]:
        raise ValueError(f"expm_frechet: expected A to be a (batched) square matrix, got shape {aval_of(A).shape}")
    if aval_of(E).shape != aval_of(A).shape:
        raise ValueError(f"expm_frechet: expected A and E of one shape, got {aval_of(A).shape} and "
                         f"{aval_of(E).shape}")
    value, derivative = jvp(expm, (A,), (E,))
    return (value, derivative) if compute_expm else derivative


def _sqrtm_triu(T):
    """The upper-triangular square root of upper-triangular ``T`` (Björck & Hammarling 1983),
    column by column from the diagonal up."""
    n = aval_of(T).shape[0]
    diag = jnp.sqrt(jnp.diagonal(T))
    idx = jnp.arange(n)

    def column(j, U):
        def row(l, U):
            i = j - 1 - l
            between = (idx > i) & (idx < j)
            s = jnp.sum(jnp.where(between, U[i, :] * U[:, j], 0))
            value = jnp.where(T[i, j] == s, 0, (T[i, j] - s) / (diag[i] + diag[j]))
            return U.at[i, j].set(value)
        return lax.fori_loop(0, j, row, U)
    return lax.fori_loop(0, n, column, jnp.diag(diag))


def sqrtm(A, blocksize: int = 1):
    """The principal square root from the complex Schur form (CPU only); complex result."""
    if blocksize > 1:
        raise NotImplementedError("sqrtm: the blocked version is not implemented (as in JAX)")
    (A,) = _inexact("sqrtm", A)
    _square("sqrtm", A, "A")
    T, Z = schur(A, output="complex")
    return Z @ _sqrtm_triu(T) @ _H(Z)


def funm(A, func, disp: bool = True):
    """``func`` applied to the matrix ``A`` by Parlett's recurrence on its complex Schur form.
    Returns ``F``, or ``(F, err)`` (an error estimate) when not ``disp``."""
    (A,) = _inexact("funm", A)
    if aval_of(A).ndim != 2 or aval_of(A).shape[0] != aval_of(A).shape[1]:
        raise ValueError(f"funm: expected a square matrix, got shape {aval_of(A).shape}")
    T, Z = schur(A)
    T, Z = rsf2csf(T, Z)
    n = aval_of(T).shape[0]
    F = jnp.diag(func(jnp.diagonal(T))).astype(aval_of(T).dtype)
    idx = jnp.arange(n)
    minden = jnp.abs(T[0, 0])

    def outer(p, carry):
        def inner(i, carry):
            F, minden = carry
            j = i + p
            s = T[i - 1, j - 1] * (F[j - 1, j - 1] - F[i - 1, i - 1])
            between = (idx >= i) & (idx < j - 1)
            s = s + (jnp.where(between, T[i - 1], 0) @ jnp.where(between, F[:, j - 1], 0)
                     - jnp.where(between, F[i - 1], 0) @ jnp.where(between, T[:, j - 1], 0))
            den = T[j - 1, j - 1] - T[i - 1, i - 1]
            s = jnp.where(den != 0, s / den, s)
            return F.at[i - 1, j - 1].set(s), jnp.minimum(minden, jnp.abs(den))
        return lax.fori_loop(1, n - p + 1, inner, carry)
    F, minden = lax.fori_loop(1, n, outer, (F, minden))
    F = Z @ F @ _H(Z)
    if disp:
        return F
    tol = float(np.finfo(np.float32 if aval_of(F).dtype == np.complex64 else np.float64).eps)
    minden = jnp.where(minden == 0, tol, minden)
    err = jnp.where(jnp.any(jnp.isinf(F)), np.inf,
                    jnp.minimum(1, jnp.maximum(tol, (tol / minden) * jnp_linalg.norm(jnp.triu(T, 1), 1))))
    return F, err


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
    """``X`` with ``A X + X B = C`` (Bartels-Stewart on the complex Schur forms, or the
    eigendecompositions with ``method='eigen'``); NaN when some eigenvalue sum of A and B is
    within ``tol`` of zero (no unique solution)."""
    A, B, C = _inexact("solve_sylvester", A, B, C)
    for name, x in (("A", A), ("B", B)):
        if aval_of(x).ndim != 2 or aval_of(x).shape[0] != aval_of(x).shape[1]:
            raise ValueError(f"solve_sylvester: {name} must be a square matrix, got shape {aval_of(x).shape}")
    m, n = aval_of(A).shape[0], aval_of(B).shape[0]
    if aval_of(C).shape != (m, n):
        raise ValueError(f"solve_sylvester: C must have shape {(m, n)}, got {aval_of(C).shape}")
    if method == "schur":
        R, U = schur(A, output="complex")
        S, V = schur(_H(B), output="complex")
        F = _H(U) @ C.astype(aval_of(R).dtype) @ V
        Y = _sylvester_triangular(R, _H(S), F)
        X = U @ Y @ _H(V)
    elif method == "eigen":
        ra, ua = jnp_linalg.eig(A)
        rb, ub = jnp_linalg.eig(B)
        F = jnp_linalg.solve(ua, C.astype(aval_of(ra).dtype) @ ub)
        X = ua @ (F / (ra[:, None] + rb[None, :])) @ jnp_linalg.inv(ub)
    else:
        raise ValueError(f"solve_sylvester: unrecognized method {method!r}; expected 'schur' or 'eigen'")
    if not dt.is_complex(aval_of(C).dtype):
        X = jnp.real(X)
    near = jnp.any(jnp.abs(jnp_linalg.eigvals(A)[:, None] + jnp_linalg.eigvals(B)[None, :]) < tol)
    return jnp.where(near, jnp.full_like(X, np.nan), X)


def _sylvester_triangular(R, S, F):
    """``Y`` with ``R Y + Y S = F`` for upper-triangular ``R`` and lower-triangular ``S`` (the
    conjugate transpose of B^H's Schur factor): entries solved one at a time from the last up."""
    m, n = aval_of(F).shape
    rows, cols = jnp.arange(m), jnp.arange(n)

    def step(Y, flat):
        i, j = flat // n, flat % n
        rhs = F[i, j] - jnp.sum(jnp.where(rows > i, R[i, :] * Y[:, j], 0)) \
            - jnp.sum(jnp.where(cols > j, Y[i, :] * S[:, j], 0))
        return Y.at[i, j].set(rhs / (R[i, i] + S[j, j])), None
    Y, _ = lax.scan(step, jnp.zeros((m, n), aval_of(F).dtype), jnp.arange(m * n - 1, -1, -1))
    return Y


# --------------------------------------------------------- special matrices

def block_diag(*arrs):
    """The block-diagonal matrix of the given (at most 2-D) arrays."""
    if not arrs:
        return jnp.zeros((1, 0))
    arrs = [jnp.atleast_2d(jnp.asarray(a)) for a in arrs]
    for a in arrs:
        if aval_of(a).ndim > 2:
            raise ValueError(f"block_diag: arguments must have at most 2 dimensions, got shape {aval_of(a).shape}")
    dtype = np.result_type(*[aval_of(a).dtype for a in arrs])
    cols = sum(aval_of(a).shape[1] for a in arrs)
    rows, left = [], 0
    for a in arrs:
        r, c = aval_of(a).shape
        rows.append(jnp.pad(a.astype(dtype), [(0, 0), (left, cols - left - c)]))
        left += c
    return jnp.concatenate(rows, axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``conj(c)`` by default);
    batches over leading dimensions."""
    c = jnp.asarray(c)
    r = jnp.conj(c) if r is None else jnp.asarray(r)
    c, r = jnp.atleast_1d(c), jnp.atleast_1d(r)
    dtype = np.result_type(aval_of(c).dtype, aval_of(r).dtype)
    m, n = aval_of(c).shape[-1], aval_of(r).shape[-1]
    if aval_of(c).ndim != aval_of(r).ndim:
        raise ValueError("toeplitz: c and r must have the same number of dimensions")
    batch = broadcast_shapes(aval_of(c).shape[:-1], aval_of(r).shape[:-1])
    c = jnp.broadcast_to(c.astype(dtype), batch + (m,))
    r = jnp.broadcast_to(r.astype(dtype), batch + (n,))
    # Entry (i, j) is c[i - j] on and below the diagonal and r[j - i] above it.
    vals = jnp.concatenate([jnp.flip(r[..., 1:], -1), c], axis=-1)
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return vals[..., (n - 1) + i - j]


def hankel(c, r=None):
    """The Hankel matrix with first column ``c`` and last row ``r`` (zeros by default)."""
    c = jnp.atleast_1d(jnp.asarray(c))
    r = jnp.zeros_like(c) if r is None else jnp.atleast_1d(jnp.asarray(r))
    dtype = np.result_type(aval_of(c).dtype, aval_of(r).dtype)
    m, n = aval_of(c).shape[-1], aval_of(r).shape[-1]
    vals = jnp.concatenate([c.astype(dtype), r[..., 1:].astype(dtype)], axis=-1)
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return vals[..., i + j]


def circulant(c):
    """The circulant matrix with first column ``c``."""
    c = jnp.atleast_1d(jnp.asarray(c))
    n = aval_of(c).shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return c[..., (i - j) % n]


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` (highest first)."""
    a = jnp.atleast_1d(jnp.asarray(a))
    n = aval_of(a).shape[-1]
    if n < 2:
        raise ValueError("companion: the length of a must be at least 2")
    first = -a[..., 1:] / a[..., 0:1]
    batch = aval_of(first).shape[:-1]
    dtype = aval_of(first).dtype
    rest = jnp.broadcast_to(jnp.eye(n - 2, n - 1, dtype=dtype), batch + (n - 2, n - 1))
    return jnp.concatenate([first[..., None, :], rest], axis=-2)


def fiedler(a):
    """The symmetric Fiedler matrix ``|a_i - a_j|``."""
    a = jnp.atleast_1d(jnp.asarray(a))
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` (highest first): a
    pentadiagonal matrix with the eigenvalues of ``companion(a)``."""
    a = jnp.atleast_1d(jnp.asarray(a))
    if aval_of(a).ndim != 1:
        raise ValueError("fiedler_companion: a must be 1-D")
    size = aval_of(a).shape[0]
    if size <= 2:
        if size == 2:
            return jnp.reshape(-a[1] / a[0], (1, 1))
        return jnp.zeros((0,), aval_of(a).dtype)
    a = a / a[0]
    n = size - 1
    c = jnp.zeros((n, n), aval_of(a).dtype)
    c = c.at[np.arange(3, n, 2), np.arange(1, n - 2, 2)].set(1)          # subdiagonals
    c = c.at[np.arange(2, n, 2), np.arange(1, n - 1, 2)].set(-a[3::2])
    c = c.at[np.arange(0, n - 2, 2), np.arange(2, n, 2)].set(1)          # superdiagonals
    c = c.at[np.arange(0, n - 1, 2), np.arange(1, n, 2)].set(-a[2::2])
    return c.at[0, 0].set(-a[1]).at[1, 0].set(1)


def leslie(f, s):
    """The Leslie matrix with fecundities ``f`` (first row) and survival rates ``s`` (subdiagonal)."""
    f, s = jnp.atleast_1d(jnp.asarray(f)), jnp.atleast_1d(jnp.asarray(s))
    n = aval_of(f).shape[-1]
    if aval_of(s).shape[-1] != n - 1:
        raise ValueError(f"leslie: the length of s must be len(f) - 1 = {n - 1}, got {aval_of(s).shape[-1]}")
    dtype = np.result_type(aval_of(f).dtype, aval_of(s).dtype)
    batch = broadcast_shapes(aval_of(f).shape[:-1], aval_of(s).shape[:-1])
    f = jnp.broadcast_to(f.astype(dtype), batch + (n,))
    s = jnp.broadcast_to(s.astype(dtype), batch + (n - 1,))
    sub = s[..., :, None] * jnp.eye(n - 1, n, dtype=dtype)
    return jnp.concatenate([f[..., None, :], sub], axis=-2)


def convolution_matrix(a, n: int, mode: str = "full"):
    """The matrix ``A`` with ``A @ v == convolve(a, v, mode)`` for ``v`` of length ``n``; a batch
    of them (``(..., k, n)``) for ``a`` of shape ``(..., m)``."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"convolution_matrix: n must be a positive integer, got {n}")
    a = jnp.asarray(a)
    if aval_of(a).ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar")
    m = aval_of(a).shape[-1]
    if m == 0:
        raise ValueError(f"convolution_matrix: len(a) must be at least 1, got shape {aval_of(a).shape}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")
    widths = [(0, 0)] * (aval_of(a).ndim - 1) + [(0, n - 1)]
    az, raz = jnp.pad(a, widths), jnp.pad(jnp.flip(a, axis=-1), widths)
    trim = 0 if mode == "full" else min(n, m) - 1
    head = trim // 2 if mode == "same" else trim
    tail = trim - head if mode == "same" else trim
    length = m + n - 1
    return toeplitz(lax.slice_in_dim(az, head, length - tail, axis=-1),
                    lax.slice_in_dim(raz, length - n - head, length - head, axis=-1))


def hilbert(n: int):
    """The n x n Hilbert matrix ``1 / (i + j + 1)``."""
    i = jnp.arange(n, dtype=dt.default_float_dtype())
    return 1.0 / (i[:, None] + i[None, :] + 1.0)


def invhilbert(n: int):
    """The exact inverse of the n x n Hilbert matrix (as floats)."""
    out = np.empty((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            out[i, j] = ((-1) ** (i + j) * (i + j + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
                         * math.comb(i + j, i) ** 2)
    return jnp.asarray(out, dtype=dt.default_float_dtype())


def _pascal_lower(n: int):
    return np.array([[math.comb(i, j) for j in range(n)] for i in range(n)], dtype=np.float64)


def pascal(n: int, kind=None):
    """The Pascal matrix: symmetric (default), lower ('lower') or upper ('upper') triangular."""
    kind = kind or "symmetric"
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"pascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    L = _pascal_lower(n)
    out = L @ L.T if kind == "symmetric" else (L if kind == "lower" else L.T)
    return jnp.asarray(out, dtype=dt.default_float_dtype())


def invpascal(n: int, kind=None):
    """The inverse of ``pascal(n, kind)`` (exact: alternating-sign binomials)."""
    kind = kind or "symmetric"
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"invpascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    L = _pascal_lower(n)
    sign = (-1.0) ** np.add.outer(np.arange(n), np.arange(n))
    Linv = L * sign
    out = Linv.T @ Linv if kind == "symmetric" else (Linv if kind == "lower" else Linv.T)
    return jnp.asarray(out, dtype=dt.default_float_dtype())


def helmert(n: int, full: bool = False):
    """The Helmert matrix of order n (without its first row unless ``full``)."""
    H = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    H[0] = 1
    d[0] = n
    H = H / np.sqrt(d)[:, None]
    return jnp.asarray(H if full else H[1:], dtype=dt.default_float_dtype())


def hadamard(n: int, dtype=int):
    """The n x n Hadamard matrix (Sylvester's construction; n a power of 2)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got {n}")
    H = np.array([[1]])
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return jnp.asarray(H, dtype=dtype)


def dft(n: int, scale=None, *, dtype=None):
    """The n x n discrete Fourier transform matrix ``exp(-2 pi i jk / n)``, scaled by None,
    'sqrtn' or 'n'."""
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    dtype = np.dtype(dtype) if dtype is not None else dt.default_complex_dtype()
    k = np.arange(n)
    m = np.exp(-2j * np.pi * np.outer(k, k) / n) if n else np.zeros((0, 0))
    if scale == "sqrtn":
        m = m / math.sqrt(n)
    elif scale == "n":
        m = m / n
    return jnp.asarray(m, dtype=dtype)
