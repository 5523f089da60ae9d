"""Linear algebra (``jaxprc.lax.linalg``): matrix factorisations and solves.

Every primitive takes matrices in its last two dimensions, any leading
dimensions being a batch (the kernels loop over it natively). On the CPU the
factorisations are jaxlib's LAPACK FFI kernels (``runtime.lapack``), as in
JAX; ``cholesky`` and ``triangular_solve`` are StableHLO ops on every other
platform. A kernel that fails (a non positive-definite Cholesky, an
eigensolver that does not converge) yields NaNs for that matrix, as in JAX.
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray
from jaxprc.ir.params import Bool, Int, OneOf, Tuple
from jaxprc.ir.shape_poly import is_constant_shape
from jaxprc.engine import dynamic_shapes
from jaxprc.engine.lowering import LoweringRuleContext
from jaxprc.passes.vmap import axis_size_of, bdim_at_front
from jaxprc.runtime import lapack

from .support.operands import aval

__all__ = ["cholesky", "triangular_solve", "lu", "lu_pivots_to_permutation", "qr", "eigh", "svd", "eig",
           "tridiagonal_solve", "schur", "hessenberg", "householder_product", "geqrf", "ormqr",
           "cholesky_p", "triangular_solve_p", "lu_p", "lu_pivots_to_permutation_p", "qr_p", "eigh_p",
           "svd_p", "eig_p", "tridiagonal_solve_p", "schur_p", "hessenberg_p", "householder_product_p",
           "geqrf_p"]

_LAPACK_DTYPES = (dt.float32, dt.float64, dt.complex64, dt.complex128)


def _jnp():
    from jaxprc import numpy   # imported late: jaxprc.numpy is built on jaxprc.lax
    return numpy


# ----------------------------------------------------------------- typing

def _check_matrix(name: str, x: ShapedArray, square: bool = False, what: str = "operand") -> None:
    if x.dtype not in _LAPACK_DTYPES:
        raise JaxprTypeError(f"{name}: {what} must be float32, float64, complex64 or complex128, "
                             f"got {x.str_short()}")
    if x.ndim < 2:
        raise JaxprTypeError(f"{name}: {what} must be a matrix or a batch of matrices (rank >= 2), "
                             f"got {x.str_short()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise JaxprTypeError(f"{name}: {what} must be a square matrix (or a batch of them), "
                             f"got {x.str_short()}")


def _real_dtype(dtype):
    return np.dtype(np.finfo(dtype).dtype)


def _complex_dtype(dtype):
    return np.dtype(np.result_type(dtype, np.complex64))


def _primitive(name: str, multiple_results: bool = True, **params) -> Primitive:
    prim = Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_params(**params)
    return prim


# -------------------------------------------------------------- batching

def _batch_at_front(prim):
    """Leading dimensions are batch dimensions: every operand gets the batch axis in front."""
    def rule(args, dims, **params):
        size = axis_size_of(args, dims)
        out = prim.bind(*[bdim_at_front(x, d, size) for x, d in zip(args, dims)], **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    batching.primitive_batchers[prim] = rule


# -------------------------------------------------------------- lowering

def _u8(char: str) -> ir.Attribute:
    """A LAPACK character flag ('L', 'N', ...) as the kernels take it: its ASCII code in a ui8."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(char))


def _layout(rank: int, matrix: bool) -> ir.Attribute:
    """Column-major matrices (batch dims outermost) for the kernels' matrices, row-major otherwise."""
    dims = [rank - 2, rank - 1, *range(rank - 3, -1, -1)] if matrix else list(range(rank - 1, -1, -1))
    return ir.DenseIntElementsAttr.get(np.asarray(dims, np.int64), type=ir.IndexType.get())


def _ffi_call(target: str, operands, avals_in, avals_out, **attrs) -> list:
    """One custom call of a jaxlib CPU kernel (registered with XLA on first use). The operands and
    results of the highest rank are the matrices and get column-major layouts, as the kernels
    (LAPACK's Fortran conventions) expect."""
    lapack.ensure_registered()
    rank = max(len(a.shape) for a in avals_in)
    operands, layouts = list(operands), [_layout(len(a.shape), len(a.shape) == rank) for a in avals_in]
    shapes_at = None
    if not all(is_constant_shape(a.shape) for a in avals_out):
        # symbolic sizes (export): the results' shapes follow as operands, which shape refinement
        # reads to make the result types static (and then drops), as in JAX's modules
        shapes_at = np.arange(len(operands), len(operands) + len(avals_out), dtype=np.int64)
        operands += [dynamic_shapes.shape_value(a.shape) for a in avals_out]
        layouts += [_layout(1, False)] * len(avals_out)
    op = hlo.CustomCallOp(
        [mlir.aval_to_ir_type(a) for a in avals_out], operands, target,
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        backend_config=ir.DictAttr.get(attrs),
        operand_layouts=ir.ArrayAttr.get(layouts),
        result_layouts=ir.ArrayAttr.get([_layout(len(a.shape), len(a.shape) == rank) for a in avals_out]))
    if shapes_at is not None:
        op.attributes["indices_of_shape_operands"] = ir.DenseIntElementsAttr.get(shapes_at)
    return list(op.results)


def _lapack_call(routine: str, dtype, operands, avals_in, avals_out, **attrs) -> list:
    """The LAPACK ``routine`` (``getrf``, ...) for ``dtype``."""
    return _ffi_call(lapack.target(routine, dtype), operands, avals_in, avals_out, **attrs)


def _emit(ctx, fn, args, avals) -> list:
    """Lower the traceable ``fn(*args)`` (results as a list) in place: the post-processing
    around the kernels is written with lax, not by hand in StableHLO."""
    sub = LoweringRuleContext(ctx.module_context, None, avals, [])
    return mlir.lower_fun(fn)(sub, *args)


def _info_aval(x: ShapedArray) -> ShapedArray:
    return ShapedArray(x.shape[:-2], dt.int32)


