"""The autodiff API against mathematical oracles: finite differences, the vjp/jvp identity,
closed-form derivatives, and JAX's documented behaviours (errors, has_aux, argnums, float0)."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import dtypes as dt

RNG = np.random.default_rng(0)


def f32(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def central_difference(f, args, tangents, eps=1e-3):
    plus = f(*[a + eps * t for a, t in zip(args, tangents)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents)])
    return (np.asarray(plus, np.float64) - np.asarray(minus, np.float64)) / (2 * eps)


def check_jvp_fd(f, args, rtol=2e-2, atol=2e-3):
    tangents = [f32(*np.shape(a)) for a in args]
    out, t_out = jx.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_allclose(np.asarray(out), np.asarray(f(*args)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(t_out), central_difference(f, args, tangents), rtol=rtol, atol=atol)


def check_vjp_jvp(f, args, rtol=1e-4, atol=1e-5):
    """<vjp(ct), t> == <ct, jvp(t)>."""
    tangents = [f32(*np.shape(a)) for a in args]
    out, t_out = jx.jvp(f, tuple(args), tuple(tangents))
    ct = f32(*np.shape(out))
    _, f_vjp = jx.vjp(f, *args)
    cts_in = f_vjp(ct)
    lhs = sum(float(np.vdot(np.asarray(c), t)) for c, t in zip(cts_in, tangents))
    rhs = float(np.vdot(ct, np.asarray(t_out)))
    np.testing.assert_allclose(lhs, rhs, rtol=rtol, atol=atol)


UNARY = {
    "sin": lax.sin, "cos": lax.cos, "tan": lax.tan, "exp": lax.exp, "tanh": lax.tanh,
    "logistic": lax.logistic, "log": lambda x: lax.log(lax.add(x, 2.0)),
    "log1p": lax.log1p, "expm1": lax.expm1, "sqrt": lambda x: lax.sqrt(lax.add(x, 2.0)),
    "rsqrt": lambda x: lax.rsqrt(lax.add(x, 2.0)), "atan": lax.atan, "asin": lambda x: lax.asin(lax.mul(x, 0.5)),
    "acos": lambda x: lax.acos(lax.mul(x, 0.5)), "sinh": lax.sinh, "cosh": lax.cosh, "asinh": lax.asinh,
    "acosh": lambda x: lax.acosh(lax.add(x, 2.0)), "atanh": lambda x: lax.atanh(lax.mul(x, 0.5)),
    "square": lax.square, "erf": lax.erf, "abs": lambda x: lax.abs(lax.add(x, 2.0)),
    "cbrt": lambda x: lax.cbrt(lax.add(x, 2.0)), "integer_pow": lambda x: lax.integer_pow(x, 3),
    "exp2": lax.exp2, "lgamma": lambda x: lax.lgamma(lax.add(x, 2.0)),
    "erf_inv": lambda x: lax.erf_inv(lax.mul(x, 0.5)), "neg": lax.neg,
    "digamma": lambda x: lax.digamma(lax.add(x, 2.0)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_jvp_matches_finite_differences(name):
    check_jvp_fd(UNARY[name], [f32(4)])


BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lambda x, y: lax.div(x, lax.add(y, 3.0)),
    "pow": lambda x, y: lax.pow(lax.add(x, 2.0), y), "max": lax.max, "min": lax.min, "atan2": lax.atan2,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_jvp_and_vjp(name):
    args = [f32(5), f32(5)]
    check_jvp_fd(BINARY[name], args)
    check_vjp_jvp(BINARY[name], args)


def _dot(x, w):
    return lax.dot_general(x, w, (((1,), (0,)), ((), ())))


def _real_imag(z):
    z2 = lax.mul(z, z)
    return lax.add(lax.real(z2), lax.mul(lax.imag(z2), lax.imag(z)))


_SCATTER_1D = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                          scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),
                                          scatter_indices_batching_dims=())
_DUP = np.array([[2], [0], [2], [3]], np.int32)     # position 2 written twice
_UNIQUE = np.array([[3], [0], [1]], np.int32)

STRUCTURAL = {
    "dot": (_dot, [(2, 3), (3, 4)]),
    "batched_dot": (lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), [(2, 3, 4), (2, 4, 5)]),
    "dot_transposed": (lambda x, y: lax.dot_general(x, y, (((0,), (1,)), ((), ()))), [(3, 2), (4, 3)]),
    "broadcast": (lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1,)), [(3,)]),
    "broadcast_size1": (lambda x: lax.broadcast_in_dim(x, (3, 4), (0, 1)), [(3, 1)]),
    "reshape_transpose": (lambda x: lax.transpose(lax.reshape(x, (3, 2)), (1, 0)), [(2, 3)]),
    "reduce_sum": (lambda x: lax.reduce_sum(lax.sin(x), (0, 2)), [(2, 3, 2)]),
    "reduce_max": (lambda x: lax.reduce_max(x, (1,)), [(3, 4)]),
    "reduce_prod": (lambda x: lax.reduce_prod(x, (1,)), [(2, 3)]),
    "pad": (lambda x: lax.pad(x, np.float32(0.5), [(1, -1, 1), (2, 0, 0)]), [(3, 2)]),
    "concatenate": (lambda x, y: lax.concatenate([x, lax.sin(y), x], 0), [(2, 3), (1, 3)]),
    "slice": (lambda x: lax.slice(x, (1, 0), (4, 3), (2, 1)), [(5, 3)]),
    "rev_squeeze": (lambda x: lax.rev(lax.squeeze(x, (0,)), (0,)), [(1, 4)]),
    "dynamic_slice": (lambda x: lax.dynamic_slice(x, (np.int32(1), np.int32(0)), (2, 2)), [(4, 3)]),
    "dynamic_update_slice": (lambda x, u: lax.dynamic_update_slice(x, lax.sin(u), (np.int32(1), np.int32(1))),
                             [(4, 3), (2, 2)]),
    "select_n": (lambda x, y: lax.select_n(lax.gt(x, y), lax.sin(x), lax.mul(y, y)), [(6,), (6,)]),
    "cumsum": (lambda x: lax.cumsum(x, 0, reverse=True), [(5,)]),
    "convert": (lambda x: lax.convert_element_type(lax.mul(x, x), np.float32), [(3,)]),
    "clamp": (lambda x: lax.clamp(np.float32(-0.5), x, np.float32(0.5)), [(7,)]),
    "sort": (lambda x: lax.sort(x, 0), [(6,)]),
    "real_imag": (lambda x, y: _real_imag(lax.add(lax.convert_element_type(x, np.complex64),
                                                  lax.mul(lax.convert_element_type(y, np.complex64), 1j))),
                  [(3,), (3,)]),
    "complex": (lambda x, y: _real_imag(lax.complex(x, lax.sin(y))), [(3,), (3,)]),
    "complex_abs": (lambda x, y: lax.abs(lax.complex(x, lax.add(y, 2.0))), [(3,), (3,)]),
    "cummax": (lambda x: lax.cummax(x, 0), [(6,)]),
    "cummin_reverse": (lambda x: lax.cummin(x, 1, reverse=True), [(2, 5)]),
    "scatter_duplicates": (lambda x, u: lax.scatter(x, _DUP, u, _SCATTER_1D), [(4,), (4,)]),
    "scatter_unique": (lambda x, u: lax.scatter(x, _UNIQUE, u, _SCATTER_1D, unique_indices=True), [(4,), (3,)]),
    "scatter_add": (lambda x, u: lax.scatter_add(x, _DUP, u, _SCATTER_1D), [(4,), (4,)]),
    "scatter_max": (lambda x, u: lax.scatter_max(x, _DUP, lax.mul(u, 3.0), _SCATTER_1D), [(4,), (4,)]),
    "scatter_min": (lambda x, u: lax.scatter_min(x, _DUP, lax.mul(u, 3.0), _SCATTER_1D), [(4,), (4,)]),
    "scatter_mul": (lambda x, u: lax.scatter_mul(x, _UNIQUE, u, _SCATTER_1D, unique_indices=True),
                    [(4,), (3,)]),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_jvp_and_vjp(name):
    f, shapes = STRUCTURAL[name]
    args = [f32(*s) for s in shapes]
    check_jvp_fd(f, args)
    check_vjp_jvp(f, args)


def test_complex_transpose_pairs_by_real_part_of_product():
    """<vjp(ct), t> == Re(sum(ct * jvp(t))): JAX's pairing of complex cotangents (no conjugate),
    under which the rules of complex, real and imag are each other's transposes."""
    c = np.complex64(0.3 - 1.2j)
    f = lambda x, y: lax.mul(lax.complex(x, y), c)
    args, tangents = [f32(4), f32(4)], [f32(4), f32(4)]
    _, t_out = jx.jvp(f, tuple(args), tuple(tangents))
    ct = (f32(4) + 1j * f32(4)).astype(np.complex64)
    cts_in = jx.vjp(f, *args)[1](ct)
    lhs = sum(float(np.dot(np.asarray(a), t)) for a, t in zip(cts_in, tangents))
    np.testing.assert_allclose(lhs, float(np.sum(ct * np.asarray(t_out)).real), rtol=1e-5)
    z = (f32(4) + 1j * f32(4)).astype(np.complex64)
    back = jx.vjp(lambda z: lax.complex(lax.real(z), lax.imag(z)), z)[1](ct)[0]
    np.testing.assert_array_equal(np.asarray(back), ct)


