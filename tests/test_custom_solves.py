"""lax.custom_linear_solve and lax.custom_root: values, derivatives by the implicit function theorem
(against closed forms and finite differences), transposition identities, vmap against a loop, text
round trips of programs holding them that then transform again, and the errors a user can cause."""
from functools import partial

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir.tracing import eval_jaxpr
from jaxprc.passes import run_pipeline
from roundtrip import assert_round_trip

R = np.random.RandomState(0)
A0 = np.eye(3) * 4.0 + R.randn(3, 3)           # diagonally dominant: Jacobi converges
B0 = R.randn(3)


@pytest.fixture(autouse=True)
def x64():
    jx.config.update("jax_enable_x64", True)
    yield
    jx.config.update("jax_enable_x64", False)


def close(a, b, tol=1e-8):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def jacobi(matvec_matrix):
    """A solver for A x = v by Jacobi iteration in a while loop (so not differentiable itself):
    only its answer matters, the derivatives come from the implicit rules."""
    def solve(matvec, v):
        d = jnp.diagonal(matvec_matrix())
        step = lambda i, x: x + (v - matvec(x)) / d
        return lax.fori_loop(0, 200, step, jnp.zeros_like(v))
    return solve


def linsolve(A, b, **kw):
    solve = jacobi(lambda: A)
    return lax.custom_linear_solve(lambda x: A @ x, b, solve, jacobi(lambda: A.T), **kw)


# ------------------------------------------------------------ linear solve

def test_value_and_closed_form_gradients():
    x = linsolve(A0, B0)
    close(A0 @ np.asarray(x), B0)
    w = R.randn(3)
    loss = lambda A, b: jnp.sum(w * linsolve(A, b))
    gA, gb = jx.grad(loss, argnums=(0, 1))(A0, B0)
    lam = np.linalg.solve(A0.T, w)                  # d/db = A^-T w; d/dA = -A^-T w x^T
    close(gb, lam)
    close(gA, -np.outer(lam, np.linalg.solve(A0, B0)))
    close(jx.jit(jx.grad(loss, argnums=(0, 1)))(A0, B0)[0], gA)


def test_jvp_by_finite_differences():
    dA, db = R.randn(3, 3), R.randn(3)
    _, t = jx.jvp(linsolve, (A0, B0), (dA, db))
    eps = 1e-6
    fd = (np.linalg.solve(A0 + eps * dA, B0 + eps * db) - np.linalg.solve(A0 - eps * dA, B0 - eps * db)) / (2 * eps)
    close(t, fd, 1e-6)


def test_transposition_identity_in_b():
    """Linear in b: <ct, x(t)> = <x^T(ct), t>, the transpose being a solve with A^T."""
    t, ct = R.randn(3), R.randn(3)
    _, vjp = jx.vjp(lambda b: linsolve(A0, b), B0)
    close(np.dot(ct, linsolve(A0, t)), np.dot(vjp(ct)[0], t))
    close(jx.linear_transpose(lambda b: linsolve(A0, b), B0)(ct)[0], np.linalg.solve(A0.T, ct))


def test_symmetric_and_second_order():
    S = A0 @ A0.T + 3 * np.eye(3)
    solve = lambda mv, v: jacobi(lambda: S)(mv, v)
    f = lambda S, b: lax.custom_linear_solve(lambda x: S @ x, b, solve, symmetric=True)
    close(f(S, B0), np.linalg.solve(S, B0))
    gb = jx.grad(lambda b: jnp.sum(f(S, b) ** 2))(B0)
    close(gb, 2 * np.linalg.solve(S, np.linalg.solve(S, B0)))
    # the Hessian in b of |x|^2 is 2 S^-2: a jvp of the transposed solve
    H = jx.hessian(lambda b: jnp.sum(f(S, b) ** 2))(B0)
    Sinv = np.linalg.inv(S)
    close(H, 2 * Sinv @ Sinv)


def test_pytree_rhs_and_aux():
    def solve(matvec, v):
        x = {"u": v["u"] / 2.0, "w": v["w"] / 3.0}
        return x, jnp.sum(v["u"])
    mv = lambda x: {"u": 2.0 * x["u"], "w": 3.0 * x["w"]}
    b = {"u": np.ones(2), "w": np.arange(3.0)}
    x, aux = lax.custom_linear_solve(mv, b, solve, solve, symmetric=True, has_aux=True)
    close(x["u"], 0.5 * np.ones(2))
    close(x["w"], np.arange(3.0) / 3)
    close(aux, 2.0)
    g = jx.grad(lambda c: jnp.sum(lax.custom_linear_solve(mv, {"u": c, "w": c + 1.0}, solve, symmetric=True,
                                                          has_aux=True)[0]["w"]))(np.ones(3) * 0.0 + 1.0)
    close(g, np.ones(3) / 3)