def _nan_unless(ok, x):
    """``x`` where the batch member's ``ok`` holds, else NaN (``ok`` has the batch shape). The
    post-processing uses lax only: its dtypes are exactly the kernels' (no numpy promotion)."""
    shape = aval(x).shape
    ok = lax.broadcast_in_dim(ok, shape, tuple(range(aval(ok).ndim)))
    return lax.select(ok, x, lax.full_like(x, np.nan))


def _triangle(x, lower: bool, k: int = 0):
    """``x``'s lower (j <= i + k) or upper (j >= i + k) triangle, zeros elsewhere."""
    shape = aval(x).shape
    i = lax.broadcasted_iota(dt.int32, shape, len(shape) - 2)
    j = lax.broadcasted_iota(dt.int32, shape, len(shape) - 1)
    keep = lax.le(j, lax.add(i, k)) if lower else lax.ge(j, lax.add(i, k))
    return lax.select(keep, x, lax.full_like(x, 0))


def _identity(shape, dtype):
    """Identity matrices (ones where row == column) of ``shape`` [..., m, n]."""
    i = lax.broadcasted_iota(dt.int32, shape, len(shape) - 2)
    j = lax.broadcasted_iota(dt.int32, shape, len(shape) - 1)
    return lax.convert_element_type(lax.eq(i, j), dtype)


def _empty(x: ShapedArray) -> bool:
    return 0 in x.shape


# ------------------------------------------------------------- helpers

def _H(x):
    """Conjugate transpose of the last two dimensions."""
    return lax.conj(_T(x)) if dt.is_complex(aval(x).dtype) else _T(x)


def _T(x):
    n = aval(x).ndim
    return lax.transpose(x, (*range(n - 2), n - 1, n - 2))


def _symmetrize(x):
    """``(x + x^H) / 2``: the Hermitian part JAX factorises when ``symmetrize_input``."""
    return (x + _H(x)) / 2


def _check_implementation(name: str, choice, *supported: str) -> None:
    """JAX's implementation/algorithm selectors, by enum member or name: the CPU supports the
    LAPACK ones."""
    label = getattr(choice, "name", choice)
    if label is not None and str(label).lower() not in supported:
        raise NotImplementedError(f"{name}: {label} is not implemented on the CPU; supported: "
                                  f"{', '.join(('None',) + supported)}")


def _zeros(a: ShapedArray):
    return lax.full(a.shape, 0, a.dtype)


# =============================================================== cholesky

cholesky_p = _primitive("cholesky", multiple_results=False)


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x, square=True)
    return ShapedArray(x.shape, x.dtype)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor ``L`` of ``x = L L^H`` (NaN where ``x`` is not positive definite)."""
    if symmetrize_input:
        x = _symmetrize(x)
    return cholesky_p.bind(x)


def _cholesky_jvp(primals, tangents):
    # L^-1 dA L^-H, its lower triangle with the diagonal halved, times L (Murray 2016, eq. 8).
    (x,), (t,) = primals, tangents
    L = cholesky_p.bind(x)
    t = ad.instantiate_zeros(t)
    jnp = _jnp()
    tmp = triangular_solve(L, t, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    n = aval(x).shape[-1]
    phi = jnp.tril(inner) / (1 + jnp.eye(n, dtype=aval(x).dtype))
    return L, L @ phi


ad.primitive_jvps[cholesky_p] = _cholesky_jvp
_batch_at_front(cholesky_p)


def _cholesky_lowering(ctx, x):
    return [hlo.CholeskyOp(x, lower=True).result]


def _cholesky_cpu_lowering(ctx, x):
    (x_aval,) = ctx.avals_in
    if _empty(x_aval):
        return [x]
    factor, info = _lapack_call("potrf", x_aval.dtype, [x], [x_aval], [x_aval, _info_aval(x_aval)], uplo=_u8("L"))
    return _emit(ctx, lambda f, i: [_triangle(_nan_unless(i == 0, f), lower=True)], [factor, info],
                 [x_aval, _info_aval(x_aval)])


mlir.register_lowering(cholesky_p, _cholesky_lowering)
mlir.register_lowering(cholesky_p, _cholesky_cpu_lowering, platform="cpu")


# ======================================================= triangular_solve

triangular_solve_p = _primitive("triangular_solve", multiple_results=False, left_side=Bool(), lower=Bool(),
                                transpose_a=Bool(), conjugate_a=Bool(), unit_diagonal=Bool())


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _check_matrix("triangular_solve", a, square=True, what="a")
    _check_matrix("triangular_solve", b, what="b")
    if a.dtype != b.dtype:
        raise JaxprTypeError(f"triangular_solve: a and b must have equal dtypes, got {a.str_short()} "
                             f"and {b.str_short()}")
    if a.shape[:-2] != b.shape[:-2]:
        raise JaxprTypeError(f"triangular_solve: a and b must have equal batch dimensions, got "
                             f"{a.str_short()} and {b.str_short()}")
    common = b.shape[-2] if left_side else b.shape[-1]
    if common != a.shape[-1]:
        side = "rows" if left_side else "columns"
        raise JaxprTypeError(f"triangular_solve: b's {side} must match a's size with left_side={left_side}, "
                             f"got {a.str_short()} and {b.str_short()}")
    return ShapedArray(b.shape, b.dtype)


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` with ``a`` triangular;
    ``op`` transposes and/or conjugates ``a``. ``b`` may lack the trailing matrix dimension."""
    a_aval, b_aval = aval(a), aval(b)
    conjugate_a = bool(conjugate_a) and dt.is_complex(a_aval.dtype)
    vector = b_aval.ndim == a_aval.ndim - 1
    if vector:
        b = lax.expand_dims(b, (b_aval.ndim if left_side else b_aval.ndim - 1,))
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                  unit_diagonal=bool(unit_diagonal))
    if vector:
        out = lax.squeeze(out, (aval(out).ndim - 1 if left_side else aval(out).ndim - 2,))
    return out


