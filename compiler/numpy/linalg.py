"""jaxprc.numpy.linalg: JAX's ``jax.numpy.linalg`` (norms, products, and the factorisations of
``jaxprc.lax.linalg`` with JAX's conventions and derivatives)."""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from jaxprc import lax
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc.ir import dtypes as dt
from jaxprc.lax import linalg as lax_linalg

from .creation import as_array
from ._util import aval_of, broadcast_shapes, canonical_axis, convert


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (any ``ord``, including inf, -inf and 0) over one axis, and the matrix
    norms 'fro', 1, -1, inf, -inf over two; with ``ord=None`` the 2-norm of all of ``axis``
    (the whole array by default). As in JAX, the 2-norm's derivative at zero is NaN."""
    from . import reductions as r
    from . import ufuncs as uf
    x = as_array(x, "norm")
    aval = aval_of(x)
    if not dt.is_inexact(aval.dtype):
        x = convert(x, dt.to_inexact_dtype(aval.dtype))
    if axis is None:
        if ord is not None and aval.ndim > 2:
            raise ValueError(f"norm: ord={ord!r} needs axis for an array of rank {aval.ndim}")
        axes = tuple(range(aval.ndim))
    else:   # kept in the given order: (row, column) matters for matrix norms
        axes = tuple(canonical_axis(a, aval.ndim, "norm")
                     for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis))
    if ord is None or (ord == "fro" and len(axes) == 2) or (ord == 2 and len(axes) == 1):
        return _two_norm(x, axes, keepdims)
    absx = uf.absolute(x)
    if len(axes) == 1:
        if ord == np.inf:   # initial=0 (as JAX): defined on empty axes, and 0 ties with |x| = 0
            return r.max(absx, axis=axes, keepdims=keepdims, initial=0)
        if ord == -np.inf:
            return r.min(absx, axis=axes, keepdims=keepdims)
        if ord == 0:
            return r.sum(convert(uf.not_equal(x, 0), aval_of(absx).dtype), axis=axes, keepdims=keepdims)
        if ord == 1:
            return r.sum(absx, axis=axes, keepdims=keepdims)
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")
        p = convert(ord, aval_of(absx).dtype)
        return uf.power(r.sum(uf.power(absx, p), axis=axes, keepdims=keepdims), uf.reciprocal(p))
    if len(axes) != 2:
        raise ValueError(f"norm: axis must name one or two axes, got {axis!r}")
    row, col = axes
    # the largest norms take initial=0 (as JAX): 0 for empty matrices, where the smallest have none
    if ord in (1, -1):      # the largest (smallest) column sum
        sums = r.sum(absx, axis=row, keepdims=True)
        out = r.max(sums, axis=col, keepdims=True, initial=0) if ord == 1 else r.min(sums, axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):      # the largest (smallest) row sum
        sums = r.sum(absx, axis=col, keepdims=True)
        out = r.max(sums, axis=row, keepdims=True, initial=0) if ord > 0 else r.min(sums, axis=row, keepdims=True)
    elif ord in (2, -2, "nuc"):     # from the singular values of the (row, col) matrices
        from .shape_ops import moveaxis
        sv = svdvals(moveaxis(x, (row, col), (-2, -1)))
        out = r.sum(sv, axis=-1) if ord == "nuc" else r.max(sv, axis=-1, initial=0) if ord == 2 else \
            r.min(sv, axis=-1)
        if keepdims:
            from .shape_ops import expand_dims
            return expand_dims(out, tuple(sorted(axes)))
        return out
    else:
        raise ValueError(f"norm: invalid ord {ord!r} for a matrix norm")
    if not keepdims:
        from .shape_ops import squeeze
        out = squeeze(out, axes)
    return out


