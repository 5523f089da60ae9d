"""Linear algebra: jaxprc.lax.linalg primitives, jaxprc.numpy.linalg, jaxprc.scipy.linalg.

Oracles: reconstruction identities (Q R = A, U S V^H = A, P L U = A, V diag(w) V^H = A, ...),
numpy.linalg, central finite differences for every jvp (float64), transposition identities
<vjp ct, t> = <ct, jvp t>, vmap against a loop, and the text round trip of programs holding
each primitive.
"""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
import jaxprc.scipy.linalg as jsl
from jaxprc.lax import linalg as la
from roundtrip import assert_round_trip

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def x64():
    jx.config.update("jax_enable_x64", True)
    yield
    jx.config.update("jax_enable_x64", False)


def randn(*shape, dtype=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def spd(n, dtype=np.float64, batch=()):
    a = randn(*batch, n, n, dtype=dtype)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def H(x):
    return np.conj(np.swapaxes(np.asarray(x), -1, -2))


def tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


# ------------------------------------------------------------ reconstruction

@jx.jit
def _factorisations(a, s, x43, x35, x53, b, dl, d, du):
    return dict(chol=la.cholesky(s), eigh=la.eigh(s), eig=la.eig(a), schur=la.schur(a),
                hess=jsl.hessenberg(a, calc_q=True), solve=jnp.linalg.solve(a, b),
                tri=la.tridiagonal_solve(dl, d, du, b),
                rect={k: dict(lu=la.lu(x), qr=la.qr(x), qr_reduced=la.qr(x, full_matrices=False),
                              qr_pivoting=la.qr(x, pivoting=True), svd=la.svd(x),
                              svd_reduced=la.svd(x, full_matrices=False))
                      for k, x in (("square", x43), ("wide", x35), ("tall", x53))})


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_factorisations_reconstruct_their_input(dtype):
    t = tol(dtype)
    a, s, b = randn(2, 4, 4, dtype=dtype), spd(4, dtype, (2,)).astype(dtype), randn(2, 4, 3, dtype=dtype)
    xs = dict(square=randn(2, 4, 4, dtype=dtype), wide=randn(2, 3, 5, dtype=dtype), tall=randn(2, 5, 3, dtype=dtype))
    dl, d, du = randn(2, 4, dtype=dtype), randn(2, 4, dtype=dtype) + 5, randn(2, 4, dtype=dtype)
    out = jx.tree_util.tree_map(np.asarray, _factorisations(a, s, xs["square"], xs["wide"], xs["tall"], b, dl, d, du))
    L = out["chol"]
    np.testing.assert_allclose(L @ H(L), s, atol=t * 20)
    assert np.all(np.triu(L, 1) == 0)
    for key, x in xs.items():
        r = out["rect"][key]
        m, n = x.shape[-2:]
        k = min(m, n)
        lu, piv, perm = r["lu"]
        low = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
        np.testing.assert_allclose(low @ np.triu(lu[..., :k, :]), np.take_along_axis(x, perm[..., None], -2),
                                   atol=t * 10)
        assert piv.shape == (2, k) and perm.dtype == np.int32
        for name in ("qr", "qr_reduced"):
            q, rr = r[name]
            np.testing.assert_allclose(q @ rr, x, atol=t * 10)
            np.testing.assert_allclose(H(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), (2,) + (q.shape[-1],) * 2),
                                       atol=t * 10)
        q, rr, p = r["qr_pivoting"]
        np.testing.assert_allclose(q @ rr, np.take_along_axis(x, p[..., None, :], -1), atol=t * 10)
        for name in ("svd", "svd_reduced"):
            u, sv, vh = r[name]
            np.testing.assert_allclose((u[..., :, :k] * sv[..., None, :]) @ vh[..., :k, :], x, atol=t * 10)
            assert np.all(np.diff(sv, axis=-1) <= 0) and sv.dtype == np.finfo(dtype).dtype
    v, w = out["eigh"]
    np.testing.assert_allclose((v * w[..., None, :]) @ H(v), s, atol=t * 100)
    assert np.all(np.diff(w, axis=-1) >= 0)
    w, vl, vr = out["eig"]
    np.testing.assert_allclose(a @ vr, vr * w[..., None, :], atol=t * 20)
    np.testing.assert_allclose(H(vl) @ a, w[..., :, None] * H(vl), atol=t * 20)
    T, Z = out["schur"]
    np.testing.assert_allclose(Z @ T @ H(Z), a, atol=t * 20)
    h, q = out["hess"]
    np.testing.assert_allclose(q @ h @ H(q), a, atol=t * 20)
    assert np.all(np.tril(h, -2) == 0)
    np.testing.assert_allclose(a @ out["solve"], b, atol=t * 100)
    tri = (np.eye(4, k=-1) * dl[..., :, None] + np.eye(4) * d[..., :, None] + np.eye(4, k=1) * du[..., :, None])
    np.testing.assert_allclose(tri @ out["tri"], b, atol=t * 20)


