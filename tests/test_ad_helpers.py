"""The helpers around custom rules and integer derivatives:
custom_gradient, closure_convert, SymbolicZero / zero_from_primal, ensure_compile_time_eval
and float0 tangents/cotangents, under jit, grad and vmap.

Oracles: closed forms, derivatives taken through the plain (unruled) computation, and the
rules' own observable effects.
"""
from functools import partial

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.custom_derivatives import CustomVJPPrimal, SymbolicZero, zero_from_primal
from jaxprc.ir.dtypes import float0


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


# ------------------------------------------------------------ custom_gradient

@jx.custom_gradient
def log1pexp(x):
    """JAX docs: log(1 + e^x) with a gradient that stays finite for large x."""
    return jnp.log1p(jnp.exp(x)), lambda g: (g * (1 - 1 / (1 + jnp.exp(x))),)


XS = np.array([-2., 0., 1., 100.], np.float32)


def test_custom_gradient_log1pexp_is_stable_where_the_plain_gradient_is_not():
    plain = jx.grad(lambda x: jnp.log1p(jnp.exp(x)))(100.)
    assert np.isnan(plain)                     # inf / inf: why the custom rule exists
    close(jx.grad(log1pexp)(100.), 1.0)
    close(log1pexp(1.), np.log1p(np.e))


@pytest.mark.parametrize("transform", ["grad", "jit_grad", "vmap_grad", "jit_vmap_grad"])
def test_custom_gradient_log1pexp_under_transformations(transform):
    g = jx.grad(log1pexp)
    if transform == "grad":
        got = [g(float(x)) for x in XS]
    elif transform == "jit_grad":
        got = [jx.jit(g)(x) for x in XS]
    elif transform == "vmap_grad":
        got = jx.vmap(g)(XS)
    else:
        got = jx.jit(jx.vmap(g))(XS)
    close(got, sigmoid(XS))


def test_custom_gradient_value_under_jit_and_vmap_and_second_order():
    close(jx.jit(log1pexp)(1.), np.log1p(np.e))
    close(jx.vmap(log1pexp)(XS[:3]), np.log1p(np.exp(XS[:3])))
    s = sigmoid(XS[:3])                        # d/dx of the rule's sigmoid: the rule is differentiable
    close(jx.vmap(jx.grad(jx.grad(log1pexp)))(XS[:3]), s * (1 - s))


def test_custom_gradient_two_arguments_and_pytrees():
    @jx.custom_gradient
    def mul(x, y):
        return x * y, lambda g: (g * y, g * x)
    close(jx.grad(mul, argnums=(0, 1))(3., 4.), (4., 3.))

    @jx.custom_gradient
    def weighted(p):                           # the rule's result is deliberately not the true gradient
        a, b = p["a"], p["b"]
        return jnp.sum(a * b), lambda g: ({"a": g * b * 2, "b": g * a * 3},)
    p = {"a": jnp.ones(3), "b": jnp.arange(3.)}
    for g in (jx.grad(weighted)(p), jx.jit(jx.grad(weighted))(p)):
        close(g["a"], 2 * np.arange(3.))
        close(g["b"], 3 * np.ones(3))


def test_custom_gradient_calls_keep_their_own_rules():
    # two calls of one custom_gradient function with different shapes in one differentiated
    # program: each backward pass must use the rule (and residuals) of its own call
    @jx.custom_gradient
    def sq(x):
        return x * x, lambda g: (g * 2 * x,)

    def f(a, b):
        return jnp.sum(sq(a)) + jnp.sum(sq(b)) + sq(sq(a[0]) + 1.)
    a, b = np.array([1., 2.], np.float32), np.array([3., 4., 5.], np.float32)
    ga, gb = jx.grad(f, argnums=(0, 1))(a, b)
    expected_a = 2 * a + np.array([2 * (a[0] ** 2 + 1) * 2 * a[0], 0.])
    close(ga, expected_a)
    close(gb, 2 * b)
    close(jx.jit(jx.grad(f, argnums=(0, 1)))(a, b)[0], expected_a)