def test_vmap_matches_a_loop():
    As = np.stack([A0, A0 + 0.5 * np.eye(3), A0.T])
    Bs = R.randn(3, 3)
    for in_axes in [(0, 0), (None, 0), (0, None), (1, 1)]:
        args = [np.moveaxis(v, 0, ax) if ax else (v if ax == 0 else v[0])
                for v, ax in zip((As, Bs), in_axes)]
        got = jx.jit(jx.vmap(linsolve, in_axes=in_axes))(*args)
        want = [np.linalg.solve(As[i] if in_axes[0] is not None else As[0],
                                Bs[i] if in_axes[1] is not None else Bs[0]) for i in range(3)]
        close(got, np.stack(want))
    grad = jx.grad(lambda A, b: jnp.sum(linsolve(A, b) ** 2), argnums=(0, 1))
    grads = jx.jit(jx.vmap(grad))(As, Bs)
    one = jx.jit(grad)
    for i in range(3):
        gi = one(As[i], Bs[i])
        close(grads[0][i], gi[0])
        close(grads[1][i], gi[1])


def test_text_round_trip_then_transform_again():
    loss = lambda A, b: jnp.sum(linsolve(A, b) ** 2)
    cj = jx.make_jaxpr(lambda A, b: linsolve(A, b))(A0, B0)
    assert "custom_linear_solve[" in str(cj)
    back = assert_round_trip(cj)
    parsed = lambda A, b: eval_jaxpr(back.jaxpr, back.consts, A, b)[0]
    want = jx.grad(loss, argnums=(0, 1))(A0, B0)
    got = jx.grad(lambda A, b: jnp.sum(parsed(A, b) ** 2), argnums=(0, 1))(A0, B0)
    close(got[0], want[0])
    close(got[1], want[1])
    close(jx.vmap(parsed, in_axes=(None, 0))(A0, np.stack([B0, 2 * B0]))[1], 2 * np.linalg.solve(A0, B0))
    grad_cj = assert_round_trip(jx.make_jaxpr(jx.grad(loss, argnums=(0, 1)))(A0, B0))
    close(eval_jaxpr(grad_cj.jaxpr, grad_cj.consts, A0, B0)[0], want[0])
    for spec in ("jvp", "vmap:axis_size=2,dce"):    # the passes run (and verify) on the parsed program
        run_pipeline(back, spec, verify=True)


def test_linear_solve_errors():
    solve = jacobi(lambda: A0)
    with pytest.raises(TypeError, match="transpose_solve required"):
        jx.grad(lambda b: jnp.sum(lax.custom_linear_solve(lambda x: A0 @ x, b, solve)))(B0)
    with pytest.raises(TypeError, match=r"matvec\(\) output shapes and dtypes must match b"):
        lax.custom_linear_solve(lambda x: x[:2], B0, solve)
    with pytest.raises(TypeError, match=r"solve\(\) output pytree structure must match b"):
        lax.custom_linear_solve(lambda x: x, B0, lambda mv, v: (v, v))
    with pytest.raises(ValueError, match="has_aux was set to True"):
        lax.custom_linear_solve(lambda x: x, B0, lambda mv, v: v, has_aux=True)
    # forward mode needs no transpose_solve
    _, t = jx.jvp(lambda b: lax.custom_linear_solve(lambda x: A0 @ x, b, solve), (B0,), (B0,))
    close(t, np.linalg.solve(A0, B0))


# -------------------------------------------------------------- custom root

def newton_sqrt(a):
    """sqrt(a) as the root of x^2 - a; the Newton loop is a while loop (not differentiable)."""
    f = lambda x: x ** 2 - a
    def solve(f, x0):
        return lax.fori_loop(0, 60, lambda i, x: x - f(x) / (2 * x), x0)
    return lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))


def test_root_value_and_derivatives():
    a = 2.0
    close(newton_sqrt(a), np.sqrt(a))
    close(jx.grad(newton_sqrt)(a), 0.5 / np.sqrt(a))
    close(jx.grad(jx.grad(newton_sqrt))(a), -0.25 * a ** -1.5)
    close(jx.jvp(newton_sqrt, (a,), (3.0,))[1], 1.5 / np.sqrt(a))
    close(jx.jit(jx.grad(newton_sqrt))(a), 0.5 / np.sqrt(a))
    close(jx.vmap(jx.grad(newton_sqrt))(np.array([1.0, 4.0, 9.0])), 0.5 / np.sqrt([1.0, 4.0, 9.0]))