def _two_norm(x, axes, keepdims):
    """``sqrt(sum(|x|^2))``, differentiated as written: at x = 0 the derivative is 0/0 = NaN,
    as JAX's (no subgradient convention)."""
    from . import reductions as r
    from . import ufuncs as uf
    return uf.sqrt(r.sum(uf.real(uf.multiply(x, uf.conj(x))), axis=axes, keepdims=keepdims))


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    from .products import matmul as mm
    return mm(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    from .reductions import _promote_integers
    from .shape_ops import ravel
    x = as_array(x, "vector_norm")
    dtype = aval_of(x).dtype
    if not dt.is_inexact(dtype):
        # JAX sums integer powers (in the sum's widened type) before the root: 64-bit with x64
        x = convert(x, dt.to_inexact_dtype(_promote_integers(dtype)))
    if axis is None:
        return norm(ravel(x), ord=ord, keepdims=False)
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)


def matrix_norm(x, ord="fro", keepdims=False):
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def trace(x, /, *, offset=0, dtype=None):
    from .selection import trace as tr
    return tr(x, offset, -2, -1, dtype=dtype)


def outer(x1, x2):
    from .products import outer as o
    return o(x1, x2)


# ------------------------------------------------------------ factorisations


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _inexact(fn: str, *xs):
    """The operands as arrays of their common inexact dtype (not broadcast)."""
    xs = [as_array(x, fn) for x in xs]
    avals = [aval_of(x, fn) for x in xs]
    dtype, weak = dt.promote_types(*((a.dtype, a.weak_type) for a in avals))
    dtype = dt.to_inexact_dtype(dtype)
    return [convert(x, dtype, weak) for x in xs]


def _square(fn: str, a, what: str = "a"):
    shape = aval_of(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{fn}: {what} must be a square matrix or a batch of them (shape [..., n, n]), "
                         f"got shape {shape}")


def _matrix(fn: str, a):
    if aval_of(a).ndim < 2:
        raise ValueError(f"{fn}: the argument must have at least two dimensions, got shape {aval_of(a).shape}")


def _H(x):
    from .ufuncs import conj
    from .shape_ops import matrix_transpose as mt
    return conj(mt(x)) if dt.is_complex(aval_of(x).dtype) else mt(x)


def _broadcast_batch(a, b, b_core: int):
    """``a`` ([..., m, m]) and ``b`` (core rank ``b_core``) broadcast to common batch dimensions."""
    from .shape_ops import broadcast_to
    sa, sb = aval_of(a).shape, aval_of(b).shape
    batch = broadcast_shapes(sa[:-2], sb[:len(sb) - b_core], fn="solve")
    return broadcast_to(a, batch + sa[-2:]), broadcast_to(b, batch + sb[len(sb) - b_core:])


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    (a,) = _inexact("cholesky", a)
    _square("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def _lu_solve(lu, perm, b):
    """``A^-1 b`` from ``lu(A)`` (``b``: [..., m, n] with ``lu``'s batch)."""
    from .indexing import take_along_axis
    from .shape_ops import broadcast_to
    shape = aval_of(b).shape
    b = take_along_axis(b, broadcast_to(perm[..., None], shape[:-1] + (1,)), axis=-2) if shape[-1] else b
    x = lax_linalg.triangular_solve(lu, b, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)


@custom_jvp
def _solve(a, b):
    lu, _, perm = lax_linalg.lu(a)
    return _lu_solve(lu, perm, b)


@_solve.defjvp
def _solve_jvp(primals, tangents):
    # x = A^-1 b: dx = A^-1 (db - dA x), with A factored once (linear in the tangents, so it transposes).
    a, b = primals
    da, db = tangents
    lu, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu, perm, b)
    return x, _lu_solve(lu, perm, db - da @ x)


def solve(a, b):
    a, b = _inexact("solve", a, b)
    _square("solve", a)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if len(sb) > 1 and len(sa) == len(sb) + 1 and sa[-1] == sb[-1] and sa[-1] != sb[-2]:
        raise ValueError(f"solve: invalid shapes {sa} and {sb}: b must be [..., m, n] or [m] for a "
                         f"[..., m, m] (use solve(a, b[..., None])[..., 0] for a batch of vectors)")
    vector = len(sb) == 1
    if (sb[0] if vector else sb[-2]) != sa[-1]:
        raise ValueError(f"solve: b's leading matrix dimension must be {sa[-1]} for a of shape {sa}, "
                         f"got b of shape {sb}")
    if vector:
        a, b = _broadcast_batch(a, b[:, None], 2)
        return _solve(a, b)[..., 0]
    return _solve(*_broadcast_batch(a, b, 2))