def test_custom_gradient_rule_closing_over_integer_intermediates():
    w = np.array([1., -2., 3.], np.float32)

    @jx.custom_gradient
    def pick(x):
        i = jnp.argmax(x * w)                  # int residual, closed over by the rule
        return x[i], lambda g: (jnp.zeros_like(x).at[i].set(g) * 10,)
    x = np.array([0.5, 0.1, 0.9], np.float32)
    close(jx.grad(pick)(x), [0., 0., 10.])
    close(jx.vmap(jx.jit(jx.grad(pick)))(np.stack([x, -x])), [[0., 0., 10.], [0., 10., 0.]])

    def scanned(x):                            # inside a scan body: residuals stacked per step
        return lax.scan(lambda c, _: (pick(c * x) * jnp.ones(3), None), x, None, length=2)[0].sum()
    # both steps pick index 2 (y1 = pick(x*x), y2 = pick(y1*x)); the rule's derivative is 10
    y1 = 0.9 * 0.9
    close(jx.grad(scanned)(x), [0., 0., 3 * 10 * (y1 + 0.9 * 10 * 2 * 0.9)])


# ------------------------------------------------------------ closure_convert

@partial(jx.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, x_guess, *params):
    """x* = f(x*, *params), iterated to convergence; params are explicit so bwd can
    differentiate with respect to them (JAX's custom_vjp docs, implicit differentiation)."""
    def cond_fun(carry):
        x_prev, x = carry
        return jnp.max(jnp.abs(x_prev - x)) > 1e-6

    def body_fun(carry):
        _, x = carry
        return x, f(x, *params)
    return lax.while_loop(cond_fun, body_fun, (x_guess, f(x_guess, *params)))[1]


def _fixed_point_fwd(f, x_guess, *params):
    x_star = fixed_point(f, x_guess, *params)
    return x_star, (x_star, params)


def _fixed_point_bwd(f, res, x_bar):
    x_star, params = res
    _, vjp_x = jx.vjp(lambda x: f(x, *params), x_star)
    u = x_bar                                  # u = x_bar + (df/dx)^T u, by iteration
    for _ in range(50):
        u = x_bar + vjp_x(u)[0]
    _, vjp_params = jx.vjp(lambda *p: f(x_star, *p), *params)
    return (jnp.zeros_like(x_star), *vjp_params(u))


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


def solve(f, x_guess):
    """Fixed point of ``f``, a closure over traced values: closure_convert makes them inputs."""
    converted, consts = jx.closure_convert(f, x_guess)
    return fixed_point(converted, x_guess, *consts)


def newton_sqrt(a):
    return solve(lambda x: 0.5 * (x + a / x), a)


AS = np.array([1., 2., 4., 9.], np.float32)


@pytest.mark.parametrize("transform", ["grad", "jit_grad", "vmap_grad", "jit_vmap_grad", "vmap"])
def test_closure_convert_fixed_point_newton_sqrt(transform):
    g = jx.grad(newton_sqrt)
    if transform == "grad":
        got, want = [g(float(a)) for a in AS], 0.5 / np.sqrt(AS)
    elif transform == "jit_grad":
        got, want = [jx.jit(g)(a) for a in AS[:2]], 0.5 / np.sqrt(AS[:2])
    elif transform == "vmap_grad":
        got, want = jx.vmap(g)(AS), 0.5 / np.sqrt(AS)
    elif transform == "jit_vmap_grad":
        got, want = jx.jit(jx.vmap(g))(AS), 0.5 / np.sqrt(AS)
    else:
        got, want = jx.vmap(newton_sqrt)(AS), np.sqrt(AS)
    close(got, want)