def _triangular_solve_jvp(primals, tangents, **params):
    a, b = primals
    ta, tb = tangents
    x = triangular_solve_p.bind(a, b, **params)
    jnp = _jnp()
    out = None
    if not isinstance(tb, ad.Zero):
        out = triangular_solve_p.bind(a, tb, **params)
    if not isinstance(ta, ad.Zero):
        # d(op(a)^-1 b) = -op(a)^-1 op(da) x, only da's triangle counting (not its diagonal
        # when unit_diagonal).
        k = 1 if params["unit_diagonal"] else 0
        da = jnp.tril(ta, -k) if params["lower"] else jnp.triu(ta, k)
        if params["transpose_a"]:
            da = _T(da)
        if params["conjugate_a"]:
            da = lax.conj(da)
        rhs = da @ x if params["left_side"] else x @ da
        term = -triangular_solve_p.bind(a, rhs, **params)
        out = term if out is None else out + term
    return x, out


def _triangular_solve_transpose(ct, a, b, **params):
    if ad.is_undefined_primal(a):
        raise NotImplementedError("triangular_solve: transposition with respect to a (it is not linear in a)")
    if isinstance(ct, ad.Zero):
        return [None, ad.Zero(b.aval)]
    # The transpose of b -> op(a)^-1 b is ct -> op(a)^-T ct: the same solve with a transposed.
    flipped = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **flipped)]


ad.primitive_jvps[triangular_solve_p] = _triangular_solve_jvp
ad.primitive_transposes[triangular_solve_p] = _triangular_solve_transpose
_batch_at_front(triangular_solve_p)


def _hlo_conj(x):
    return hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))


def _triangular_solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    if conjugate_a and not transpose_a:      # StableHLO conjugates only with a transpose (ADJOINT)
        a = _hlo_conj(a)
    mode = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
    return [hlo.TriangularSolveOp(a, b, left_side, lower, unit_diagonal, hlo.TransposeAttr.get(mode)).result]


mlir.register_lowering(triangular_solve_p, _triangular_solve_lowering)


def _triangular_solve_cpu_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """LAPACK's trsm, as JAX on the CPU (XLA's own expansion is slower on large matrices)."""
    a_aval, b_aval = ctx.avals_in
    if _empty(a_aval) or _empty(b_aval):
        return [b]
    if conjugate_a and not transpose_a:      # trsm conjugates only with a transpose ('C')
        a = _hlo_conj(a)
    trans = ("C" if conjugate_a else "T") if transpose_a else "N"
    return _lapack_call("trsm", a_aval.dtype, [a, b], [a_aval, b_aval], [b_aval], side=_u8("L" if left_side else "R"),
                        uplo=_u8("L" if lower else "U"), trans_x=_u8(trans), diag=_u8("U" if unit_diagonal else "N"))


mlir.register_lowering(triangular_solve_p, _triangular_solve_cpu_lowering, platform="cpu")


# ===================================================================== lu

lu_p = _primitive("lu")
lu_pivots_to_permutation_p = _primitive("lu_pivots_to_permutation", multiple_results=False,
                                        permutation_size=Int(min=0))


@lu_p.def_abstract_eval
def _lu_abstract_eval(x):
    _check_matrix("lu", x)
    *batch, m, n = x.shape
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), dt.int32),
            ShapedArray((*batch, m), dt.int32)]


@lu_pivots_to_permutation_p.def_abstract_eval
def _lu_pivots_abstract_eval(pivots, *, permutation_size):
    if pivots.dtype != dt.int32 or pivots.ndim < 1:
        raise JaxprTypeError(f"lu_pivots_to_permutation: pivots must be an int32 array of rank >= 1, "
                             f"got {pivots.str_short()}")
    if pivots.shape[-1] > permutation_size:
        raise JaxprTypeError(f"lu_pivots_to_permutation: permutation_size ({permutation_size}) must be at "
                             f"least the number of pivots, got {pivots.str_short()}")
    return ShapedArray((*pivots.shape[:-1], permutation_size), dt.int32)


