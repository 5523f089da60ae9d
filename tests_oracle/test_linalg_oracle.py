"""Linear algebra against JAX: values, dtypes, gradients (x64), jvp of eigh and vmap of the
factorisations, for jaxprc.numpy.linalg / jaxprc.scipy.linalg / jaxprc.lax.linalg versus
jax.numpy.linalg / jax.scipy.linalg / jax.lax.linalg on the same inputs. Both call the same
LAPACK kernels, so values agree to rounding."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp
import jaxprc.scipy.linalg as xsl
from jaxprc.lax import linalg as xla

RNG = np.random.default_rng(3)


def rand(*shape, dtype=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


A = rand(4, 4)
B = rand(4, 2)
SPD = A @ A.T + 4 * np.eye(4)
TALL = rand(5, 3)
SING = A.copy()
SING[3] = SING[0] - SING[2]


class NS:
    def __init__(self, np_mod, sl):
        self.np, self.sl = np_mod, sl


JAX, OURS = NS(jnp, jsl), NS(xnp, xsl)


def _gp(m, p, y):
    K = p @ p.T + 0.5 * m.np.eye(p.shape[0])
    L = m.np.linalg.cholesky(K)
    alpha = m.sl.cho_solve((L, True), y)
    return 0.5 * y @ alpha + m.np.sum(m.np.log(m.np.diagonal(L)))


SCALAR_FUNS = {   # name -> (fun(m, x), input): values and gradients compared
    "slogdet": (lambda m, x: m.np.linalg.slogdet(x)[1], A),
    "slogdet_qr": (lambda m, x: m.np.linalg.slogdet(x, method="qr")[1] * m.np.linalg.slogdet(x, method="qr")[0], A),
    "slogdet_singular_sign": (lambda m, x: m.np.linalg.slogdet(x)[0] + 0 * m.np.sum(x), SING),
    "det": (lambda m, x: m.np.linalg.det(x), rand(5, 5)),
    "det_singular": (lambda m, x: m.np.linalg.det(x), np.pad(SING, ((0, 1), (0, 1)))),
    "det_3x3": (lambda m, x: m.np.linalg.det(x), A[:3, :3]),
    "solve": (lambda m, x: m.np.sum(m.np.linalg.solve(x, B) ** 2), A),
    "inv": (lambda m, x: m.np.sum(m.np.sin(m.np.linalg.inv(x))), A),
    "gp_likelihood": (lambda m, x: _gp(m, x, B[:, 0]), A),
    # scipy's cholesky reads one triangle of a non-symmetric input (no symmetrization, as JAX)
    "cholesky_lower_one_triangle": (lambda m, x: m.np.sum(m.sl.cholesky(x, lower=True) * SPD), SPD + 0.3 * A),
    "cholesky_upper_one_triangle": (lambda m, x: m.np.sum(m.sl.cholesky(x) * SPD), SPD + 0.3 * A),
    "cho_solve_one_triangle": (lambda m, x: m.np.sum(m.sl.cho_solve(m.sl.cho_factor(x), B)), SPD + 0.3 * A),
    "eigvalsh": (lambda m, x: m.np.sum(m.np.linalg.eigvalsh(x) ** 3), SPD),
    "svd_singular_values": (lambda m, x: m.np.sum(m.np.linalg.svd(x, compute_uv=False) ** 3), TALL),
    "qr": (lambda m, x: m.np.sum(m.np.sin(m.np.linalg.qr(x)[0])) + m.np.sum(m.np.linalg.qr(x)[1] ** 2), TALL),
    "expm": (lambda m, x: m.np.sum(m.np.sin(m.sl.expm(x))), 0.7 * A),
    "expm_large_norm": (lambda m, x: m.np.sum(m.sl.expm(x)), 3 * A),
    "pinv": (lambda m, x: m.np.sum(m.np.sin(m.np.linalg.pinv(x))), TALL),
    "lu_solve": (lambda m, x: m.np.sum(m.sl.lu_solve(m.sl.lu_factor(x), B, trans=1)), A),
    "solve_pos": (lambda m, x: m.np.sum(m.sl.solve(x, B, assume_a="pos")), SPD),
    "cond": (lambda m, x: m.np.linalg.cond(x), A),
    "norm_nuc": (lambda m, x: m.np.linalg.norm(x, "nuc"), A),
    "lstsq": (lambda m, x: m.np.sum(m.np.linalg.lstsq(x, B[:, 0].repeat(2)[:5])[0]), TALL),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", sorted(SCALAR_FUNS))
def test_values_and_gradients_x64(name):
    f, x = SCALAR_FUNS[name]
    want, gwant = jax.value_and_grad(lambda x: f(JAX, x))(x)
    got, ggot = jaxprc.value_and_grad(lambda x: f(OURS, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ggot), np.asarray(gwant), rtol=1e-8, atol=1e-10)


VALUE_FUNS = {   # name -> (fun(m, x), input): every output, dtype included, in float32 and x64
    "cholesky": (lambda m, x: m.np.linalg.cholesky(x), SPD),
    "cholesky_upper": (lambda m, x: m.sl.cholesky(x), SPD),
    "cholesky_not_pd": (lambda m, x: m.np.linalg.cholesky(-x), SPD),
    "eigh": (lambda m, x: m.np.abs(m.np.linalg.eigh(x)[1]), SPD),
    "eigvalsh": (lambda m, x: m.np.linalg.eigvalsh(x), SPD),
    "svd": (lambda m, x: [m.np.abs(y) for y in m.np.linalg.svd(x, full_matrices=False)], TALL),
    "svdvals": (lambda m, x: m.np.linalg.svdvals(x), TALL.T),
    "qr": (lambda m, x: list(m.np.linalg.qr(x)), TALL),
    "qr_complete": (lambda m, x: list(m.np.linalg.qr(x, mode="complete")), TALL),
    "qr_raw": (lambda m, x: list(m.np.linalg.qr(x, mode="raw")), TALL),
    "slogdet_qr": (lambda m, x: list(m.np.linalg.slogdet(x, method="qr")), A),
    "lu": (lambda m, x: list(m.sl.lu(x)), TALL),
    "lu_factor": (lambda m, x: list(m.sl.lu_factor(x)), A),
    "slogdet": (lambda m, x: list(m.np.linalg.slogdet(x)), A),
    "det_singular": (lambda m, x: m.np.linalg.det(x), SING),
    "inv": (lambda m, x: m.np.linalg.inv(x), A),
    "solve_vector": (lambda m, x: m.np.linalg.solve(x, x[0]), A),
    "solve_batched": (lambda m, x: m.np.linalg.solve(m.np.stack([x, x.T]), B), A),
    "pinv": (lambda m, x: m.np.linalg.pinv(x), TALL),
    "matrix_rank": (lambda m, x: m.np.linalg.matrix_rank(x @ x.T), TALL),
    "matrix_power": (lambda m, x: m.np.linalg.matrix_power(x, -2), A),
    "eigvals": (lambda m, x: m.np.sort(m.np.linalg.eigvals(x)), A),
    "expm": (lambda m, x: m.sl.expm(x), A),
    "expm_frechet": (lambda m, x: list(m.sl.expm_frechet(x, x.T)), 0.5 * A),
    "sqrtm": (lambda m, x: m.sl.sqrtm(x), SPD),
    "polar": (lambda m, x: list(m.sl.polar(x, method="svd")), A),
    "hessenberg": (lambda m, x: m.np.abs(m.sl.hessenberg(x)), A),
    "schur_complex_diag": (lambda m, x: m.np.sort(m.np.diagonal(m.sl.schur(x, output="complex")[0])), A),
    "solve_triangular": (lambda m, x: m.sl.solve_triangular(x, B, trans="T", lower=True), A + 4 * np.eye(4)),
    "tridiagonal_solve": (lambda m, x: m.np.linalg.solve(x, B) * 0 + (jax.lax.linalg if m is JAX else xla)
                          .tridiagonal_solve(x[0], x[1] + 4, x[2], B), A),
    "toeplitz": (lambda m, x: m.sl.toeplitz(x[0], x[1]), A),
    "block_diag": (lambda m, x: m.sl.block_diag(x, x[:2, :3], x[0]), A),
    "solve_sylvester": (lambda m, x: m.sl.solve_sylvester(x, x.T + 5 * np.eye(4), B.repeat(2, 1)), A),
    "funm": (lambda m, x: m.sl.funm(x, m.np.exp), 0.5 * A),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", sorted(VALUE_FUNS))
def test_values_and_dtypes(name, x64):
    for lib in (jax, jaxprc):
        lib.config.update("jax_enable_x64", x64)
    f, x = VALUE_FUNS[name]
    x = x if x64 else x.astype(np.float32)
    want = jax.tree_util.tree_leaves(jax.jit(lambda x: f(JAX, x))(x))
    got = jaxprc.tree_util.tree_leaves(jaxprc.jit(lambda x: f(OURS, x))(x))
    assert len(got) == len(want)
    tol = 1e-9 if x64 else 2e-4
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 10)


@pytest.mark.x64
def test_jvp_of_eigh():
    t = rand(4, 4)
    t = t + t.T
    (wv, ww), (tv, tw) = jax.jvp(lambda a: jax.lax.linalg.eigh(a), (SPD,), (t,))
    (gv, gw), (sv, sw) = jaxprc.jvp(lambda a: xla.eigh(a), (SPD,), (t,))
    signs = np.sign(np.asarray(gv)[0] * np.asarray(wv)[0])      # eigenvectors are unique up to sign
    np.testing.assert_allclose(np.asarray(gw), ww, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(gv) * signs, wv, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sw), tw, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sv) * signs, tv, atol=1e-9)


@pytest.mark.x64
def test_vmap_of_factorisations():
    a = rand(3, 4, 4)
    s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    b = rand(3, 4, 2)
    for name, fj, fx, args in [
            ("cholesky", jnp.linalg.cholesky, xnp.linalg.cholesky, (s,)),
            ("solve", jnp.linalg.solve, xnp.linalg.solve, (a, b)),
            ("eigvalsh", jnp.linalg.eigvalsh, xnp.linalg.eigvalsh, (s,)),
            ("slogdet", lambda x: jnp.linalg.slogdet(x)[1], lambda x: xnp.linalg.slogdet(x)[1], (a,)),
            ("grad_slogdet", jax.grad(lambda x: jnp.linalg.slogdet(x)[1]),
             jaxprc.grad(lambda x: xnp.linalg.slogdet(x)[1]), (a,))]:
        want, got = jax.vmap(fj)(*args), jaxprc.vmap(fx)(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.x64
def test_complex_values():
    c = rand(4, 4, dtype=np.complex128)
    h = c @ c.conj().T + 4 * np.eye(4)
    for fj, fx, x in [(jnp.linalg.det, xnp.linalg.det, c), (jnp.linalg.inv, xnp.linalg.inv, c),
                      (lambda x: jnp.linalg.slogdet(x)[0], lambda x: xnp.linalg.slogdet(x)[0], c),
                      (jnp.linalg.cholesky, xnp.linalg.cholesky, h), (jnp.linalg.eigvalsh, xnp.linalg.eigvalsh, h),
                      (lambda x: jnp.linalg.qr(x)[1], lambda x: xnp.linalg.qr(x)[1], c),
                      (jsl.expm, xsl.expm, 0.5 * c)]:
        np.testing.assert_allclose(np.asarray(fx(x)), np.asarray(fj(x)), rtol=1e-10, atol=1e-12)
    gj = jax.grad(lambda x: jnp.real(jnp.linalg.slogdet(x)[1]))(c)
    gx = jaxprc.grad(lambda x: xnp.real(xnp.linalg.slogdet(x)[1]))(c)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(gj), rtol=1e-10)


@pytest.mark.x64
def test_jvp_of_eig_with_eigenvector_derivatives():
    t = rand(4, 4)
    _, want = jax.jvp(lambda a: jax.lax.linalg.eig(a, enable_eigvec_derivs=True), (A,), (t,))
    _, got = jaxprc.jvp(lambda a: xla.eig(a, enable_eigvec_derivs=True), (A,), (t,))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-8, atol=1e-10)
    gj = jax.grad(lambda a: jnp.sum(jnp.abs(jax.lax.linalg.eig(a, compute_left_eigenvectors=False,
                                                                 enable_eigvec_derivs=True)[1]) ** 2 * jnp.arange(4.)))(A)
    gx = jaxprc.grad(lambda a: xnp.sum(xnp.abs(xla.eig(a, compute_left_eigenvectors=False,
                                                          enable_eigvec_derivs=True)[1]) ** 2 * xnp.arange(4.)))(A)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(gj), atol=1e-9)