def test_digamma_derivative_is_trigamma():
    """polygamma(1, x) in closed form: pi^2/6 at 1, pi^2/2 at 1/2, pi^2/2 + 4 at -1/2 (reflection)."""
    x = np.array([1.0, 0.5, -0.5, 30.0], np.float64)
    jx.config.update("jax_enable_x64", True)
    try:
        got = np.asarray(jx.vmap(jx.grad(lax.digamma))(x))
    finally:
        jx.config.update("jax_enable_x64", False)
    np.testing.assert_allclose(got[:3], [np.pi ** 2 / 6, np.pi ** 2 / 2, np.pi ** 2 / 2 + 4], rtol=1e-10)
    n = 30.0 + 5000    # the defining sum, with its tail 1/n + 1/(2n^2) + O(n^-3)
    np.testing.assert_allclose(got[3], sum(1 / (30.0 + k) ** 2 for k in range(5000)) + 1 / n + 0.5 / n ** 2,
                               rtol=1e-9)


def test_scatter_gradients_follow_the_winning_values():
    """Duplicate indices: only the update that landed gets a gradient (set), ties share it (max)."""
    x, u = np.array([1., 5., 3., 2.], np.float32), np.array([4., 5., 4., 0.], np.float32)
    idx = np.array([[0], [1], [0], [3]], np.int32)
    gx, gu = jx.grad(lambda x, u: lax.reduce_sum(lax.scatter_max(x, idx, u, _SCATTER_1D), (0,)),
                     argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, [0., 0.5, 1., 1.])      # 5 ties with an update; 2 beats 0
    np.testing.assert_allclose(gu, [0.5, 0.5, 0.5, 0.])    # the two 4s tie at position 0
    gx, gu = jx.grad(lambda x, u: lax.reduce_sum(lax.scatter(x, idx, u, _SCATTER_1D), (0,)),
                     argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, [0., 0., 1., 0.])
    assert sorted(np.asarray(gu).tolist()) == [0., 1., 1., 1.]    # one of the two writes to 0 lands
    with pytest.raises(NotImplementedError, match="'scatter-mul'.*jvp pass"):
        jx.grad(lambda u: lax.reduce_sum(lax.scatter_mul(x, idx, u, _SCATTER_1D), (0,)))(u)