def lu(x):
    """``(lu, pivots, permutation)`` with ``x[..., permutation, :] = L U``: ``L`` unit lower
    (below ``lu``'s diagonal), ``U`` upper; ``pivots`` are LAPACK's row swaps, 0-based."""
    lu_, pivots, perm = lu_p.bind(x)
    return lu_, pivots, perm


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation the sequential row swaps ``i <-> pivots[i]`` apply to ``range(permutation_size)``."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def _lu_jvp(primals, tangents):
    # With P A = L U: L^-1 P dA U^-1 = (L^-1 dL) + (dU U^-1), split into its strictly lower and
    # upper parts (padded to square factors when A is not square).
    (x,), (t,) = primals, tangents
    lu_, pivots, perm = lu_p.bind(x)
    jnp = _jnp()
    *batch, m, n = aval(x).shape
    k = min(m, n)
    dtype = aval(x).dtype
    t = ad.instantiate_zeros(t)
    pt = jnp.take_along_axis(t, jnp.broadcast_to(perm[..., :, None], (*batch, m, n)), axis=-2)
    lower = jnp.pad(jnp.tril(lu_[..., :, :k], -1), [(0, 0)] * len(batch) + [(0, 0), (0, m - k)])
    lower = lower + jnp.eye(m, dtype=dtype)
    upper = jnp.pad(jnp.triu(lu_[..., :k, :]), [(0, 0)] * len(batch) + [(0, n - k), (0, 0)])
    upper = upper + jnp.pad(jnp.eye(n - k, dtype=dtype), [(k, 0), (k, 0)])
    la = triangular_solve(lower, pt, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(upper, la, left_side=False, lower=False)
    l_dot = lower @ jnp.tril(lau, -1)
    u_dot = jnp.triu(lau) @ upper
    return [lu_, pivots, perm], [l_dot + u_dot, ad.Zero(aval(pivots)), ad.Zero(aval(perm))]


ad.primitive_jvps[lu_p] = _lu_jvp
ad.defjvp_zero(lu_pivots_to_permutation_p)
_batch_at_front(lu_p)
_batch_at_front(lu_pivots_to_permutation_p)


def _permutation_of_pivots(pivots, *, permutation_size):
    """Apply the swaps in a loop, one whole-row select per step (batch-friendly, no scatter)."""
    jnp = _jnp()
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    iota = lax.broadcasted_iota(dt.int32, (*batch, permutation_size), len(batch))

    def swap(i, perm):
        j = lax.dynamic_index_in_dim(pivots, i, axis=len(batch), keepdims=True)
        at_i, at_j = iota == i, iota == j
        pi = jnp.sum(jnp.where(at_i, perm, 0), axis=-1, keepdims=True, dtype=dt.int32)
        pj = jnp.sum(jnp.where(at_j, perm, 0), axis=-1, keepdims=True, dtype=dt.int32)
        return jnp.where(at_i, pj, jnp.where(at_j, pi, perm))
    return [lax.fori_loop(0, k, swap, iota) if k else iota]


mlir.register_lowering(lu_pivots_to_permutation_p, mlir.lower_fun(_permutation_of_pivots))


def _lu_cpu_lowering(ctx, x):
    (x_aval,) = ctx.avals_in
    lu_aval, piv_aval, perm_aval = ctx.avals_out
    m = x_aval.shape[-2]
    if _empty(x_aval):
        return _emit(ctx, lambda x: [x, _zeros(piv_aval), lu_pivots_to_permutation(_zeros(piv_aval), m)],
                     [x], [x_aval])
    factor, ipiv, info = _lapack_call("getrf", x_aval.dtype, [x], [x_aval], [lu_aval, piv_aval, _info_aval(x_aval)])

    def post(f, ipiv, info):
        pivots = ipiv - 1                  # LAPACK's are 1-based
        return [_nan_unless(info >= 0, f), pivots, lu_pivots_to_permutation(pivots, m)]
    return _emit(ctx, post, [factor, ipiv, info], [lu_aval, piv_aval, _info_aval(x_aval)])


mlir.register_lowering(lu_p, _lu_cpu_lowering, platform="cpu")


# ===================================================================== qr

qr_p = _primitive("qr", pivoting=Bool(), full_matrices=Bool(), use_magma=OneOf(None, Bool()))


@qr_p.def_abstract_eval
def _qr_abstract_eval(x, *, pivoting, full_matrices, use_magma):
    _check_matrix("qr", x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    outs = [ShapedArray((*batch, m, k), x.dtype), ShapedArray((*batch, k, n), x.dtype)]
    return outs + [ShapedArray((*batch, n), dt.int32)] if pivoting else outs


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """``(q, r)`` (and the column permutation ``p`` when ``pivoting``: ``x[..., p] = q r``)."""
    outs = qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices), use_magma=use_magma)
    return tuple(outs)


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    (x,), (dx,) = primals, tangents
    *batch, m, n = aval(x).shape
    outs = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    if m < n or (full_matrices and m != n):
        raise NotImplementedError("qr: the derivative is only defined for m >= n with reduced matrices "
                                  "(full_matrices=False, or square inputs), as in JAX")
    jnp = _jnp()
    q, r = outs[:2]
    dx = ad.instantiate_zeros(dx)
    if pivoting:
        dx = jnp.take_along_axis(dx, jnp.broadcast_to(outs[2][..., None, :], aval(dx).shape), axis=-1)
    # Q^H dA R^-1 splits into a skew-Hermitian part (Q^H dQ) and an upper one (dR R^-1).
    dx_rinv = triangular_solve(r, dx)
    qt_dx_rinv = _H(q) @ dx_rinv
    low = jnp.tril(qt_dx_rinv, -1)
    do = low - _H(low)
    if dt.is_complex(aval(x).dtype):     # the imaginary diagonal belongs to the skew part
        do = do + jnp.eye(n, dtype=aval(x).dtype) * (qt_dx_rinv - jnp.real(qt_dx_rinv).astype(aval(x).dtype))
    dq = q @ (do - qt_dx_rinv) + dx_rinv
    dr = (qt_dx_rinv - do) @ r
    tangents_out = [dq, dr] + ([ad.Zero(aval(outs[2]))] if pivoting else [])
    return list(outs), tangents_out


ad.primitive_jvps[qr_p] = _qr_jvp
_batch_at_front(qr_p)


def _qr_cpu_lowering(ctx, x, *, pivoting, full_matrices, use_magma):
    (x_aval,) = ctx.avals_in
    *batch, m, n = x_aval.shape
    k = min(m, n)
    dtype = x_aval.dtype
    if _empty(x_aval):
        def empty(x):
            outs = [_identity(ctx.avals_out[0].shape, dtype), _zeros(ctx.avals_out[1])]
            return outs + [lax.broadcasted_iota(dt.int32, (*batch, n), len(batch))] if pivoting else outs
        return _emit(ctx, empty, [x], [x_aval])
    taus_aval = ShapedArray((*batch, k), dtype)
    if pivoting:
        jpvt_aval = ShapedArray((*batch, n), dt.int32)
        jpvt0 = mlir.full(jpvt_aval.shape, 0, dt.int32)
        a, jpvt, taus = _lapack_call("geqp3", dtype, [x, jpvt0], [x_aval, jpvt_aval],
                                     [x_aval, jpvt_aval, taus_aval])
    else:
        a, taus = _lapack_call("geqrf", dtype, [x], [x_aval], [x_aval, taus_aval])
    q_cols = m if full_matrices else k
    q_in_aval = ShapedArray((*batch, m, max(q_cols, k)), dtype)
    nd = len(batch)

    def reflectors(a):      # the Householder vectors, as many columns as q has (orgqr wants m >= cols >= k)
        if q_in_aval.shape[-1] <= n:
            return [a[(...,) + (slice(None), slice(0, q_in_aval.shape[-1]))]]
        return [lax.pad(a, lax.full_like(a, 0, shape=()), ((0, 0, 0),) * (nd + 1) + ((0, q_in_aval.shape[-1] - n, 0),))]
    (q_in,) = _emit(ctx, reflectors, [a], [x_aval])
    (q,) = _lapack_call("orgqr", dtype, [q_in, taus], [q_in_aval, taus_aval], [q_in_aval])  # householder_product

    def post(a, *p):
        r = _triangle(a[..., :ctx.avals_out[1].shape[-2], :], lower=False)
        return [r] + ([p[0] - 1] if pivoting else [])     # LAPACK's jpvt is 1-based
    return [q] + _emit(ctx, post, [a] + ([jpvt] if pivoting else []),
                       [x_aval] + ([jpvt_aval] if pivoting else []))