def inv(a):
    (a,) = _inexact("inv", a)
    _square("inv", a)
    from .creation import eye
    from .shape_ops import broadcast_to
    shape = aval_of(a).shape
    return _solve(a, broadcast_to(eye(shape[-1], dtype=aval_of(a).dtype), shape))


def _slogdet_terms(a):
    """sign and log|det| from LU: the product of U's diagonal and the pivots' parity."""
    from . import reductions as r
    from . import ufuncs as uf
    from .creation import arange
    from .selection import diagonal as _diag, where
    dtype = aval_of(a).dtype
    lu, pivots, _ = lax_linalg.lu(a)
    diag = _diag(lu, 0, -2, -1)
    is_zero = r.any(diag == 0, axis=-1)
    n = aval_of(a).shape[-1]
    parity = r.sum(pivots != arange(n, dtype=dt.int32), axis=-1)
    if dt.is_complex(dtype):
        sign = r.prod(diag / uf.abs(diag).astype(dtype), axis=-1)
    else:
        sign = 1
        parity = parity + r.sum(diag < 0, axis=-1)
    sign = where(is_zero, convert(0, dtype), sign * (1 - 2 * (parity % 2)).astype(dtype))
    logdet = where(is_zero, convert(-np.inf, dtype), r.sum(uf.log(uf.abs(diag)).astype(dtype), axis=-1))
    return sign, uf.real(logdet)


@custom_jvp
def _slogdet(a):
    return _slogdet_terms(a)


@_slogdet.defjvp
def _slogdet_jvp(primals, tangents):
    # d log|det A| = Re tr(A^-1 dA); the sign's derivative is zero (real) or i Im(tr) sign (complex).
    from .ufuncs import real
    from .creation import zeros_like
    (a,), (da,) = primals, tangents
    sign, logdet = _slogdet(a)
    dtr = trace(solve(a, da))
    if dt.is_complex(aval_of(a).dtype):
        return (sign, logdet), ((dtr - real(dtr).astype(aval_of(dtr).dtype)) * sign, real(dtr))
    return (sign, logdet), (zeros_like(sign), dtr)


def slogdet(a, *, method=None):
    (a,) = _inexact("slogdet", a)
    _square("slogdet", a)
    if method == "qr":
        if dt.is_complex(aval_of(a).dtype):
            raise NotImplementedError("slogdet: method='qr' is not implemented for complex inputs (as in JAX)")
        return SlogdetResult(*_slogdet_qr(a))
    if method not in (None, "lu"):
        raise ValueError(f"slogdet: unknown method {method!r}; expected 'lu' (None) or 'qr'")
    if aval_of(a).shape[-1] == 0:       # the empty product: det = 1
        from .creation import ones, zeros
        dtype = aval_of(a).dtype
        return SlogdetResult(ones(aval_of(a).shape[:-2], dtype), zeros(aval_of(a).shape[:-2], np.finfo(dtype).dtype))
    return SlogdetResult(*_slogdet(a))


@custom_jvp
def _slogdet_qr(a):
    """From A = Q R: log|det| sums log|r_ii|; the sign is that of prod(r_ii) times det(Q), where
    each Householder reflection actually made (tau != 0) contributes -1."""
    from . import reductions as rd
    from . import ufuncs as uf
    from .selection import diagonal as _diag, where
    n = aval_of(a).shape[-1]
    packed, taus = lax_linalg.geqrf(a)
    d = _diag(packed, 0, -2, -1)
    reflections = rd.prod(where(taus[..., :n - 1] != 0, -1, 1), axis=-1).astype(aval_of(d).dtype)
    return rd.prod(uf.sign(d), axis=-1) * reflections, rd.sum(uf.log(uf.abs(d)), axis=-1)


_slogdet_qr.defjvp(_slogdet_jvp)