def test_closure_convert_fixed_point_gradient_matches_unrolled_iteration():
    # x = tanh(W x + b): implicit gradients w.r.t. the closed-over W and b equal gradients
    # taken through many unrolled iterations of the plain map
    rng = np.random.default_rng(0)
    W0 = (0.3 * rng.standard_normal((3, 3))).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    c = np.array([1., -2., 0.5], np.float32)

    def implicit(W, b):
        return jnp.dot(c, solve(lambda x: jnp.tanh(W @ x + b), jnp.zeros(3)))

    def unrolled(W, b):
        x = jnp.zeros(3)
        for _ in range(60):
            x = jnp.tanh(W @ x + b)
        return jnp.dot(c, x)
    want = jx.grad(unrolled, argnums=(0, 1))(W0, b0)
    for got in (jx.grad(implicit, argnums=(0, 1))(W0, b0), jx.jit(jx.grad(implicit, argnums=(0, 1)))(W0, b0)):
        close(got[0], want[0], 1e-4)
        close(got[1], want[1], 1e-4)
    bs = np.stack([b0, -b0])
    close(jx.vmap(jx.grad(implicit, argnums=1), (None, 0))(W0, bs),
          np.stack([jx.grad(unrolled, argnums=1)(W0, b) for b in bs]), 1e-4)


def test_closure_convert_hoists_only_values_that_can_carry_derivatives():
    W = np.arange(6., dtype=np.float32).reshape(2, 3)
    converted, consts = jx.closure_convert(lambda x: x @ W, np.ones(2, np.float32))
    assert consts == []                        # concrete: stays closed over, as in JAX
    close(converted(np.ones(2, np.float32)), [3., 5., 7.])
    hoisted = []

    def f(x, n):
        converted, consts = jx.closure_convert(lambda z: z * x + n, x)
        hoisted.append([np.dtype(c.dtype) for c in consts])
        return converted(x, *consts)
    close(jx.grad(f)(2., 3), 4.)               # d/dx (x*x + n)
    assert hoisted == [[np.float32]]           # the traced float x; the traced int n is not hoisted
    close(jx.jit(f)(2., 3), 7.)


def test_closure_convert_pytrees_and_structure_errors():
    converted, consts = jx.closure_convert(lambda x, y: {"s": x + y["a"]}, 1., {"a": 2.})
    assert consts == []
    close(converted(1., {"a": 5.})["s"], 6.)
    converted, _ = jx.closure_convert(lambda x: x[0] * 2, (1., 2.))
    with pytest.raises(TypeError, match="structure"):
        converted(1.)


# ------------------------------------------------------------ SymbolicZero, zero_from_primal

def test_zero_from_primal_types():
    tree = {"a": 1., "b": jnp.arange(2), "c": jnp.ones((2, 3)), "d": np.array([True])}
    z = zero_from_primal(tree)
    assert z["a"].dtype == np.float32 and z["a"].weak_type and float(z["a"]) == 0.
    assert np.asarray(z["b"]).dtype == float0 and np.shape(z["b"]) == (2,)
    assert z["c"].dtype == np.float32 and not z["c"].weak_type and z["c"].shape == (2, 3)
    assert not np.asarray(z["c"]).any()
    assert np.asarray(z["d"]).dtype == float0
    s = zero_from_primal(tree, symbolic_zeros=True)
    assert all(type(v) is SymbolicZero for v in s.values())
    a = s["a"]
    assert (a.shape, a.dtype, a.weak_type, a.ndim, a.size) == ((), np.float32, True, 0, 1)
    assert (s["b"].shape, s["b"].dtype, s["c"].size) == ((2,), float0, 6)
    zs = SymbolicZero.from_primal_value(jnp.ones((2, 2)))
    assert zs.shape == (2, 2) and zs.dtype == np.float32
    close(zs.instantiate(), np.zeros((2, 2)))