TRI_FLAGS = [dict(left_side=ls, lower=lo, transpose_a=tr, conjugate_a=cj, unit_diagonal=ud)
             for ls in (True, False) for lo in (True, False) for tr in (True, False) for cj in (True, False)
             for ud in (True, False)][::4]


def _tri_operands(flags, dtype=np.complex128):
    a = randn(4, 4, dtype=dtype) + 4 * np.eye(4)
    a = np.tril(a) if flags["lower"] else np.triu(a)
    b = randn(4, 2, dtype=dtype) if flags["left_side"] else randn(2, 4, dtype=dtype)
    return a, b


def _op(a, flags):
    a = a - np.diag(np.diag(a)) + np.eye(len(a)) if flags["unit_diagonal"] else a
    a = a.T if flags["transpose_a"] else a
    return np.conj(a) if flags["conjugate_a"] else a


@pytest.mark.parametrize("flags", TRI_FLAGS)
def test_triangular_solve_flags(flags):
    a, b = _tri_operands(flags)
    x = np.asarray(la.triangular_solve(a, b, **flags))
    op = _op(a, flags)
    np.testing.assert_allclose(op @ x if flags["left_side"] else x @ op, b, atol=1e-10)


# ------------------------------------------------------- derivatives (f64)

def _fd(f, x, t, eps=1e-6):
    f = jx.jit(f)
    hi, lo = f(x + eps * t), f(x - eps * t)
    return jx.tree_util.tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), hi, lo)


def assert_jvp_matches_fd(f, x, t, rtol=1e-5):
    _, tangent = jx.jit(lambda x, t: jx.jvp(f, (x,), (t,)))(x, t)
    for got, want in zip(jx.tree_util.tree_leaves(tangent), jx.tree_util.tree_leaves(_fd(f, x, t))):
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


A4, T4 = randn(4, 4), randn(4, 4)
S4 = spd(4)
A53, T53 = randn(5, 3), randn(5, 3)
JVP_CASES = {
    "cholesky": (lambda a: la.cholesky(a), S4, T4 + T4.T),
    "lu": (lambda a: la.lu(a)[0], A4, T4),
    "lu_wide": (lambda a: la.lu(a)[0], A53.T, T53.T),
    "lu_tall": (lambda a: la.lu(a)[0], A53, T53),
    "qr": (lambda a: la.qr(a, full_matrices=False), A53, T53),
    "qr_pivoting": (lambda a: la.qr(a, pivoting=True)[:2], A4, T4),
    "eigh": (lambda a: (la.eigh(a)[1], jnp.abs(la.eigh(a)[0])), S4, T4 + T4.T),
    "svd_values": (lambda a: la.svd(a, compute_uv=False), A53, T53),
    "svd_vectors_tall": (lambda a: [jnp.abs(x) for x in la.svd(a, full_matrices=False)], A53, T53),
    "svd_vectors_wide": (lambda a: [jnp.abs(x) for x in la.svd(a, full_matrices=False)], A53.T, T53.T),
    "eigvals": (lambda a: la.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0], A4, T4),
    "tridiagonal_solve": (lambda d: la.tridiagonal_solve(0.3 * d, d + 4, -d, A4), A4[0], T4[0]),
    "det": (jnp.linalg.det, randn(5, 5), randn(5, 5)),
    "slogdet": (lambda a: jnp.linalg.slogdet(a)[1], randn(5, 5), randn(5, 5)),
    "inv": (jnp.linalg.inv, A4, T4),
    "solve": (lambda a: jnp.linalg.solve(a, A53[:4]), A4, T4),
    "pinv": (jnp.linalg.pinv, A53, T53),
    "triangular_solve_a": (lambda a: la.triangular_solve(a, A53[:4], left_side=True, lower=True), np.tril(A4) + 4 * np.eye(4),
                           T4),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(JVP_CASES))