def _cofactor_solve(a, b):
    """``det(a)`` and ``adj(a) b`` (= det(a) a^-1 b), defined at singular ``a``: for rank n-1 the
    last pivot of U is replaced so the solve stays finite; for lower ranks the result is 0."""
    from . import reductions as r
    from . import ufuncs as uf
    from .creation import ones, zeros_like, arange
    from .indexing import take_along_axis
    from .selection import where, diagonal as _diag
    from .shape_ops import broadcast_to, concatenate
    dtype = aval_of(a).dtype
    n = aval_of(a).shape[-1]
    lu, pivots, perm = lax_linalg.lu(a)
    diag = _diag(lu, 0, -2, -1)
    parity = r.sum(pivots != arange(n, dtype=dt.int32), axis=-1)
    sign = (1 - 2 * (parity % 2)).astype(dtype)
    without_last = r.prod(diag[..., :-1], axis=-1) * sign    # det(a) without u_nn (1 x 1: the sign)
    det = without_last * diag[..., -1]
    lu = lu.at[..., -1, -1].set(1 / without_last)
    singular = lax_linalg.triangular_solve(lu, ones(aval_of(a).shape[:-1], dtype), left_side=True, lower=False)
    singular = r.any(uf.isnan(singular) | uf.isinf(singular), axis=-1)[..., None, None]
    x = where(singular, zeros_like(b), b)
    x = take_along_axis(x, broadcast_to(perm[..., None], aval_of(x).shape[:-1] + (1,)), axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = concatenate([x[..., :-1, :] * det[..., None, None], x[..., -1:, :]], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return det, where(singular, zeros_like(x), x)


@custom_jvp
def _det(a):
    sign, logdet = _slogdet(a)
    from .ufuncs import exp
    return sign * exp(logdet).astype(aval_of(sign).dtype)


@_det.defjvp
def _det_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    d, adj_da = _cofactor_solve(a, da)
    return d, trace(adj_da)


def det(a):
    (a,) = _inexact("det", a)
    _square("det", a)
    n = aval_of(a).shape[-1]
    if n == 2:
        return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]
    if n == 0:
        from .creation import ones
        return ones(aval_of(a).shape[:-2], aval_of(a).dtype)
    if n == 3:
        return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2] + a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0]
                + a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1] - a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0]
                - a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1] - a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])
    return _det(a)