def _symbolic_jvp_function(seen):
    @jx.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((type(tx) is SymbolicZero, type(ty) is SymbolicZero))
        out = jnp.zeros_like(x)
        if type(tx) is not SymbolicZero:
            out = out + tx * y
        if type(ty) is not SymbolicZero:
            out = out + x * ty
        return f(x, y), out
    f.defjvp(f_jvp, symbolic_zeros=True)
    return f


def test_symbolic_zeros_custom_jvp_unperturbed_inputs_under_transformations():
    seen = []
    f = _symbolic_jvp_function(seen)
    y = np.array([2., 3.], np.float32)
    x = np.ones(2, np.float32)
    cases = [
        (lambda: jx.grad(lambda x: f(x, y).sum())(x), y, (False, True)),      # y closed over
        (lambda: jx.grad(lambda y: f(x, y).sum())(y), x, (True, False)),
        (lambda: jx.jit(jx.grad(lambda x, y: f(x, y).sum()))(x, y), y, (False, True)),
        (lambda: jx.vmap(jx.grad(lambda x: f(x, y).sum()))(np.stack([x, x])), np.stack([y, y]),
         (False, True)),
        (lambda: jx.jvp(lambda x: f(x, y), (x,), (np.ones(2, np.float32),))[1], y, (False, True)),
    ]
    for run, want, pattern in cases:
        seen.clear()
        close(run(), want)
        assert pattern in seen, seen


def test_symbolic_zeros_custom_vjp_zero_output_cotangent():
    seen = []

    @jx.custom_vjp
    def h(x):
        return x * 2, x * 3

    def h_fwd(x):
        assert type(x) is CustomVJPPrimal
        return h(x.value), None

    def h_bwd(_, cts):
        a, b = cts
        seen.append(tuple(type(c) is SymbolicZero for c in cts))
        r = jnp.zeros(())
        if type(a) is not SymbolicZero:
            r = r + 2 * a
        if type(b) is not SymbolicZero:
            r = r + 3 * b
        return (r,)
    h.defvjp(h_fwd, h_bwd, symbolic_zeros=True)
    close(jx.grad(lambda x: h(x)[0])(1.), 2.)
    assert seen[-1] == (False, True)
    close(jx.jit(jx.grad(lambda x: h(x)[1]))(1.), 3.)
    assert seen[-1] == (True, False)
    close(jx.vmap(jx.grad(lambda x: h(x)[0] + h(x)[1]))(np.ones(2, np.float32)), [5., 5.])


def test_symbolic_zeros_custom_vjp_fwd_sees_unperturbed_primals():
    seen = []

    @jx.custom_vjp
    def g(x, y):
        return x * y
    def g_fwd(x, y):
        seen.append((x.perturbed, y.perturbed))
        return g(x.value, y.value), (x.value, y.value)
    g.defvjp(g_fwd, lambda res, ct: (res[1] * ct, res[0] * ct), symbolic_zeros=True)
    # fwd also runs with every input perturbed when the rule is formed at the call (jaxprc traces
    # rules eagerly); the run that differentiation uses sees only x perturbed
    close(jx.grad(g)(2., 3.), 3.)
    assert (True, False) in seen and (False, True) not in seen
    seen.clear()
    close(jx.jit(jx.grad(g, argnums=1))(2., 3.), 2.)
    assert (False, True) in seen and (True, False) not in seen
    close(jx.grad(lambda y: g(2., y))(3.), 2.)       # a constant x is not perturbed either