def test_jvp_matches_finite_differences(name):
    f, x, t = JVP_CASES[name]
    assert_jvp_matches_fd(f, x, t)


def test_complex_jvps_match_finite_differences():
    c, tc = randn(4, 4, dtype=np.complex128), randn(4, 4, dtype=np.complex128)
    h = spd(4, np.complex128)
    assert_jvp_matches_fd(la.cholesky, h, tc + H(tc))
    assert_jvp_matches_fd(lambda a: la.eigh(a)[1], h, tc + H(tc))
    assert_jvp_matches_fd(lambda a: la.qr(a), c, tc)
    assert_jvp_matches_fd(lambda a: la.lu(a)[0], c, tc)
    assert_jvp_matches_fd(lambda a: la.svd(a, compute_uv=False), c, tc)
    assert_jvp_matches_fd(jnp.linalg.det, c, tc)


@pytest.mark.parametrize("flags", TRI_FLAGS)
def test_triangular_solve_transposes(flags):
    a, b = _tri_operands(flags, np.float64)
    f = jx.jit(lambda b: la.triangular_solve(a, b, **flags))
    t, ct = randn(*b.shape), randn(*b.shape)
    (g,) = jx.jit(lambda b, ct: jx.vjp(f, b)[1](ct))(b, ct)
    np.testing.assert_allclose(np.sum(np.asarray(g) * t), np.sum(ct * np.asarray(f(t))), rtol=1e-10)
    assert_jvp_matches_fd(lambda a: la.triangular_solve(a, b, **flags), a, np.tril(randn(4, 4)) if flags["lower"]
                          else np.triu(randn(4, 4)))


def test_tridiagonal_solve_and_solve_transpose():
    dl, d, du = randn(5), randn(5) + 4, randn(5)
    b, t, ct = randn(5, 2), randn(5, 2), randn(5, 2)
    for f in (lambda b: la.tridiagonal_solve(dl, d, du, b), lambda b: jnp.linalg.solve(A4[:4, :4] + 4 * np.eye(4), b[:4])):
        (g,) = jx.vjp(f, b)[1](ct[:np.shape(f(b))[0]])
        np.testing.assert_allclose(np.sum(np.asarray(g) * t), np.sum(ct[:np.shape(f(b))[0]] * np.asarray(f(t))),
                                   rtol=1e-10)