def eig(a):
    (a,) = _inexact("eig", a)
    _square("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    (a,) = _inexact("eigvals", a)
    _square("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


def eigh(a, UPLO=None, symmetrize_input: bool = True):
    (a,) = _inexact("eigh", a)
    _square("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input: bool = True):
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, subset_by_index=None):
    (a,) = _inexact("svd", a)
    _matrix("svd", a)
    from . import ufuncs as uf
    from .indexing import take_along_axis
    if hermitian:      # from eigh: |w| sorted descending, the signs moved into vh
        w, v = eigh(a)
        s = uf.abs(w)
        order = lax.rev(lax.sort_key_val(s, lax.broadcasted_iota(dt.int32, aval_of(s).shape, aval_of(s).ndim - 1))[1],
                        (aval_of(s).ndim - 1,))
        s = take_along_axis(s, order, axis=-1)
        if not compute_uv:
            return s
        sign = take_along_axis(uf.sign(w), order, axis=-1).astype(aval_of(v).dtype)
        u = take_along_axis(v, order[..., None, :], axis=-1)
        vh = _H(u * sign[..., None, :])
        return SVDResult(u, s, vh)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x, /):
    return svd(x, compute_uv=False)


def qr(a, mode: str = "reduced"):
    (a,) = _inexact("qr", a)
    _matrix("qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: unsupported mode {mode!r}; expected 'reduced', 'complete', 'r' or 'raw'")
    if mode == "raw":      # LAPACK's packed form, transposed as numpy returns it
        h, taus = lax_linalg.geqrf(a)
        return QRResult(matrix_transpose(h), taus)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse from the SVD, singular values below ``rtol * max(s)``
    dropped (JAX's default rtol: 10 * max(m, n) * eps). Differentiated by the closed form."""
    (a,) = _inexact("pinv", a)
    _matrix("pinv", a)
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: pass rtol or rcond, not both")
        rtol = rcond
    from .creation import asarray, empty
    m, n = aval_of(a).shape[-2:]
    dtype = aval_of(a).dtype
    if m == 0 or n == 0:
        return empty(aval_of(a).shape[:-2] + (n, m), dtype)
    real = np.finfo(dtype).dtype
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(np.finfo(dtype).eps)
    rtol = asarray(rtol, dtype=real)
    return _pinv_h(bool(hermitian))(a, rtol)


_PINV = {}


def _pinv_h(hermitian: bool):
    """pinv with a custom jvp (Golub & Pereyra's formula), one per ``hermitian``."""
    if hermitian not in _PINV:
        @custom_jvp
        def f(a, rtol):
            from .selection import where
            u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
            cutoff = rtol[..., None] * s[..., 0:1]
            s = where(s > cutoff, s, np.inf).astype(aval_of(u).dtype)
            return _H(vh) @ (_H(u) / s[..., :, None])

        @f.defjvp
        def f_jvp(primals, tangents):
            a, rtol = primals
            da, _ = tangents
            p = f(a, rtol)
            if hermitian:
                a, da = (a + _H(a)) / 2, (da + _H(da)) / 2
            m, n = aval_of(a).shape[-2:]
            if m >= n:
                s = (p @ _H(p)) @ _H(da)
                t = (_H(da) @ _H(p)) @ p
                dp = -(p @ da) @ p + s - (s @ a) @ p + t - (p @ a) @ t
            else:
                s = p @ (_H(p) @ _H(da))
                t = _H(da) @ (_H(p) @ p)
                dp = -p @ (da @ p) + s - s @ (a @ p) + t - p @ (a @ t)
            return p, dp
        _PINV[hermitian] = f
    return _PINV[hermitian]


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """``(x, resid, rank, s)``: the least-squares solution of ``a x = b`` via the SVD (2-D ``a``)."""
    from . import reductions as r
    from .creation import asarray, empty, zeros, array
    from .selection import where
    from .shape_ops import ravel
    a, b = _inexact("lstsq", a, b)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if len(sa) != 2:
        raise TypeError(f"lstsq: {len(sa)}-dimensional array given. Array must be two-dimensional")
    if len(sb) not in (1, 2):
        raise TypeError(f"lstsq: {len(sb)}-dimensional array given. Array must be one or two-dimensional")
    if sa[0] != sb[0]:
        raise ValueError(f"lstsq: leading dimensions of a {sa} and b {sb} must match")
    vector = len(sb) == 1
    if vector:
        b = b[:, None]
    m, n = sa
    dtype = aval_of(a).dtype
    if m * n == 0:
        s = empty((0,), dtype=np.finfo(dtype).dtype)
        rank = array(0, dtype=dt.default_int_dtype())
        x = zeros((n, aval_of(b).shape[1]), dtype=dtype)
    else:
        eps = float(np.finfo(dtype).eps)
        rcond = eps * max(m, n) if rcond is None else where(asarray(rcond) < 0, eps, rcond)
        u, s, vt = svd(a, full_matrices=False)
        mask = (s > 0) & (s >= asarray(rcond, dtype=aval_of(s).dtype) * s[0])
        rank = r.sum(mask)
        safe = where(mask, s, 1).astype(dtype)
        s_inv = where(mask, 1 / safe, 0)[:, None]
        x = _H(vt) @ (s_inv * (_H(u) @ b))
    if numpy_resid and (_concrete_int(rank) < n or m <= n):
        resid = asarray([], dtype=np.finfo(dtype).dtype)
    else:
        resid = norm(b - a @ x, axis=0) ** 2
    if vector:
        x = ravel(x)
    return x, resid, rank, s


def _concrete_int(x) -> int:
    try:
        return int(x)
    except Exception:
        raise ValueError("lstsq: numpy_resid=True needs a concrete rank (it sets the residuals' shape); "
                         "call it outside jit") from None


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    from . import reductions as r
    from .creation import asarray
    (M,) = _inexact("matrix_rank", M)
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: pass rtol or tol, not both")
        rtol = tol
    if aval_of(M).ndim < 2:
        return r.any(M != 0).astype(dt.int32)
    S = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        sdt = aval_of(S).dtype
        rtol = r.max(S, axis=-1) * asarray(max(aval_of(M).shape[-2:]), sdt) * float(np.finfo(sdt).eps)
    rtol = asarray(rtol)
    return r.sum(S > rtol[..., None], axis=-1)


def cond(x, p=None):
    from . import reductions as r
    from . import ufuncs as uf
    from .selection import where
    (x,) = _inexact("cond", x)
    _matrix("cond", x)
    if aval_of(x).size == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got arr.shape={aval_of(x).shape}")
    if p in (None, 2):
        s = svdvals(x)
        out = s[..., 0] / s[..., -1]
    elif p == -2:
        s = svdvals(x)
        out = s[..., -1] / s[..., 0]
    else:
        _square("cond", x, "x")
        out = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    return where(uf.isnan(out) & ~r.any(uf.isnan(x), axis=(-2, -1)), np.inf, out)


def matrix_power(a, n: int):
    from .creation import eye
    from .shape_ops import broadcast_to
    a = as_array(a, "matrix_power")
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    shape = aval_of(a).shape
    if n == 0:
        return broadcast_to(eye(shape[-1], dtype=aval_of(a).dtype), shape)
    if n < 0:
        a, n = inv(a), -n
    result, z = None, a           # binary powering
    while n:
        if n & 1:
            result = z if result is None else result @ z
        n >>= 1
        if n:
            z = z @ z
    return result


def matrix_transpose(x, /):
    from .shape_ops import matrix_transpose as mt
    return mt(x)


def diagonal(x, /, *, offset: int = 0):
    from .selection import diagonal as d
    return d(x, offset, -2, -1)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices (the first/last may be vectors), left to right."""
    from .products import matmul as mm
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expected at least two arrays, got {len(arrays)}")
    out = arrays[0]
    for x in arrays[1:]:
        out = mm(out, x, precision=precision)
    return out


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    from .products import tensordot as td
    return td(x1, x2, axes, precision=precision, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    from .products import vecdot as vd
    return vd(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (the Array API's linalg.cross)."""
    from .shape_ops import moveaxis, stack
    x1, x2 = as_array(x1, "cross"), as_array(x2, "cross")
    if aval_of(x1).shape[axis] != 3 or aval_of(x2).shape[axis] != 3:
        raise ValueError(f"cross: both inputs must have size 3 along axis {axis}, got shapes "
                         f"{aval_of(x1).shape} and {aval_of(x2).shape}")
    a, b = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    c = stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1], a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
               a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)
    return moveaxis(c, -1, axis)