def test_grad_of_grad_of_grad_sin():
    for x in (0.3, 1.0, 2.0):
        np.testing.assert_allclose(jx.grad(jx.grad(jx.grad(lax.sin)))(x), -np.cos(x), rtol=1e-5)


def test_hessian_of_scalar_function_of_vector():
    def f(x):
        return lax.reduce_sum(lax.mul(lax.integer_pow(x, 3), lax.sin(x)), (0,))
    x = f32(3)
    h = np.asarray(jx.hessian(f)(x))
    expected = np.diag(6 * x * np.sin(x) + 6 * x ** 2 * np.cos(x) - x ** 3 * np.sin(x))
    np.testing.assert_allclose(h, expected, rtol=1e-4, atol=1e-5)


def test_jacfwd_equals_jacrev_and_finite_differences():
    def f(x):
        return lax.mul(lax.sin(x), lax.cos(lax.rev(x, (0,))))
    x = f32(4)
    jf, jr = np.asarray(jx.jacfwd(f)(x)), np.asarray(jx.jacrev(f)(x))
    np.testing.assert_allclose(jf, jr, rtol=1e-5, atol=1e-6)
    fd = np.stack([central_difference(f, [x], [np.eye(4, dtype=np.float32)[i]]) for i in range(4)], 1)
    np.testing.assert_allclose(jf, fd, rtol=2e-2, atol=2e-3)