mlir.register_lowering(qr_p, _qr_cpu_lowering, platform="cpu")


# =================================================================== eigh

eigh_p = _primitive("eigh", lower=Bool(), sort_eigenvalues=Bool(),
                    subset_by_index=OneOf(None, Tuple(Int(min=0), length=2)))


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(x, *, lower, sort_eigenvalues, subset_by_index):
    _check_matrix("eigh", x, square=True)
    n = x.shape[-1]
    if subset_by_index is not None and subset_by_index != (0, n):
        raise NotImplementedError("eigh: subset_by_index is not implemented on CPU (as in JAX)")
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], _real_dtype(x.dtype))]


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None, implementation=None):
    """``(v, w)``: eigenvectors (columns of ``v``) and ascending real eigenvalues of a Hermitian ``x``
    (LAPACK's syevd/heevd)."""
    _check_implementation("eigh", implementation)
    if symmetrize_input:
        x = _symmetrize(x)
    if subset_by_index is not None:
        subset_by_index = tuple(int(i) for i in subset_by_index)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=subset_by_index)
    return v, w


def _eigh_jvp(primals, tangents, **params):
    # dw = diag(V^H dA V); dV = V (F o V^H dA V) with F_ij = 1/(w_j - w_i) off the diagonal.
    (x,), (dx,) = primals, tangents
    v, w_real = eigh_p.bind(x, **params)
    jnp = _jnp()
    dtype = aval(x).dtype
    n = aval(x).shape[-1]
    w = w_real.astype(dtype)
    eye = jnp.eye(n, dtype=dtype)
    f = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    vdv = _H(v) @ ad.instantiate_zeros(dx) @ v
    return [v, w_real], [v @ (f * vdv), jnp.real(jnp.diagonal(vdv, axis1=-2, axis2=-1))]


ad.primitive_jvps[eigh_p] = _eigh_jvp
_batch_at_front(eigh_p)


def _eigh_cpu_lowering(ctx, x, *, lower, sort_eigenvalues, subset_by_index):
    (x_aval,) = ctx.avals_in
    v_aval, w_aval = ctx.avals_out
    if _empty(x_aval):
        return _emit(ctx, lambda x: [x, _zeros(w_aval)], [x], [x_aval])
    v, w, info = _lapack_call("syevd", x_aval.dtype, [x], [x_aval], [v_aval, w_aval, _info_aval(x_aval)],
                              mode=_u8("V"), uplo=_u8("L" if lower else "U"))
    return _emit(ctx, lambda v, w, i: [_nan_unless(i == 0, v), _nan_unless(i == 0, w)], [v, w, info],
                 [v_aval, w_aval, _info_aval(x_aval)])


mlir.register_lowering(eigh_p, _eigh_cpu_lowering, platform="cpu")


# ==================================================================== svd

svd_p = _primitive("svd", full_matrices=Bool(), compute_uv=Bool(),
                   subset_by_index=OneOf(None, Tuple(Int(min=0), length=2)))


def _svd_shapes(shape, full_matrices):
    *batch, m, n = shape
    k = min(m, n)
    return (*batch, k), (*batch, m, m if full_matrices else k), (*batch, n if full_matrices else k, n)


@svd_p.def_abstract_eval
def _svd_abstract_eval(x, *, full_matrices, compute_uv, subset_by_index):
    _check_matrix("svd", x)
    if subset_by_index is not None and subset_by_index != (0, min(x.shape[-2:])):
        raise NotImplementedError("svd: subset_by_index is not implemented on CPU (as in JAX)")
    s, u, vt = _svd_shapes(x.shape, full_matrices)
    s = ShapedArray(s, _real_dtype(x.dtype))
    return [s, ShapedArray(u, x.dtype), ShapedArray(vt, x.dtype)] if compute_uv else [s]


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None):
    """``(u, s, vh)`` with ``x = u diag(s) vh`` (descending ``s``), or ``s`` alone (LAPACK's gesdd; the
    'qr' and 'divide_and_conquer' algorithms give the same factors to rounding)."""
    _check_implementation("svd", algorithm, "default", "qr", "divide_and_conquer")
    if subset_by_index is not None:
        subset_by_index = tuple(int(i) for i in subset_by_index)
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      subset_by_index=subset_by_index)
    return (outs[1], outs[0], outs[2]) if compute_uv else outs[0]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index):
    (a,), (da,) = primals, tangents
    jnp = _jnp()
    dtype = aval(a).dtype
    *batch, m, n = aval(a).shape
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("svd: the derivative is not implemented for full_matrices=True "
                                  "with non-square inputs (as in JAX)")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True, subset_by_index=subset_by_index)
    da = ad.instantiate_zeros(da)
    ut, v = _H(u), _H(vt)
    s_row = s[..., None, :]
    ds_mat = ut @ da @ v
    ds = jnp.real(jnp.diagonal(ds_mat, axis1=-2, axis2=-1))
    if not compute_uv:
        return [s], [ds]
    k = min(m, n)
    eye = jnp.eye(k, dtype=s.dtype)
    diffs = (s_row + _T(s_row)) * (s_row - _T(s_row))
    f = (1 / (diffs + eye) - eye).astype(dtype)
    s_c = s_row.astype(dtype)
    dss = s_c * ds_mat
    sds = _T(s_c) * ds_mat
    s_zero = (s == 0).astype(s.dtype)
    s_inv = (1 / (s + s_zero) - s_zero).astype(dtype)
    du = u @ (f * (dss + _H(dss)) + 0.5 * (ds_mat - _H(ds_mat)) * (eye.astype(dtype) * s_inv[..., None, :]))
    dv = v @ (f * (sds + _H(sds)))
    if m > n:
        dav = da @ v
        du = du + (dav - u @ (ut @ dav)) / s_c
    if n > m:
        dahu = _H(da) @ u
        dv = dv + (dahu - v @ (vt @ dahu)) / s_c
    return [s, u, vt], [ds, du, _H(dv)]