def tensorinv(a, ind: int = 2):
    from .shape_ops import reshape
    a = as_array(a, "tensorinv")
    shape = aval_of(a).shape
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    out_shape, in_shape = shape[:ind], shape[ind:]
    rows, cols = int(np.prod(out_shape)), int(np.prod(in_shape))
    if rows != cols:
        raise ValueError(f"tensorinv: prod(a.shape[:ind]) ({rows}) must equal prod(a.shape[ind:]) ({cols})")
    return reshape(inv(reshape(a, (rows, cols))), in_shape + out_shape)


def tensorsolve(a, b, axes=None):
    from .shape_ops import moveaxis, reshape
    a, b = as_array(a, "tensorsolve"), as_array(b, "tensorsolve")
    if axes is not None:
        a = moveaxis(a, axes, tuple(range(aval_of(a).ndim - len(axes), aval_of(a).ndim)))
    bshape, ashape = aval_of(b).shape, aval_of(a).shape
    out_shape = ashape[len(bshape):]
    rows, cols = int(np.prod(bshape)), int(np.prod(out_shape))
    if ashape[:len(bshape)] != bshape or rows != cols:
        raise ValueError(f"tensorsolve: a's leading dimensions must be b's shape {bshape} and the rest must "
                         f"have as many elements, got a of shape {ashape}")
    return reshape(solve(reshape(a, (rows, cols)), reshape(b, (rows,))), out_shape)