def test_symbolic_zeros_fwd_saves_residuals_per_perturbation():
    @jx.custom_vjp
    def h(x, y):
        return jnp.sin(x) * y

    def h_fwd(x, y):
        res = {}
        if x.perturbed:
            res["dx"] = jnp.cos(x.value) * y.value
        if y.perturbed:
            res["dy"] = jnp.sin(x.value)
        return h(x.value, y.value), res

    def h_bwd(res, ct):
        return (res["dx"] * ct if "dx" in res else None, res["dy"] * ct if "dy" in res else None)
    h.defvjp(h_fwd, h_bwd, symbolic_zeros=True)
    x, y = 0.7, 1.3
    close(jx.grad(h)(x, y), np.cos(x) * y)
    close(jx.grad(h, 1)(x, y), np.sin(x))
    close(jx.jit(jx.grad(h, (0, 1)))(x, y), (np.cos(x) * y, np.sin(x)))
    xs = np.array([0.1, 0.2], np.float32)
    close(jx.vmap(jx.grad(h, 1), (0, None))(xs, y), np.sin(xs))


def test_symbolic_zeros_integer_input_is_a_symbolic_float0_zero():
    seen = []

    @jx.custom_jvp
    def f(x, n):
        return x * n

    def f_jvp(primals, tangents):
        seen.append(type(tangents[1]) is SymbolicZero and tangents[1].dtype == float0)
        return f(*primals), tangents[0] * primals[1]
    f.defjvp(f_jvp, symbolic_zeros=True)
    close(jx.grad(f)(1., 3), 3.)
    assert all(seen)


# ------------------------------------------------------------ ensure_compile_time_eval

def test_ensure_compile_time_eval_allows_python_control_on_concrete_values_in_jit():
    def f(x):
        with jx.ensure_compile_time_eval():
            z = jnp.sin(jnp.sin(3.))
            n = int(jnp.argmax(jnp.array([1., 5., 2.])))       # concrete: Python may branch on it
            table = jnp.cumsum(jnp.arange(4.)) * (2 if z > 0 else 1)
        return x + z + table[n]
    program = jx.make_jaxpr(f)(1.)
    names = [e.primitive.name for e in program.jaxpr.eqns]
    assert "sin" not in names and "cumsum" not in names and "argmax" not in names, names
    close(jx.jit(f)(1.), 1 + np.sin(np.sin(3.)) + 2)
    close(jx.grad(f)(1.), 1.)


def test_ensure_compile_time_eval_keeps_traced_values_traced():
    def g(x):
        with jx.ensure_compile_time_eval():
            k = jnp.ones(x.shape[0]) * x.shape[0]
            doubled = x * 2                                   # depends on x: still traced
        return doubled + k
    close(jx.grad(lambda x: g(x).sum())(jnp.arange(3.)), [2., 2., 2.])
    close(jx.jit(jx.vmap(g))(np.ones((2, 3), np.float32)), np.full((2, 3), 5.))


# ------------------------------------------------------------ float0

def _is_float0(x, shape):
    a = np.asarray(x)
    return a.dtype == float0 and a.shape == shape


def _mixed(x, n, b):
    return x * n, n * 2, jnp.logical_not(b)


PRIMALS = (1.5, np.int32(3), np.array([True, False]))
TANGENTS = (2.0, np.zeros((), float0), np.zeros((2,), float0))


def test_jvp_with_float0_tangents_for_int_and_bool_inputs():
    (y, m, nb), (ty, tm, tb) = jx.jvp(_mixed, PRIMALS, TANGENTS)
    close(y, 4.5)
    assert int(m) == 6 and list(np.asarray(nb)) == [False, True]
    close(ty, 6.)
    assert _is_float0(tm, ()) and _is_float0(tb, (2,))
    _, lin = jx.linearize(_mixed, *PRIMALS)
    lt = lin(*TANGENTS)
    close(lt[0], 6.)
    assert _is_float0(lt[1], ()) and _is_float0(lt[2], (2,))