ad.primitive_jvps[svd_p] = _svd_jvp
_batch_at_front(svd_p)


def _svd_cpu_lowering(ctx, x, *, full_matrices, compute_uv, subset_by_index):
    (x_aval,) = ctx.avals_in
    s_shape, u_shape, vt_shape = _svd_shapes(x_aval.shape, full_matrices)
    s_aval = ctx.avals_out[0]
    u_aval, vt_aval = ShapedArray(u_shape, x_aval.dtype), ShapedArray(vt_shape, x_aval.dtype)
    if _empty(x_aval):     # no singular values; u and vh are identities (or empty)
        def empty(x):
            return [_zeros(s_aval)] + ([_identity(a.shape, a.dtype) for a in (u_aval, vt_aval)] if compute_uv else [])
        return _emit(ctx, empty, [x], [x_aval])
    mode = "N" if not compute_uv else ("A" if full_matrices else "S")
    _, s, u, vt, info = _lapack_call("gesdd", x_aval.dtype, [x], [x_aval],
                                     [x_aval, s_aval, u_aval, vt_aval, _info_aval(x_aval)], mode=_u8(mode))
    if not compute_uv:
        return _emit(ctx, lambda s, i: [_nan_unless(i == 0, s)], [s, info], [s_aval, _info_aval(x_aval)])
    return _emit(ctx, lambda *o: [_nan_unless(o[-1] == 0, y) for y in o[:-1]], [s, u, vt, info],
                 [s_aval, u_aval, vt_aval, _info_aval(x_aval)])


mlir.register_lowering(svd_p, _svd_cpu_lowering, platform="cpu")


# ==================================================================== eig

eig_p = _primitive("eig", compute_left_eigenvectors=Bool(), compute_right_eigenvectors=Bool(),
                   enable_eigvec_derivs=Bool())


@eig_p.def_abstract_eval
def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    _check_matrix("eig", x, square=True)
    c = _complex_dtype(x.dtype)
    vecs = [ShapedArray(x.shape, c)] * (int(compute_left_eigenvectors) + int(compute_right_eigenvectors))
    return [ShapedArray(x.shape[:-1], c)] + vecs


def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation=None, use_magma=None):
    """``[w, vl, vr]``: eigenvalues and left/right eigenvectors of a general square ``x`` (CPU only,
    LAPACK's geev). The eigenvectors are differentiable only with ``enable_eigvec_derivs`` (valid
    for distinct eigenvalues; LAPACK's normalisation is differentiated), as in JAX."""
    _check_implementation("eig", implementation, "lapack")
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))


