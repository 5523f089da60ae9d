"""FFT, DCT and implicit differentiation against JAX: the same program, written once over a module
namespace, runs under both; values, dtypes, weak types and derivatives must agree (float32 and x64)."""
import jax
import jax.numpy as jjnp
import jax.scipy.fft as jax_sfft
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as xjnp
import jaxprc.scipy.fft as jx_sfft

BACKENDS = {"jax": (jax, jjnp, jax.lax, jax_sfft), "jaxprc": (jx, xjnp, jx.lax, jx_sfft)}
R = np.random.RandomState(0)


def both(program, *args):
    return [jax.tree_util.tree_map(np.asarray, program(*BACKENDS[k], *args)) for k in ("jax", "jaxprc")]


def assert_same(program, *args, tol):
    want, got = both(program, *args)
    for a, b in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)


def _data(shape, kind, x64):
    x = R.randn(*shape) + (1j * R.randn(*shape) if kind == "c" else 0)
    return x.astype({("r", False): np.float32, ("r", True): np.float64,
                     ("c", False): np.complex64, ("c", True): np.complex128}[kind, x64])


# (name, input kind, keyword arguments)
CASES = [("fft", "c", {}), ("fft", "r", dict(n=5, norm="ortho")), ("ifft", "c", dict(axis=0, norm="forward")),
         ("rfft", "r", {}), ("rfft", "r", dict(n=7, axis=0)), ("irfft", "c", {}), ("irfft", "c", dict(n=5, norm="ortho")),
         ("hfft", "c", {}), ("ihfft", "r", dict(norm="ortho")),
         ("fft2", "c", {}), ("ifft2", "c", dict(s=(3, 5))), ("rfft2", "r", dict(axes=(1, 0))),
         ("irfft2", "c", dict(norm="forward")), ("fftn", "c", dict(axes=(0, 2))), ("ifftn", "c", {}),
         ("rfftn", "r", dict(s=(2, 3, 4))), ("irfftn", "c", dict(axes=(2, 1)))]


def _loss(jnp, name, kw):
    def loss(x):
        y = getattr(jnp.fft, name)(x, **kw)
        w = jnp.cos(jnp.arange(y.size, dtype=jnp.real(y).dtype).reshape(y.shape))
        return jnp.sum(w * jnp.abs(y) ** 2)
    return loss


X64_NAMES = {"fft", "ifft", "rfft", "irfft", "fft2", "fftn"}     # the rest in float32 only
PARAMS = [pytest.param(*c, x64, marks=[pytest.mark.x64] if x64 else [], id=f"{c[0]}-{i}-{'x64' if x64 else 'f32'}")
          for i, c in enumerate(CASES) for x64 in (False, True) if not x64 or c[0] in X64_NAMES]


@pytest.mark.parametrize("name,kind,kw,x64", PARAMS)
def test_jnp_fft_values_and_grads(name, kind, kw, x64):
    shape = (2, 3, 4) if name.endswith("n") else (3, 4) if name.endswith("2") else (3, 6)
    x = _data(shape, kind, x64)

    def program(api, jnp, lax, sf, x):
        return api.jit(lambda x: (getattr(jnp.fft, name)(x, **kw), api.grad(_loss(jnp, name, kw))(x)))(x)
    assert_same(program, x, tol=1e-9 if x64 else 2e-3)


@pytest.mark.parametrize("typ", ["fft", "ifft", "rfft", "irfft"])
def test_lax_fft_jvp_vjp_vmap(typ):
    lengths = (3, 4)
    kind = "r" if typ == "rfft" else "c"
    x = _data((2, 3, 4 if typ != "irfft" else 3), kind, False)

    def program(api, jnp, lax, sf, x):
        f = lambda v: lax.fft(v, typ, lengths)
        y, vjp = api.vjp(f, x)
        ct = jnp.ones_like(y) * (1.0 + (0.5j if typ != "irfft" else 0.0))
        batched = api.vmap(api.vmap(f), in_axes=1, out_axes=2)(jnp.stack([x, 2 * x], axis=1))
        return y, api.jvp(f, (x,), (x * 0.5,))[1], vjp(ct)[0], batched
    assert_same(program, x, tol=2e-4)


@pytest.mark.x64
def test_freqs_shifts_and_weak_types():
    def program(api, jnp, lax, sf):
        def run():
            x = jnp.arange(10.0).reshape(2, 5)
            return (jnp.fft.fftfreq(5, 0.3), jnp.fft.rfftfreq(8, dtype=jnp.float32), jnp.fft.fftshift(x),
                    jnp.fft.ifftshift(x, axes=1), jnp.fft.fft(jnp.arange(4)), jnp.fft.rfft(jnp.arange(4)))
        return api.jit(run)()
    assert_same(program, tol=1e-12)
    for lib in (xjnp, jjnp):        # a weakly typed operand gives a strongly typed transform
        assert lib.fft.fft(lib.arange(3.0) * 1.0).weak_type is False