def test_value_and_grad_argnums_and_has_aux():
    def f(x, y):
        return lax.reduce_sum(lax.mul(x, y), (0,)), {"y2": lax.mul(y, 2.0)}
    x, y = f32(3), f32(3)
    (v, aux), (gx, gy) = jx.value_and_grad(f, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(v, np.sum(x * y), rtol=1e-6)
    np.testing.assert_allclose(aux["y2"], 2 * y, rtol=1e-6)
    np.testing.assert_allclose(gx, y, rtol=1e-6)
    np.testing.assert_allclose(gy, x, rtol=1e-6)
    g, aux = jx.grad(f, argnums=1, has_aux=True)(x, y)
    np.testing.assert_allclose(g, x, rtol=1e-6)


def test_grad_pytree_argument():
    params = {"w": f32(2, 3), "b": f32(3)}
    x = f32(4, 2)

    def loss(p, x):
        h = lax.add(_dot(x, p["w"]), lax.broadcast_in_dim(p["b"], (4, 3), (1,)))
        return lax.reduce_sum(lax.mul(lax.tanh(h), lax.tanh(h)), (0, 1))
    g = jx.grad(loss)(params, x)
    assert set(g) == {"w", "b"} and g["w"].shape == (2, 3)
    e = np.zeros((2, 3), np.float32)
    e[1, 2] = 1
    fd = central_difference(lambda w: loss({"w": w, "b": params["b"]}, x), [params["w"]], [e])
    np.testing.assert_allclose(np.asarray(g["w"])[1, 2], fd, rtol=2e-2, atol=2e-3)


def test_grad_errors_and_allow_int():
    with pytest.raises(TypeError, match="scalar-output"):
        jx.grad(lambda x: lax.sin(x))(f32(3))
    with pytest.raises(TypeError, match="allow_int"):
        jx.grad(lambda x, n: lax.mul(x, 2.0), argnums=1)(1.0, np.int32(3))
    g = jx.grad(lambda x, n: lax.mul(x, lax.convert_element_type(n, np.float32)), argnums=(0, 1),
                allow_int=True)(2.0, np.int32(3))
    np.testing.assert_allclose(g[0], 3.0)
    assert g[1].dtype == dt.float0


def test_jvp_integer_input_gets_float0_tangent():
    f = lambda x, n: (lax.mul(x, 2.0), lax.add(n, n))
    (y, m), (ty, tm) = jx.jvp(f, (1.0, np.int32(2)), (1.0, np.zeros((), dt.float0)))
    assert float(ty) == 2.0 and int(m) == 4 and tm.dtype == dt.float0


def test_vjp_function_callable_many_times():
    x = f32(3)
    y, f_vjp = jx.vjp(lambda x: lax.mul(lax.sin(x), 3.0), x)
    for ct in (np.ones(3, np.float32), f32(3)):
        (g,) = f_vjp(ct)
        np.testing.assert_allclose(g, 3 * np.cos(x) * ct, rtol=1e-5)


def test_linearize_matches_jvp():
    f = lambda x: lax.mul(lax.exp(x), lax.sin(x))
    x, t = f32(4), f32(4)
    y, f_jvp = jx.linearize(f, x)
    _, expected = jx.jvp(f, (x,), (t,))
    np.testing.assert_allclose(f_jvp(t), expected, rtol=1e-5)
    np.testing.assert_allclose(y, f(x), rtol=1e-6)


def test_linear_transpose():
    f = lambda x: lax.reduce_sum(lax.mul(x, 3.0), (1,))
    x = f32(2, 3)
    (ct,) = jx.linear_transpose(f, x)(np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(ct, np.array([[3.0] * 3, [6.0] * 3]), rtol=1e-6)


def test_python_control_flow_under_grad_outside_jit():
    def f(x):
        if x > 0:
            return lax.sin(x)
        return lax.mul(x, x)
    np.testing.assert_allclose(jx.grad(f)(1.0), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(jx.grad(f)(-1.5), -3.0, rtol=1e-6)

    def g(x):      # a Python while loop on a value
        while x < 10.0:
            x = lax.mul(x, 2.0)
        return x
    np.testing.assert_allclose(jx.grad(g)(3.0), 4.0)
    np.testing.assert_allclose(jx.grad(jx.grad(f))(1.0), -np.sin(1.0), rtol=1e-6)


def test_python_control_flow_under_jit_raises():
    def f(x):
        return lax.sin(x) if x > 0 else x
    with pytest.raises(jx.ConcretizationTypeError):
        jx.jit(jx.grad(f))(1.0)


def test_stop_gradient():
    g = jx.grad(lambda x: lax.mul(x, jx.stop_gradient(x)))(3.0)
    np.testing.assert_allclose(g, 3.0)


# ------------------------------------------------------------- control flow

def test_grad_through_scan_matches_finite_differences():
    def f(x):
        def body(c, xi):
            return lax.mul(c, lax.sin(xi)), lax.cos(c)
        c, ys = lax.scan(body, lax.slice(x, (0,), (1,)), lax.reshape(x, (4, 1)))
        return lax.add(lax.reduce_sum(c, (0,)), lax.reduce_sum(ys, (0, 1)))
    x = f32(4)
    check_jvp_fd(f, [x])
    check_vjp_jvp(f, [x])


def test_grad_through_cond_both_branches():
    def f(x):
        return lax.cond(lax.gt(x, 0.0), lambda v: lax.sin(v), lambda v: lax.mul(v, v), x)
    np.testing.assert_allclose(jx.grad(f)(0.7), np.cos(0.7), rtol=1e-6)
    np.testing.assert_allclose(jx.grad(f)(-0.7), -1.4, rtol=1e-6)


def test_jvp_through_while_loop():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: lax.mul(c, x), 1.0)
    y, t = jx.jvp(f, (2.0,), (1.0,))
    assert float(y) == 8.0 and float(t) == 12.0


def test_grad_of_while_loop_raises():
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jx.grad(lambda x: lax.while_loop(lambda c: lax.lt(c, 10.0), lambda c: lax.mul(c, x), 1.0))(2.0)


def test_grad_through_nested_jit_and_jit_of_grad():
    inner = jx.jit(lambda y: lax.mul(lax.sin(y), y))
    expected = np.sin(1.0) + np.cos(1.0)
    np.testing.assert_allclose(jx.grad(inner)(1.0), expected, rtol=1e-6)
    np.testing.assert_allclose(jx.jit(jx.grad(lambda x: inner(x)))(1.0), expected, rtol=1e-6)


def test_grad_of_mlp_has_no_dead_equations_or_materialised_zeros():
    from jaxprc.passes.dce import dce

    def loss(w1, w2, x):
        h = lax.tanh(_dot(x, w1))
        out = _dot(h, w2)
        return lax.reduce_sum(lax.mul(out, out), (0, 1))
    args = (f32(3, 4), f32(4, 2), f32(5, 3))
    cj = jx.make_jaxpr(jx.grad(loss, argnums=(0, 1)))(*args)
    assert len(dce(cj).jaxpr.eqns) == len(cj.jaxpr.eqns)
    text = str(cj)
    assert " 0.0:f32[]" not in text and "0.0:f32" not in text
    g1, g2 = jx.grad(loss, argnums=(0, 1))(*args)
    check_vjp_jvp(loss, list(args))


def _located_loss(x, w):      # the lines of this body are what the gradient's equations cite
    h = lax.tanh(lax.dot_general(x, w, (((1,), (0,)), ((), ()))))
    y = lax.mul(h, lax.cos(h))
    return lax.reduce_sum(lax.mul(y, y), (0, 1))


def test_derived_equations_carry_the_users_lines():
    """Like JAX: grad's equations point at the lines of the function, not at the grad call;
    so do those of vmap of grad."""
    import inspect
    lines, first = inspect.getsourcelines(_located_loss)
    body = set(range(first + 1, first + len(lines)))
    x, w = f32(2, 3), f32(3, 4)
    programs = [jx.make_jaxpr(jx.grad(_located_loss, argnums=(0, 1)))(x, w),
                jx.make_jaxpr(jx.vmap(jx.grad(_located_loss), in_axes=(0, None)))(f32(5, 2, 3), w)]
    for cj in programs:
        assert all(e.source_info.file == __file__ for e in cj.eqns)
        cited = {e.source_info.line for e in cj.eqns}
        assert cited == body, f"lines {sorted(cited - body)} are outside the function"


# ------------------------------------------------------- low-precision floats
# The rules build their constants in the operand's dtype: gradients of float16 and
# bfloat16 programs stay in that dtype and agree with the float32 gradient.
_LOW_PRECISION_FNS = {
    "tanh": jx.numpy.tanh, "sqrt": jx.numpy.sqrt, "square": jx.numpy.square, "cube": lambda x: x ** 3,
    "power": lambda x: x ** 2.5, "reciprocal": lambda x: 1.0 / x, "sigmoid": jx.nn.sigmoid,
    "gelu": jx.nn.gelu, "softplus": jx.nn.softplus, "std": jx.numpy.std, "tan": jx.numpy.tan,
    "arcsin": lambda x: jx.numpy.arcsin(x * 0.5), "arctan": jx.numpy.arctan, "log1p": jx.numpy.log1p,
    "expm1": jx.numpy.expm1, "cbrt": jx.numpy.cbrt, "logsumexp": jx.nn.logsumexp,
    "scan": lambda x: lax.scan(lambda c, y: (c * 0.5 + y, c), x[0], x)[0],
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gradients_of_low_precision_programs_keep_their_dtype(dtype):
    dtype = np.dtype(dt.bfloat16 if dtype == "bfloat16" else np.float16)
    x = np.linspace(0.1, 0.9, 4)
    for name, f in _LOW_PRECISION_FNS.items():
        grad = jx.jit(jx.grad(lambda v: jx.numpy.sum(f(v)).astype(np.float32)))
        low, single = grad(x.astype(dtype)), grad(x.astype(np.float32))
        assert low.dtype == dtype, name
        np.testing.assert_allclose(np.asarray(low, np.float32), single, rtol=0.05, atol=0.02, err_msg=name)


def test_vjp_function_applied_to_a_cotangent_of_another_weak_type_in_a_trace():
    """A pullback made for a weakly typed output (a Python scalar primal), applied under jit to a
    strongly typed cotangent: the program it adds to the trace is typed for the cotangent given."""
    from jaxprc.ir import verify

    def f(ct):
        _, pullback = jx.vjp(lambda y: lax.mul(lax.sin(y), 0.5), 3.0)
        return pullback(ct)[0]
    verify(jx.make_jaxpr(f)(np.float32(1.0)))
    np.testing.assert_allclose(jx.jit(f)(np.float32(1.0)), 0.5 * np.cos(3.0), rtol=1e-6)


# ------------------------------------------- derivatives at edges, against the mathematics

def test_cumprod_derivatives_exact_at_zero():
    """d/dx_k sum_i prod_{j<=i} x_j = sum_{i>=k} prod_{j<=i, j!=k} x_j: finite at zeros."""
    x = np.array([0.8, 0.0, 0.5, 1.0], np.float32)
    f = lambda x: lax.cumprod(x).sum()
    want = [sum(np.prod([x[j] for j in range(i + 1) if j != k]) for i in range(k, 4)) for k in range(4)]
    np.testing.assert_allclose(np.asarray(jx.grad(f)(x)), want, rtol=1e-6)
    h = np.asarray(jx.hessian(f)(x))
    np.testing.assert_allclose(h[0, 1], 1 + 0.5 + 0.5, rtol=1e-6)   # d2/dx0dx1 = 1 + x2 + x2 x3
    assert np.isfinite(h).all() and np.allclose(h, h.T)
    g = jx.grad(lambda x: lax.cumprod(x, reverse=True).sum())(x)
    want_rev = [sum(np.prod([x[j] for j in range(i, 4) if j != k]) for i in range(0, k + 1)) for k in range(4)]
    np.testing.assert_allclose(np.asarray(g), want_rev, rtol=1e-6)


def test_cummax_tie_tangent_splits_between_tied_operands():
    x = np.array([1.0, 3.0, 3.0], np.float32)
    t = np.array([1.0, 2.0, 4.0], np.float32)
    _, dy = jx.jvp(lambda x: lax.cummax(x), (x,), (t,))
    np.testing.assert_allclose(np.asarray(dy), [1.0, 2.0, 3.0])      # the tie: (2 + 4) / 2


def test_gather_fill_tangent_zero_out_of_bounds():
    a = np.arange(4.0, dtype=np.float32)
    y, dy = jx.jvp(lambda a: jx.numpy.take(a, np.array([1, 9]), mode="fill", fill_value=7.0),
                   (a,), (np.ones(4, np.float32),))
    np.testing.assert_array_equal(np.asarray(y), [1.0, 7.0])
    np.testing.assert_array_equal(np.asarray(dy), [1.0, 0.0])


def test_dropped_scatter_update_has_zero_derivatives():
    a = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 2.0, 3.0], np.float32)
    f = lambda y: (jx.numpy.asarray(a).at[np.array([0, 7, 0])].add(y) ** 3).sum()
    np.testing.assert_allclose(np.asarray(jx.grad(f)(y)), [3 * 4.5 ** 2, 0.0, 3 * 4.5 ** 2])
    h = np.asarray(jx.jacrev(jx.jacfwd(f))(y))
    np.testing.assert_allclose(h, [[27.0, 0, 27.0], [0, 0, 0], [27.0, 0, 27.0]])


def test_precision_kept_in_vjp_program():
    m = np.ones((2, 3), np.float32)
    f = lambda m: jx.numpy.dot(m, m.T, precision=lax.Precision.HIGHEST).sum()
    eqns = jx.make_jaxpr(jx.grad(f))(m).jaxpr.eqns
    precisions = [e.params["precision"] for e in eqns if e.primitive.name == "dot_general"]
    assert precisions and all(p == (lax.Precision.HIGHEST,) * 2 for p in precisions)
    assert lax.Precision("tensorfloat32") is lax.Precision.HIGH
    with pytest.raises(ValueError, match="Precision argument"):
        lax.dot(m, m.T, precision="fast")


def test_materialised_zero_cotangents_keep_the_weak_type():
    """A zero gradient of a weakly typed input is weak, as in JAX (zeros_like_aval keeps the bit)."""
    g = jx.grad(lambda x: jnp.where(x > 0, x, 0.0))(-1.0)
    assert float(g) == 0.0 and g.weak_type and g.dtype == jnp.float32
    cj = jx.make_jaxpr(jx.grad(lambda x: jnp.where(x > 0, x, 0.0)))(-1.0)
    assert "0.0:~f32[]" in str(cj)


def test_grad_output_rules_are_jaxs():
    """One real scalar out; a complex one only with holomorphic (then inputs are complex too)."""
    with pytest.raises(TypeError, match="requires real-valued outputs.*complex64.*holomorphic=True"):
        jx.grad(lambda x: x * 1j)(1.0)
    with pytest.raises(TypeError, match="requires real-valued outputs.*int32.*integer outputs"):
        jx.grad(lambda x: (x * 2).astype(np.int32))(1.0)
    with pytest.raises(TypeError, match="scalar-output functions. Output was a container"):
        jx.grad(lambda x: [x])(1.0)
    with pytest.raises(TypeError, match=r"scalar-output functions. Output had shape: \(3,\)"):
        jx.grad(lambda x: x * 2)(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        jx.grad(lambda z: z * z, holomorphic=True)(1.0)
    with pytest.raises(TypeError, match="holomorphic=True requires outputs with complex dtype"):
        jx.grad(lambda z: jnp.real(z), holomorphic=True)(1.0 + 2j)
    z = np.complex64(1.0 + 2.0j)
    assert jx.grad(lambda z: z * z * z, holomorphic=True)(z) == 3 * z * z
    value, g = jx.value_and_grad(jnp.sin, holomorphic=True)(z)
    np.testing.assert_allclose(g, np.cos(z), rtol=1e-6)