def test_vector_root_with_pytree_and_aux():
    """Root of f(x) = M x + x^3 - p (elementwise cube): a pytree guess, a dense tangent solve."""
    M = np.eye(3) * 3 + 0.2 * R.randn(3, 3)

    def root(p):
        f = lambda x: {"x": M @ x["x"] + x["x"] ** 3 - p}
        def solve(f, x0):
            J = lambda x: M + jnp.diag(3 * x ** 2)
            step = lambda i, x: x - _dense_solve(J(x), f({"x": x})["x"])
            x = lax.fori_loop(0, 30, step, x0["x"])
            return {"x": x}, jnp.max(jnp.abs(f({"x": x})["x"]))
        def tangent_solve(g, y):
            J = jx.jacfwd(lambda v: g({"x": v})["x"])(y["x"])
            return {"x": _dense_solve(J, y["x"])}
        sol, resid = lax.custom_root(f, {"x": jnp.zeros(3)}, solve, tangent_solve, has_aux=True)
        return sol["x"], resid

    p = R.randn(3)
    x, resid = jx.jit(root)(p)
    close(M @ np.asarray(x) + np.asarray(x) ** 3, p)
    assert float(resid) < 1e-10
    solution = lambda p: root(p)[0]
    J, Jr, xs = jx.jit(lambda p: (jx.jacfwd(solution)(p), jx.jacrev(solution)(p),
                                  jx.vmap(solution)(jnp.stack([p, 2 * p]))))(p)
    close(J, np.linalg.inv(M + np.diag(3 * np.asarray(x) ** 2)), 1e-8)
    close(Jr, J)
    x2 = np.asarray(xs[1])
    close(M @ x2 + x2 ** 3, 2 * p)


def _cross(u, v):
    return jnp.stack([u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]])


def _dense_solve(J, v):
    """J^-1 v for a 3x3 J by its adjugate (the rows' cross products): linear in ``v``, as a
    tangent solve must be."""
    r0, r1, r2 = J[0], J[1], J[2]
    adj = jnp.stack([_cross(r1, r2), _cross(r2, r0), _cross(r0, r1)], axis=1)
    return adj @ v / jnp.dot(r0, _cross(r1, r2))


def test_root_text_round_trip_then_transform_again():
    cj = jx.make_jaxpr(newton_sqrt)(2.0)
    assert "custom_root[" in str(cj)
    back = assert_round_trip(cj)
    parsed = lambda a: eval_jaxpr(back.jaxpr, back.consts, a)[0]
    close(jx.grad(parsed)(2.0), 0.5 / np.sqrt(2.0))
    close(jx.grad(jx.grad(parsed))(2.0), -0.25 * 2.0 ** -1.5)
    close(jx.vmap(parsed)(np.array([4.0, 9.0])), [2.0, 3.0])
    grad_cj = assert_round_trip(jx.make_jaxpr(jx.grad(newton_sqrt))(2.0))
    close(eval_jaxpr(grad_cj.jaxpr, grad_cj.consts, 2.0)[0], 0.5 / np.sqrt(2.0))
    run_pipeline(back, "jvp,vmap:axis_size=3,dce", verify=True)


def test_root_errors():
    solve = lambda f, x: x
    with pytest.raises(TypeError, match=r"f\(\) output pytree structure must match initial_guess"):
        lax.custom_root(lambda x: (x, x), 1.0, solve, lambda g, y: y)
    with pytest.raises(TypeError, match=r"f\(\) output shapes and dtypes must match initial_guess"):
        lax.custom_root(lambda x: jnp.ones(2) * x, 1.0, solve, lambda g, y: y)
    with pytest.raises(ValueError, match="has_aux was set to True"):
        lax.custom_root(lambda x: x, 1.0, solve, lambda g, y: y, has_aux=True)
    with pytest.raises(TypeError, match=r"tangent_solve\(\) output pytree structure"):
        lax.custom_root(lambda x: x, 1.0, solve, lambda g, y: (y, y))


# ------------------------------------------------ jax.scipy.sparse.linalg