@pytest.mark.parametrize("x64", [False, pytest.param(True, marks=pytest.mark.x64)], ids=["f32", "x64"])
def test_dct_family_values_and_grads(x64):
    x = _data((3, 4, 5), "r", x64)

    def program(api, jnp, lax, sf, x):
        def run(x):
            if not x64:
                return sf.dct(x, n=7, axis=0, norm="ortho"), sf.idct(x, axis=1)
            outs = [sf.dct(x), sf.idct(x, n=3, norm="ortho"), sf.dctn(x, axes=(0, 2), norm="ortho"),
                    sf.dctn(x, s=(2, 6)), sf.idctn(x)]
            return outs + [api.grad(lambda v: jnp.sum(jnp.sin(sf.dctn(v, axes=(1, 2))) + sf.idct(v) ** 2))(x)]
        return api.jit(run)(x)
    assert_same(program, x, tol=1e-9 if x64 else 2e-4)


# ------------------------------------------------------------- implicit differentiation

def _richardson(lax):
    """A solver by Richardson iteration in a loop (never differentiated itself): enough steps to
    converge for the well-conditioned systems here."""
    return lambda matvec, b: lax.fori_loop(0, 120, lambda i, x: x + 0.2 * (b - matvec(x)), b * 0.0)


@pytest.mark.x64
@pytest.mark.parametrize("symmetric", [True, False])
def test_custom_linear_solve_against_jax(symmetric):
    A = np.eye(3) * 2.5 + 0.3 * R.randn(3, 3)
    if symmetric:
        A = (A + A.T) / 2
    b = R.randn(3)
    def program(api, jnp, lax, sf, A, b):
        return api.jit(lambda A, b: run(api, jnp, lax, A, b))(A, b)

    def run(api, jnp, lax, A, b):
        solve = _richardson(lax)

        def f(A, b):
            return lax.custom_linear_solve(lambda x: A @ x, b, solve, None if symmetric else solve,
                                           symmetric=symmetric)
        loss = lambda A, b: jnp.sum(jnp.tanh(f(A, b)))
        return (f(A, b), api.grad(loss, argnums=(0, 1))(A, b), api.jvp(f, (A, b), (A * 0.1, b))[1],
                api.vmap(f, in_axes=(None, 0))(A, jnp.stack([b, 2 * b])), api.hessian(loss, argnums=1)(A, b))
    assert_same(program, A, b, tol=1e-9)


@pytest.mark.x64
def test_custom_root_against_jax():
    def program(api, jnp, lax, sf, p):
        return api.jit(lambda p: run(api, jnp, lax, p))(p)

    def run(api, jnp, lax, p):
        def root(p):
            f = lambda x: x ** 3 + p[0] * x - p[1]
            solve = lambda f, x0: lax.fori_loop(0, 50, lambda i, x: x - f(x) / (3 * x ** 2 + p[0]), x0)
            return lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))
        return (root(p), api.grad(root)(p), api.hessian(root)(p), api.vmap(root)(jnp.stack([p, p * 2])),
                api.jvp(root, (p,), (p * 0.3,))[1])
    assert_same(program, np.array([2.0, 3.0]), tol=1e-9)


@pytest.mark.x64
@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_sparse_solvers_against_jax(method):
    import jax.scipy.sparse.linalg as jax_spl
    import jaxprc.scipy.sparse.linalg as jx_spl
    A = R.randn(4, 4)
    A = A @ A.T + 4 * np.eye(4) if method == "cg" else A + 5 * np.eye(4)
    b = R.randn(4)

    def program(api, jnp, lax, sf, A, b):
        spl = jax_spl if api is jax else jx_spl
        solve = getattr(spl, method)

        def run(A, b):
            f = lambda A, b: solve(lambda v: A @ v, b, tol=1e-12)[0]
            pre = solve(A, b, M=jnp.diag(1 / jnp.diag(A)), maxiter=3)[0]
            return f(A, b), pre, api.grad(lambda A, b: jnp.sum(jnp.sin(f(A, b))), argnums=(0, 1))(A, b)
        return api.jit(run)(A, b)
    assert_same(program, A, b, tol=1e-10)


@pytest.mark.x64
@pytest.mark.parametrize("method", ["batched", "incremental"])
def test_gmres_against_jax(method):
    import jax.scipy.sparse.linalg as jax_spl
    import jaxprc.scipy.sparse.linalg as jx_spl
    A = R.randn(5, 5) + 3 * np.eye(5)
    b = R.randn(5)

    def program(api, jnp, lax, sf, A, b):
        spl = jax_spl if api is jax else jx_spl

        def run(A, b):
            f = lambda A, b: spl.gmres(lambda v: A @ v, b, tol=1e-12, solve_method=method)[0]
            # a truncated run (2 restarts of 2 vectors) checks the iteration itself, not just the answer
            short = spl.gmres(A, b, restart=2, maxiter=2, M=jnp.diag(1 / jnp.diag(A)), solve_method=method)
            return f(A, b), short, api.grad(lambda A, b: jnp.sum(jnp.sin(f(A, b))), argnums=(0, 1))(A, b)
        return api.jit(run)(A, b)
    assert_same(program, A, b, tol=1e-9)