def _eig_vectors_jvp(w, v, da):
    """Eigenvalue and eigenvector tangents for distinct eigenvalues: with P = V^-1 dA V, dw = diag(P)
    and dV = V (F o P) + V diag(c), c fixed by geev's normalisation (unit norm, real largest
    component)."""
    jnp = _jnp()
    n = aval(w).shape[-1]
    eye = jnp.eye(n, dtype=aval(w).dtype)
    f = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    p = jnp.linalg.solve(v, da) @ v
    u = v @ (f * p)
    k = jnp.argmax(jnp.abs(v), axis=-2)
    at_k = (lax.broadcasted_iota(dt.int32, aval(v).shape, aval(v).ndim - 2) == k[..., None, :]).astype(aval(v).dtype)
    c = lax.complex(-jnp.real(jnp.sum(jnp.conj(v) * u, axis=-2)),
                    -jnp.imag(jnp.sum(at_k * u, axis=-2)) / jnp.real(jnp.sum(at_k * v, axis=-2)))
    return jnp.diagonal(p, axis1=-2, axis2=-1), u + v * c[..., None, :]


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError("eig: derivatives of eigenvectors are only valid under assumptions on the "
                                  "input that cannot be checked (distinct eigenvalues); pass "
                                  "enable_eigvec_derivs=True to opt in, as in JAX")
    (x,), (dx,) = primals, tangents
    outs = eig_p.bind(x, compute_left_eigenvectors=compute_left_eigenvectors, compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    jnp = _jnp()
    dx = ad.instantiate_zeros(dx).astype(aval(vr).dtype)
    if not vectors:     # dw_i = (V^-1 dA V)_ii
        return [w], [jnp.sum(jnp.linalg.solve(vr, dx) * _T(vr), axis=-1)]
    dw, dvr = _eig_vectors_jvp(w, vr, dx)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:      # left eigenvectors: right eigenvectors of A^H (eigenvalues conj(w))
        primal_out.append(outs[1])
        tangent_out.append(_eig_vectors_jvp(jnp.conj(w), outs[1], _H(dx))[1])
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


ad.primitive_jvps[eig_p] = _eig_jvp
_batch_at_front(eig_p)


def _eig_cpu_lowering(ctx, x, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    (x_aval,) = ctx.avals_in
    w_aval = ctx.avals_out[0]
    vec_aval = ShapedArray(x_aval.shape, w_aval.dtype)
    if _empty(x_aval):
        return _emit(ctx, lambda x: [_zeros(a) for a in ctx.avals_out], [x], [x_aval])
    real = not dt.is_complex(x_aval.dtype)
    parts = [ShapedArray(w_aval.shape, x_aval.dtype)] * 2 if real else [w_aval]
    outs = _lapack_call("geev", x_aval.dtype, [x], [x_aval], [*parts, vec_aval, vec_aval, _info_aval(x_aval)],
                        compute_left=_u8("V" if compute_left_eigenvectors else "N"),
                        compute_right=_u8("V" if compute_right_eigenvectors else "N"))
    keep = [compute_left_eigenvectors, compute_right_eigenvectors]

    def post(*o):
        *w, vl, vr, info = o
        w = lax.complex(w[0], w[1]) if real else w[0]
        vecs = [v for v, k in zip((vl, vr), keep) if k]
        return [_nan_unless(info == 0, y) for y in [w] + vecs]
    return _emit(ctx, post, outs, [*parts, vec_aval, vec_aval, _info_aval(x_aval)])


mlir.register_lowering(eig_p, _eig_cpu_lowering, platform="cpu")


# ====================================================== tridiagonal_solve

tridiagonal_solve_p = _primitive("tridiagonal_solve", multiple_results=False, perturb_singular=Bool())


@tridiagonal_solve_p.def_abstract_eval
def _tridiagonal_solve_abstract_eval(dl, d, du, b, *, perturb_singular):
    _check_matrix("tridiagonal_solve", b, what="b")
    for name, x in (("dl", dl), ("d", d), ("du", du)):
        if x.dtype != b.dtype or x.shape != b.shape[:-1]:
            raise JaxprTypeError(f"tridiagonal_solve: {name} must have b's dtype and shape without its last "
                                 f"dimension ({b.str_short()}), got {x.str_short()}")
    return ShapedArray(b.shape, b.dtype)


def tridiagonal_solve(dl, d, du, b, *, perturb_singular: bool = False):
    """Solve ``A x = b`` for the tridiagonal ``A`` with sub-, main and super-diagonals ``dl``
    (``dl[..., 0]`` unused), ``d`` and ``du`` (``du[..., -1]`` unused)."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


def _tridiagonal_product(dl, d, du, b):
    """``A b`` for the tridiagonal ``A``: row i is dl_i b_(i-1) + d_i b_i + du_i b_(i+1)."""
    jnp = _jnp()
    nd = aval(b).ndim
    pad = [(0, 0)] * (nd - 2)
    below = jnp.pad(b[..., :-1, :], pad + [(1, 0), (0, 0)])
    above = jnp.pad(b[..., 1:, :], pad + [(0, 1), (0, 0)])
    return dl[..., None] * below + d[..., None] * b + du[..., None] * above


def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    *diags, b = primals
    *ddiags, db = tangents
    x = tridiagonal_solve_p.bind(*primals, perturb_singular=perturb_singular)
    rhs = db
    if not all(isinstance(t, ad.Zero) for t in ddiags):
        prod = _tridiagonal_product(*map(ad.instantiate_zeros, ddiags), x)
        rhs = -prod if isinstance(db, ad.Zero) else db - prod
    if isinstance(rhs, ad.Zero):
        return x, rhs
    return x, tridiagonal_solve_p.bind(*diags, rhs, perturb_singular=perturb_singular)


def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    if any(ad.is_undefined_primal(x) for x in (dl, d, du)):
        raise NotImplementedError("tridiagonal_solve: transposition with respect to the diagonals "
                                  "(it is not linear in them)")
    if isinstance(ct, ad.Zero):
        return [None, None, None, ad.Zero(b.aval)]
    # A^T's sub-diagonal is A's super-diagonal shifted down one row, and vice versa.
    jnp = _jnp()
    dl_t = jnp.concatenate([jnp.zeros_like(du[..., -1:]), du[..., :-1]], axis=-1)
    du_t = jnp.concatenate([dl[..., 1:], jnp.zeros_like(dl[..., :1])], axis=-1)
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct, perturb_singular=perturb_singular)]


ad.primitive_jvps[tridiagonal_solve_p] = _tridiagonal_solve_jvp
ad.primitive_transposes[tridiagonal_solve_p] = _tridiagonal_solve_transpose
_batch_at_front(tridiagonal_solve_p)


def _tridiagonal_solve_cpu_lowering(ctx, dl, d, du, b, *, perturb_singular):
    b_aval = ctx.avals_in[-1]
    if _empty(b_aval):
        return [b]
    if perturb_singular:      # jaxlib's own kernel: near-zero pivots perturbed instead of failing
        return _ffi_call("tridiagonal_solve_perturbed_ffi", [dl, d, du, b], ctx.avals_in, [b_aval])
    outs = _lapack_call("gtsv", b_aval.dtype, [dl, d, du, b], ctx.avals_in, [*ctx.avals_in, _info_aval(b_aval)])
    return _emit(ctx, lambda x, i: [_nan_unless(i == 0, x)], outs[3:], [b_aval, _info_aval(b_aval)])


mlir.register_lowering(tridiagonal_solve_p, _tridiagonal_solve_cpu_lowering, platform="cpu")


# ================================================================== schur

schur_p = _primitive("schur", compute_schur_vectors=Bool())


@schur_p.def_abstract_eval
def _schur_abstract_eval(x, *, compute_schur_vectors):
    _check_matrix("schur", x, square=True)
    return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


def schur(x, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False, select_callable=None):
    """``(t, z)`` with ``x = z t z^H``: ``t`` quasi-upper-triangular (real) or upper (complex)."""
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("schur: sorting the eigenvalues is not implemented (as in JAX)")
    return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors)))


def _no_derivative(name):
    def rule(primals, tangents, **params):
        raise NotImplementedError(f"{name}: no derivative is defined (as in JAX)")
    return rule


ad.primitive_jvps[schur_p] = _no_derivative("schur")
_batch_at_front(schur_p)


def _schur_cpu_lowering(ctx, x, *, compute_schur_vectors):
    (x_aval,) = ctx.avals_in
    if _empty(x_aval):
        return [x] * len(ctx.avals_out)
    info_aval = _info_aval(x_aval)
    w = ShapedArray(x_aval.shape[:-1], x_aval.dtype)
    eigvals = [w, w] if not dt.is_complex(x_aval.dtype) else [w]
    t, z, *_, info = _lapack_call("gees", x_aval.dtype, [x], [x_aval], [x_aval, x_aval, *eigvals, info_aval, info_aval],
                                  mode=_u8("V" if compute_schur_vectors else "N"), sort=_u8("N"))
    outs = [t, z][:len(ctx.avals_out)]
    return _emit(ctx, lambda *o: [_nan_unless(o[-1] == 0, y) for y in o[:-1]], outs + [info],
                 [x_aval] * len(outs) + [info_aval])


mlir.register_lowering(schur_p, _schur_cpu_lowering, platform="cpu")


# ============================================================= hessenberg

hessenberg_p = _primitive("hessenberg")


@hessenberg_p.def_abstract_eval
def _hessenberg_abstract_eval(x):
    _check_matrix("hessenberg", x, square=True)
    n = x.shape[-1]
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*x.shape[:-2], max(n - 1, 0)), x.dtype)]


def hessenberg(x):
    """``(a, taus)``: the upper Hessenberg form in ``a``'s upper triangle and first subdiagonal,
    the Householder reflectors below it with their factors ``taus`` (CPU only)."""
    a, taus = hessenberg_p.bind(x)
    return a, taus


ad.primitive_jvps[hessenberg_p] = _no_derivative("hessenberg")
_batch_at_front(hessenberg_p)


def _hessenberg_cpu_lowering(ctx, x):
    (x_aval,) = ctx.avals_in
    a_aval, taus_aval = ctx.avals_out
    n = x_aval.shape[-1]
    if _empty(x_aval) or n == 1:
        return _emit(ctx, lambda x: [x, _zeros(taus_aval)], [x], [x_aval])
    i32 = ir.IntegerType.get_signless(32)
    a, taus, info = _lapack_call("gehrd", x_aval.dtype, [x], [x_aval], [a_aval, taus_aval, _info_aval(x_aval)],
                                 low=ir.IntegerAttr.get(i32, 1), high=ir.IntegerAttr.get(i32, n))
    return _emit(ctx, lambda a, t, i: [_nan_unless(i == 0, a), _nan_unless(i == 0, t)], [a, taus, info],
                 [a_aval, taus_aval, _info_aval(x_aval)])


mlir.register_lowering(hessenberg_p, _hessenberg_cpu_lowering, platform="cpu")


# ==================================================== householder_product

householder_product_p = _primitive("householder_product", multiple_results=False)


@householder_product_p.def_abstract_eval
def _householder_product_abstract_eval(a, taus):
    _check_matrix("householder_product", a, what="a")
    *batch, m, n = a.shape
    if taus.dtype != a.dtype or taus.shape[:-1] != tuple(batch) or taus.ndim != a.ndim - 1 \
            or not taus.shape[-1] <= n <= m:
        raise JaxprTypeError(f"householder_product: expected a [..., m, n] with m >= n and taus [..., k] with "
                             f"k <= n and a's dtype and batch, got {a.str_short()} and {taus.str_short()}")
    return ShapedArray(a.shape, a.dtype)


def householder_product(a, taus):
    """The product of the Householder reflectors in ``a``'s lower part (factors ``taus``): the
    orthogonal/unitary ``Q`` of ``a``'s shape (CPU only)."""
    return householder_product_p.bind(a, taus)


ad.primitive_jvps[householder_product_p] = _no_derivative("householder_product")
_batch_at_front(householder_product_p)


def ormqr(a, taus, c, *, left: bool = True, transpose: bool = False):
    """``c`` multiplied by the full ``Q`` whose Householder reflectors are ``a``'s lower part
    (factors ``taus``, as ``geqrf`` leaves them): ``Q c`` (``left``) or ``c Q``; with ``transpose``,
    ``Q^H`` instead (the conjugate transpose). Written with the reflectors applied one by one
    (``H_i = I - tau_i v_i v_i^H``), so it differentiates and batches as its operations do."""
    jnp = _jnp()
    a, taus, c = jnp.asarray(a), jnp.asarray(taus), jnp.asarray(c)
    m, k = a.shape[-2], taus.shape[-1]
    if c.shape[-2 if left else -1] != m or k > min(a.shape[-2:]):
        raise TypeError(f"ormqr: a of shape {a.shape} with {k} taus cannot multiply c of shape {c.shape} "
                        f"from the {'left' if left else 'right'}")
    rows = np.arange(m)
    # Q = H_0 ... H_{k-1}: Q c applies the last reflector first, Q^H c the first (conjugated)
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for i in order:
        v = jnp.where(rows > i, a[..., :, i], (rows == i).astype(a.dtype))
        tau = taus[..., i, None, None]
        tau = jnp.conj(tau) if transpose else tau
        if left:     # H c = c - tau v (v^H c)
            c = c - tau * v[..., :, None] * jnp.sum(jnp.conj(v)[..., :, None] * c, axis=-2, keepdims=True)
        else:        # c H = c - tau (c v) v^H
            c = c - tau * jnp.sum(c * v[..., None, :], axis=-1, keepdims=True) * jnp.conj(v)[..., None, :]
    return c


def _householder_product_cpu_lowering(ctx, a, taus):
    a_aval, taus_aval = ctx.avals_in
    if _empty(a_aval):
        return _emit(ctx, lambda a: [_identity(a_aval.shape, a_aval.dtype)], [a], [a_aval])
    return _lapack_call("orgqr", a_aval.dtype, [a, taus], [a_aval, taus_aval], [a_aval])


mlir.register_lowering(householder_product_p, _householder_product_cpu_lowering, platform="cpu")


# ================================================================== geqrf

geqrf_p = _primitive("geqrf")


@geqrf_p.def_abstract_eval
def _geqrf_abstract_eval(x):
    _check_matrix("geqrf", x)
    *batch, m, n = x.shape
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), x.dtype)]


def geqrf(x):
    """``(a, taus)``: LAPACK's packed QR, ``r`` in ``a``'s upper triangle and the Householder
    reflectors below it, with their factors ``taus`` (CPU only; no derivative, as in JAX)."""
    a, taus = geqrf_p.bind(x)
    return a, taus


ad.primitive_jvps[geqrf_p] = _no_derivative("geqrf")
_batch_at_front(geqrf_p)


def _geqrf_cpu_lowering(ctx, x):
    (x_aval,) = ctx.avals_in
    if _empty(x_aval):
        return _emit(ctx, lambda x: [x, _zeros(ctx.avals_out[1])], [x], [x_aval])
    return _lapack_call("geqrf", x_aval.dtype, [x], [x_aval], ctx.avals_out)


mlir.register_lowering(geqrf_p, _geqrf_cpu_lowering, platform="cpu")