def test_gradients_of_scalar_programs():
    """grad through reverse mode: a GP marginal likelihood, slogdet, eigvalsh, singular values."""
    y = randn(4)

    def gp(p):
        K = p @ p.T + 0.5 * jnp.eye(4)
        L = jnp.linalg.cholesky(K)
        alpha = jsl.cho_solve((L, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diagonal(L)))
    for f, x in [(gp, A4), (lambda a: jnp.linalg.slogdet(a)[1], A4), (lambda a: jnp.sum(jnp.linalg.eigvalsh(a) ** 3), S4),
                 (lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False) ** 3), A53),
                 (lambda a: jnp.sum(jnp.sin(jsl.expm(a))), 0.5 * A4)]:
        g = np.asarray(jx.jit(jx.grad(f))(x))
        f = jx.jit(f)
        e = np.zeros_like(x)
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e[i] = 1e-6
            fd[i] = (float(f(x + e)) - float(f(x - e))) / 2e-6
            e[i] = 0
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_det_is_differentiable_at_singular_matrices():
    """JAX's cofactor rule: grad det = adj(A)^T, finite at rank n-1 and zero below."""
    a = randn(4, 4)
    a[3] = a[0] + 2 * a[1]
    adj_t = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            adj_t[i, j] = (-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
    np.testing.assert_allclose(jx.grad(jnp.linalg.det)(a), adj_t, atol=1e-10)
    low = np.outer(randn(4), randn(4))
    np.testing.assert_array_equal(jx.grad(jnp.linalg.det)(low), np.zeros((4, 4)))
    assert float(jnp.linalg.slogdet(np.zeros((4, 4)))[1]) == -np.inf


# ---------------------------------------------------------------- batching

def test_vmap_matches_a_loop():
    a, s, b = randn(3, 4, 4), spd(4, batch=(3,)), randn(3, 4, 2)
    cases = [(la.cholesky, (s,)), (lambda x: la.eigh(x), (s,)), (la.lu, (a,)), (la.qr, (a,)), (la.svd, (a,)),
             (lambda x: la.eig(x, compute_left_eigenvectors=False), (a,)), (la.schur, (a,)),
             (la.hessenberg, (a,)), (jnp.linalg.slogdet, (a,)), (jnp.linalg.solve, (a, b)),
             (jnp.linalg.eigvalsh, (s,)),
             (lambda x, y: la.triangular_solve(x, y, left_side=True, lower=True), (a, b)),
             (lambda x, y: la.tridiagonal_solve(x[0], x[1] + 5, x[2], y), (a, b))]
    for f, args in cases:
        got = jx.vmap(f)(*args)
        want = [f(*[x[i] for x in args]) for i in range(3)]
        for g, w in zip(jx.tree_util.tree_leaves(got), zip(*[jx.tree_util.tree_leaves(w) for w in want])):
            np.testing.assert_allclose(np.asarray(g), np.stack([np.asarray(x) for x in w]), atol=1e-10)
    # one operand unbatched, the batch at another axis
    tri, bs = np.tril(a[0]) + 4 * np.eye(4), randn(4, 2, 3)
    x = jx.vmap(lambda y: la.triangular_solve(tri, y, left_side=True, lower=True), in_axes=2, out_axes=2)(bs)
    np.testing.assert_allclose(np.einsum("ij,jkb->ikb", tri, np.asarray(x)), bs, atol=1e-10)


# --------------------------------------------------------------- text form

def test_programs_holding_each_primitive_round_trip_through_text():
    a, s = randn(2, 3, 3), spd(3, batch=(2,))
    progs = [
        jx.make_jaxpr(lambda a, s: (la.cholesky(s), *la.lu(a), *la.qr(a, pivoting=True), *la.eigh(s),
                                    *la.svd(a), *la.eig(a), *la.schur(a), *la.hessenberg(a),
                                    la.triangular_solve(a, s, left_side=True, conjugate_a=True),
                                    la.tridiagonal_solve(a[:, 0], a[:, 1], a[:, 2], s),
                                    la.householder_product(a, a[..., 0, :2]),
                                    la.lu_pivots_to_permutation(la.lu(a)[1], 5)))(a, s),
        jx.make_jaxpr(jx.grad(lambda s: jnp.linalg.slogdet(s)[1] + jnp.sum(la.cholesky(s))))(s[0]),
        jx.make_jaxpr(jx.vmap(lambda a: jnp.linalg.svd(a, compute_uv=False)))(a),
    ]
    for cj, args in zip(progs, [(a, s), (s[0],), (a,)]):
        parsed = assert_round_trip(cj)
        got, want = jx.jit(jx.jaxpr_as_fun(parsed))(*args), jx.jit(jx.jaxpr_as_fun(cj))(*args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-12)


# -------------------------------------------------------------- bad input

def test_bad_shapes_raise_at_trace_time_naming_the_function():
    for f, args, name in [(jnp.linalg.inv, (np.ones((2, 3)),), "inv"), (jnp.linalg.det, (np.ones(3),), "det"),
                          (jnp.linalg.cholesky, (np.ones((2, 3)),), "cholesky"),
                          (jnp.linalg.solve, (np.eye(3), np.ones(4)), "solve"),
                          (jnp.linalg.eigh, (np.ones((3, 2)),), "eigh"), (jsl.expm, (np.ones((3, 2)),), "expm"),
                          (la.triangular_solve, (np.eye(3), np.ones((2, 4)), ), "triangular_solve"),
                          (la.svd, (np.ones(3),), "svd"), (la.lu, (np.ones(3, np.int32),), "lu")]:
        with pytest.raises((ValueError, TypeError), match=name):
            jx.jit(f)(*args)


def test_singular_and_indefinite_inputs_give_jax_values_not_crashes():
    L = np.asarray(jnp.linalg.cholesky(-spd(3)))      # JAX: NaN in the lower triangle, zeros above
    assert np.all(np.isnan(L[np.tril_indices(3)])) and np.all(np.triu(L, 1) == 0)
    x = np.asarray(jnp.linalg.solve(np.zeros((3, 3)), np.ones(3)))
    assert not np.all(np.isfinite(x))
    assert float(jnp.linalg.det(np.ones((4, 4)))) == 0.0
    lu, piv, perm = la.lu(np.zeros((3, 3)))
    np.testing.assert_array_equal(lu, np.zeros((3, 3)))
    np.testing.assert_array_equal(perm, [0, 1, 2])
    w = np.asarray(jnp.linalg.eigvalsh(np.full((3, 3), np.nan)))
    assert np.all(np.isnan(w))


def test_empty_matrices():
    assert la.cholesky(np.zeros((0, 0))).shape == (0, 0)
    lu, piv, perm = la.lu(np.zeros((2, 0, 3)))
    assert lu.shape == (2, 0, 3) and piv.shape == (2, 0) and perm.shape == (2, 0)
    u, s, vh = la.svd(np.zeros((3, 0)))
    np.testing.assert_array_equal(u, np.eye(3))
    assert s.shape == (0,) and vh.shape == (0, 0)
    q, r = la.qr(np.zeros((3, 0)))
    np.testing.assert_array_equal(q, np.eye(3))
    assert jnp.linalg.pinv(np.zeros((0, 3))).shape == (3, 0)
    assert float(jnp.linalg.det(np.zeros((0, 0)))) == 1.0


# ------------------------------------------------------ numpy/scipy APIs

def test_numpy_linalg_has_all_of_jax_names_with_numpy_values():
    names = ("cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm matrix_power "
             "matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet solve svd svdvals tensordot "
             "tensorinv tensorsolve trace vecdot vector_norm").split()
    assert [n for n in names if not hasattr(jnp.linalg, n)] == []
    L = jnp.linalg
    a, b, t, h = randn(4, 4), randn(4, 3), randn(6, 2, 3), spd(4)
    ords = (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)
    conds = (None, 1, 2, -2, np.inf, "fro")

    @jx.jit
    def values(a, b, t, h):
        return dict(inv=L.inv(a), slogdet=L.slogdet(a), pinv=L.pinv(b), lstsq=L.lstsq(b, a[:, 0])[:2],
                    rank=L.matrix_rank(b @ b.T), norms=[L.norm(a, o) for o in ords],
                    conds=[L.cond(a, p) for p in conds], power=L.matrix_power(a, -3),
                    eigvals=L.eigvals(a), tensorinv=L.tensorinv(t, ind=1), tensorsolve=L.tensorsolve(t, a[0, :].repeat(2)[:6]),
                    cross=L.cross(a[0, :3], a[1, :3]), multi_dot=L.multi_dot([a, a, b]),
                    hermitian_svd=L.svd(h, hermitian=True), svd=L.svd(h), qr_complete=L.qr(b, mode="complete"),
                    qr_r=L.qr(b, mode="r"))
    v = jx.tree_util.tree_map(np.asarray, values(a, b, t, h))
    np.testing.assert_allclose(v["inv"], np.linalg.inv(a), atol=1e-12)
    np.testing.assert_allclose(v["slogdet"], np.linalg.slogdet(a), atol=1e-12)
    np.testing.assert_allclose(v["pinv"], np.linalg.pinv(b), atol=1e-12)
    wx, wres, wrank, _ = np.linalg.lstsq(b, a[:, 0], rcond=None)
    np.testing.assert_allclose(v["lstsq"][0], wx, atol=1e-12)
    np.testing.assert_allclose(v["lstsq"][1], wres, atol=1e-12)
    assert int(v["rank"]) == 3
    for got, o in zip(v["norms"], ords):
        np.testing.assert_allclose(got, np.linalg.norm(a, o), rtol=1e-12)
    for got, p in zip(v["conds"], conds):
        np.testing.assert_allclose(got, np.linalg.cond(a, p), rtol=1e-10)
    np.testing.assert_allclose(v["power"], np.linalg.matrix_power(a, -3), rtol=1e-10)
    np.testing.assert_allclose(np.sort_complex(v["eigvals"]), np.sort_complex(np.linalg.eigvals(a)), atol=1e-10)
    np.testing.assert_allclose(v["tensorinv"], np.linalg.tensorinv(t, 1), atol=1e-10)
    np.testing.assert_allclose(np.tensordot(t, v["tensorsolve"], 2), a[0, :].repeat(2)[:6], atol=1e-10)
    np.testing.assert_allclose(v["cross"], np.cross(a[0, :3], a[1, :3]))
    np.testing.assert_allclose(v["multi_dot"], a @ a @ b, rtol=1e-12)
    u, sv, vh = v["hermitian_svd"]
    np.testing.assert_allclose(sv, v["svd"][1], rtol=1e-12)
    np.testing.assert_allclose((u * sv) @ vh, h, atol=1e-10)
    assert v["qr_complete"][0].shape == (4, 4) and v["qr_r"].shape == (3, 3)
    assert L.eigh(spd(3))._fields == ("eigenvalues", "eigenvectors")
    assert L.svd(a)._fields == ("U", "S", "Vh") and L.slogdet(a)._fields == ("sign", "logabsdet")


def test_scipy_linalg_functions():
    a, s, b, e, c, bs, d, off = randn(4, 4), spd(4), randn(4, 3), randn(4, 4), randn(4, 3), randn(3, 3), randn(5), randn(4)
    x = 0.3 * a

    @jx.jit
    def values(a, s, b, e, c, bs, d, off, x):
        return dict(cho_u=jsl.cho_solve(jsl.cho_factor(s), b), cho_l=jsl.cho_solve(jsl.cho_factor(s, lower=True), b),
                    lu_solve=[jsl.lu_solve(jsl.lu_factor(a), b, trans=t) for t in (0, 1, 2)], plu=jsl.lu(a),
                    solve=[jsl.solve(s, b, assume_a=k) for k in ("gen", "sym", "her", "pos")],
                    funm=jsl.funm(x, jnp.exp), frechet=jsl.expm_frechet(x, e), sqrtm=jsl.sqrtm(s),
                    polar=jsl.polar(a),
                    sylvester=[jsl.solve_sylvester(a, bs, c, method=m) for m in ("schur", "eigen")],
                    geigh=jsl.eigh(s, s + jnp.eye(4)), csf=jsl.rsf2csf(*jsl.schur(a)),
                    tridiag=jsl.eigh_tridiagonal(d, off, eigvals_only=True))
    v = jx.tree_util.tree_map(np.asarray, values(a, s, b, e, c, bs, d, off, x))
    np.testing.assert_allclose(v["cho_u"], np.linalg.solve(s, b), atol=1e-10)
    np.testing.assert_allclose(v["cho_l"], np.linalg.solve(s, b), atol=1e-10)
    for trans, got in enumerate(v["lu_solve"]):
        np.testing.assert_allclose((a if trans == 0 else a.T) @ got, b, atol=1e-10)
    p, l_, u = v["plu"]
    np.testing.assert_allclose(p @ l_ @ u, a, atol=1e-12)
    for got in v["solve"]:
        np.testing.assert_allclose(got, np.linalg.solve(s, b), atol=1e-10)
    taylor = taylor_expm(x)      # expm against its Taylor series, funm(exp), and the Fréchet derivative
    np.testing.assert_allclose(v["funm"], taylor, atol=1e-10)
    value, frechet = v["frechet"]
    np.testing.assert_allclose(frechet, (taylor_expm(x + 1e-6 * e) - taylor_expm(x - 1e-6 * e)) / 2e-6, atol=1e-6)
    np.testing.assert_allclose(value, taylor, atol=1e-12)
    np.testing.assert_allclose(v["sqrtm"] @ v["sqrtm"], s, atol=1e-10)
    u, pos = v["polar"]
    np.testing.assert_allclose(u @ pos, a, atol=1e-10)
    np.testing.assert_allclose(u.T @ u, np.eye(4), atol=1e-10)
    for xs in v["sylvester"]:
        np.testing.assert_allclose(a @ xs + xs @ bs, c, atol=1e-9)
    w, vec = v["geigh"]
    np.testing.assert_allclose(s @ vec, (s + np.eye(4)) @ vec * w, atol=1e-10)
    T, Z = v["csf"]
    np.testing.assert_allclose(Z @ T @ H(Z), a, atol=1e-10)
    assert np.allclose(np.tril(T, -1), 0)
    np.testing.assert_allclose(v["tridiag"], np.linalg.eigvalsh(np.diag(d) + np.diag(off, 1) + np.diag(off, -1)),
                               atol=1e-12)


def taylor_expm(x):
    return sum(np.linalg.matrix_power(x, k) / np.prod(np.arange(1.0, k + 1)) for k in range(30))


def test_scipy_special_matrices():
    v = randn(5)

    @jx.jit
    def build(v):
        return dict(toeplitz=jsl.toeplitz(jnp.array([1., 2, 3]), jnp.array([1., 4, 5, 6])),
                    hankel=jsl.hankel(jnp.array([1., 2, 3]), jnp.array([3., 4, 5])),
                    circulant=jsl.circulant(jnp.array([1., 2, 3])), companion=jsl.companion(jnp.array([1., 2, 3])),
                    block_diag=jsl.block_diag(jnp.ones((1, 2)), 2 * jnp.ones((2, 1))), hilbert=jsl.hilbert(3),
                    invhilbert=jsl.invhilbert(4) @ jsl.hilbert(4), invpascal=jsl.invpascal(4) @ jsl.pascal(4),
                    hadamard=jsl.hadamard(4), dft=jsl.dft(4) @ jnp.arange(4.0), helmert=jsl.helmert(4, full=True),
                    conv={m: jsl.convolution_matrix(jnp.array([1., -2, 3]), 5, m) @ v for m in ("full", "same", "valid")},
                    fiedler_companion=jsl.fiedler_companion(jnp.array([1., 2, 3, 4, 5])),
                    leslie=jsl.leslie(jnp.array([0.1, 2.0, 1.0]), jnp.array([0.2, 0.8])),
                    fiedler=jsl.fiedler(jnp.array([1., 4, 2])))
    m = jx.tree_util.tree_map(np.asarray, build(v))
    np.testing.assert_allclose(m["toeplitz"], [[1, 4, 5, 6], [2, 1, 4, 5], [3, 2, 1, 4]])
    np.testing.assert_allclose(m["hankel"], [[1, 2, 3], [2, 3, 4], [3, 4, 5]])
    np.testing.assert_allclose(m["circulant"], [[1, 3, 2], [2, 1, 3], [3, 2, 1]])
    np.testing.assert_allclose(m["companion"], [[-2, -3], [1, 0]])
    np.testing.assert_allclose(m["block_diag"], [[1, 1, 0], [0, 0, 2], [0, 0, 2]])
    np.testing.assert_allclose(m["hilbert"], 1 / (np.arange(3)[:, None] + np.arange(3) + 1))
    np.testing.assert_allclose(m["invhilbert"], np.eye(4), atol=1e-9)
    np.testing.assert_allclose(m["invpascal"], np.eye(4), atol=1e-12)
    np.testing.assert_array_equal(m["hadamard"] @ m["hadamard"].T, 4 * np.eye(4))
    np.testing.assert_allclose(m["dft"], np.fft.fft(np.arange(4.0)), atol=1e-12)
    np.testing.assert_allclose(m["helmert"] @ m["helmert"].T, np.eye(4), atol=1e-12)
    for mode, got in m["conv"].items():
        np.testing.assert_allclose(got, np.convolve([1., -2, 3], v, mode), atol=1e-12)
    np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(m["fiedler_companion"])),
                               np.sort_complex(np.roots([1, 2, 3, 4, 5])), atol=1e-10)
    np.testing.assert_allclose(m["leslie"], [[0.1, 2, 1], [0.2, 0, 0], [0, 0.8, 0]])
    np.testing.assert_allclose(m["fiedler"], [[0, 3, 1], [3, 0, 2], [1, 2, 0]])


def test_sorting_complex128_keys():
    """eigvals are sorted by users; complex128 keys compare by their float64 parts."""
    z = np.array([1 + 2j, 0 + 5j, 1 - 1j, -2 + 0j])
    np.testing.assert_array_equal(jnp.sort(z), np.sort_complex(z))


def test_without_scipy_the_kernels_raise_a_clear_import_error():
    """jaxlib's LAPACK kernels bind SciPy's LAPACK; without SciPy: an ImportError, never a crash."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['scipy'] = None\n"
            "import numpy as np, jaxprc.numpy as jnp\n"
            "try:\n    jnp.linalg.inv(np.eye(2))\nexcept ImportError as e:\n    print(e)\n"
            "print(float(jnp.sin(0.0)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "install scipy" in out.stdout and out.stdout.strip().endswith("0.0")