def test_cg_and_bicgstab():
    from jaxprc.scipy.sparse import linalg as spl
    S = A0 @ A0.T + 3 * np.eye(3)
    z = (B0 + 1j * B0[::-1]).astype(np.complex128)
    tree_mv = lambda v: {"u": 2.0 * v["u"], "w": S @ v["w"]}

    @jx.jit
    def solves(S, A, b, z):
        return (spl.cg(S, b, tol=1e-12)[0], spl.cg(lambda v: S @ v, b, M=jnp.diag(1 / jnp.diag(S)), tol=1e-12)[0],
                spl.bicgstab(A, b, tol=1e-12)[0], spl.bicgstab(A.astype(z.dtype), z, tol=1e-12)[0],
                spl.cg(tree_mv, {"u": jnp.ones(2), "w": b}, tol=1e-12)[0])
    x, x_pre, y, yz, tree = solves(S, A0, B0, z)
    close(S @ np.asarray(x), B0)
    close(x_pre, x)
    close(A0 @ np.asarray(y), B0)
    close(A0 @ np.asarray(yz), z)
    close(tree["u"], 0.5 * np.ones(2))
    assert spl.cg(S, B0)[1] is None
    # derivatives through the implicit rules: d/db sum(x) = A^-T 1, d/dA = -A^-T 1 x^T
    loss = lambda A, b: jnp.sum(spl.bicgstab(lambda v: A @ v, b, tol=1e-12)[0])
    gA, gb = jx.jit(jx.grad(loss, argnums=(0, 1)))(A0, B0)
    lam = np.linalg.solve(A0.T, np.ones(3))
    close(gb, lam)
    close(gA, -np.outer(lam, np.linalg.solve(A0, B0)))
    with pytest.raises(ValueError, match="must be a square matrix"):
        spl.cg(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="matching shapes"):
        spl.cg(S, B0, x0=np.zeros(2))


def test_ill_typed_programs_are_rejected_naming_the_primitive():
    from jaxprc.ir import ParseError, parse
    root = str(jx.make_jaxpr(lambda a: lax.custom_root(lambda x: x - a, a, lambda f, x: x - f(x),
                                                       lambda g, y: y))(np.float32(2.0)))
    solve = str(jx.make_jaxpr(lambda b: lax.custom_linear_solve(lambda x: 2.0 * x, b,
                                                                lambda mv, x: x / 2.0))(np.float32(2.0)))
    for text, edit, match in [
            (root, ("const_lengths=(1, 1, 1)", "const_lengths=(2, 1, 1)"), "custom_root.*operands"),
            (root, ("l:f32[]. let  in", "l:i32[]. let  in"), "custom_root.*tangent_solve_jaxpr inputs"),
            (solve, ("const_lengths=(0, 0, 0, 0)", "const_lengths=(0, 0, 0)"), "custom_linear_solve: param const_lengths.*4 items"),
            (solve, ("transpose_solve_jaxpr=None", "transpose_solve_jaxpr=3"), "transpose_solve_jaxpr")]:
        assert edit[0] in text, text
        with pytest.raises(ParseError, match=match):
            parse(text.replace(*edit))


@pytest.mark.parametrize("method", ["batched", "incremental"])
def test_gmres(method):
    from jaxprc.scipy.sparse import linalg as spl
    A = A0 + 2 * np.eye(3)
    z = (B0 + 1j * B0[::-1]).astype(np.complex128)
    tree_mv = lambda v: {"u": 2.0 * v["u"], "w": A @ v["w"]}

    @jx.jit
    def solves(A, b, z):
        gm = partial(spl.gmres, solve_method=method, tol=1e-12)
        return (gm(A, b), gm(lambda v: A @ v, b, M=jnp.diag(1 / jnp.diag(A)))[0],
                gm(A, b, restart=1, maxiter=200)[0], gm(A.astype(z.dtype), z)[0],
                gm(tree_mv, {"u": jnp.ones(2), "w": b})[0])
    (x, info), x_pre, x_r1, xz, tree = solves(A, B0, z)
    assert int(info) == 0
    for got, rhs in [(x, B0), (x_pre, B0), (x_r1, B0), (xz, z)]:
        close(A @ np.asarray(got), rhs)
    close(tree["u"], 0.5 * np.ones(2))
    # b = 0 is solved exactly at once (zero residual makes a zero Krylov basis)
    close(spl.gmres(A, np.zeros(3), solve_method=method)[0], np.zeros(3))
    loss = lambda A, b: jnp.sum(spl.gmres(lambda v: A @ v, b, tol=1e-12, solve_method=method)[0])
    gA, gb = jx.jit(jx.grad(loss, argnums=(0, 1)))(A, B0)
    lam = np.linalg.solve(A.T, np.ones(3))
    close(gb, lam)
    close(gA, -np.outer(lam, np.linalg.solve(A, B0)))
    with pytest.raises(ValueError, match="solve_method"):
        spl.gmres(A, B0, solve_method="qr")