def test_grad_allow_int_gives_float0_zeros():
    def g(x, n):
        return jnp.sum(x * n)
    with pytest.raises(TypeError, match="allow_int"):
        jx.grad(g, argnums=1)(jnp.ones(3), jnp.arange(3))
    gx, gn = jx.grad(g, (0, 1), allow_int=True)(jnp.ones(3), jnp.arange(3))
    close(gx, [0., 1., 2.])
    assert _is_float0(gn, (3,))
    v, (gn, gx) = jx.value_and_grad(lambda n, x: (n * x).sum(), (0, 1), allow_int=True)(
        np.int32(2), jnp.ones(2))
    close(v, 4.)
    close(gx, [2., 2.])
    assert _is_float0(gn, ())
    _, gm = jx.grad(lambda x, m: jnp.sum(jnp.where(m, x, 0.)), (0, 1), allow_int=True)(
        jnp.ones(2), np.array([True, False]))
    assert _is_float0(gm, (2,))


def test_vjp_cotangents_of_int_inputs_are_float0():
    _, vjp_fn = jx.vjp(_mixed, *PRIMALS)
    cx, cn, cb = vjp_fn((1.0, np.zeros((), float0), np.zeros((2,), float0)))
    close(cx, 3.)
    assert _is_float0(cn, ()) and _is_float0(cb, (2,))


def test_jit_of_grad_allow_int_returns_float0():
    _, gn = jx.jit(jx.grad(lambda x, n: jnp.sum(x * n), (0, 1), allow_int=True))(jnp.ones(3), jnp.arange(3))
    assert _is_float0(gn, (3,))


def test_vmap_of_grad_allow_int_returns_batched_float0():
    g = jx.vmap(jx.grad(lambda x, n: jnp.sum(x * n), (0, 1), allow_int=True))
    gx, gn = g(jnp.ones((2, 3)), jnp.arange(6).reshape(2, 3))
    close(gx, np.arange(6.).reshape(2, 3))
    assert _is_float0(gn, (2, 3))


def test_jit_of_jvp_with_float0_tangent_arguments():
    _, (ty, tm, tb) = jx.jit(lambda p, t: jx.jvp(_mixed, p, t))(PRIMALS, TANGENTS)
    close(ty, 6.)
    assert _is_float0(tm, ()) and _is_float0(tb, (2,))


def test_jvp_rejects_non_float0_tangent_for_int_primal():
    with pytest.raises(TypeError, match="float0"):
        jx.jvp(_mixed, PRIMALS, (2.0, np.int32(0), np.zeros((2,), float0)))


def test_float0_is_exposed_as_jaxprc_dtypes_float0():
    assert jx.dtypes.float0 == float0


class _Config:
    scale = 3.0


def _configured(x, cfg, name, fn):
    return fn(x) * cfg.scale if name == "scaled" else x


def test_transformations_close_over_non_array_arguments_they_do_not_transform():
    """As in JAX: a config object, a string or a function outside argnums (or with in_axes None)
    is passed to the function as it is, not traced."""
    args = (2.0, _Config(), "scaled", jnp.sin)
    expected = 3.0 * np.cos(2.0)
    np.testing.assert_allclose(jx.grad(_configured)(*args), expected, rtol=1e-6)
    value, g = jx.value_and_grad(_configured)(*args)
    np.testing.assert_allclose((value, g), (3.0 * np.sin(2.0), expected), rtol=1e-6)
    np.testing.assert_allclose(jx.jit(jx.grad(_configured), static_argnums=(1, 2, 3))(*args), expected, rtol=1e-6)
    for jac in (jx.jacfwd, jx.jacrev):
        np.testing.assert_allclose(jac(_configured)(*args), expected, rtol=1e-6)
    np.testing.assert_allclose(jx.hessian(_configured)(*args), -3.0 * np.sin(2.0), rtol=1e-6)
    xs = jnp.arange(3.0)
    np.testing.assert_allclose(jx.vmap(_configured, in_axes=(0, None, None, None))(xs, *args[1:]),
                               3.0 * np.sin(np.arange(3.0)), rtol=1e-6)
    with pytest.raises(TypeError, match="not a valid JAX type"):
        jx.grad(_configured, argnums=1)(*args)     # differentiating the object itself is an error
