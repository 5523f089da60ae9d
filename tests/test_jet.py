"""jaxprc.experimental.jet: Taylor terms against nested jvp (the k-th derivative of
t -> f(x(t)) along the input curve x(t) = x + sum_k h_k t^k / k!), closed forms, zero series,
jit on either side, the pipeline pass, user rules and errors."""
import math

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.core import Primitive, ShapedArray
from jaxprc.experimental import jet as jetmod
from jaxprc.experimental.jet import jet, jet2
from jaxprc.passes import run_pipeline

from roundtrip import assert_round_trip

K = 2        # orders: the programs (and XLA's compile times) grow fast with the order
rng = np.random.default_rng(0)


@pytest.fixture
def x64():
    jx.config.update("jax_enable_x64", True)
    yield
    jx.config.update("jax_enable_x64", False)


def _curve(primals, series):
    """x(t) for each argument."""
    def at(t):
        return [x + sum(h * t ** (k + 1) / math.factorial(k + 1) for k, h in enumerate(hs))
                for x, hs in zip(primals, series)]
    return at


def _derivatives_by_jvp(f, primals, series, order):
    """[d^k/dt^k f(x(t)) at t=0 for k = 1..order], each a list over f's output leaves."""
    at = _curve(primals, series)
    g = lambda t: jx.tree_util.tree_leaves(f(*at(t)))

    def nested(fn, k):
        return fn if k == 0 else nested(lambda t: jx.jvp(fn, (t,), (1.0,))[1], k - 1)

    @jx.jit
    def all_orders(t):
        return [nested(g, k)(t) for k in range(1, order + 1)]
    return all_orders(0.0)


def _check_against_jvp(f, primals, series, rtol=1e-9, atol=1e-9):
    out, terms = jet(f, primals, series)
    for leaf, want in zip(jx.tree_util.tree_leaves(out), jx.tree_util.tree_leaves(jx.jit(f)(*primals))):
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(want), rtol=rtol, atol=atol)
    by_jvp = _derivatives_by_jvp(f, primals, series, len(series[0]))
    out_leaves = jx.tree_util.tree_leaves(out)
    per_leaf = [terms] if len(out_leaves) == 1 and not isinstance(out, (tuple, list)) else list(terms)
    for i, leaf_terms in enumerate(per_leaf):
        for k, t in enumerate(leaf_terms):
            np.testing.assert_allclose(np.asarray(t), np.asarray(by_jvp[k][i]), rtol=rtol, atol=atol,
                                       err_msg=f"output {i}, term {k + 1}")


def _vec(n=3, lo=0.2, hi=0.8):
    return rng.uniform(lo, hi, (n,))


def test_elementwise_against_nested_jvp(x64):
    x = _vec()
    hs = [rng.normal(size=3) for _ in range(K)]

    def f(x):
        return (jnp.exp(x), jnp.log(x), jnp.sin(x) * jnp.cos(2 * x), jnp.sinh(x) - jnp.cosh(x),
                jnp.tanh(x), jx.nn.sigmoid(x), jnp.sqrt(x), lax.rsqrt(x), x ** 3, x ** -2,
                jnp.expm1(x), jnp.log1p(x), lax.erf(x), lax.erfc(x), lax.erf_inv(x - 0.5),
                jnp.arcsinh(x), jnp.arccosh(x + 1), jnp.arctanh(x - 0.5), jnp.square(x),
                jnp.abs(x - 0.5), jnp.tan(x), jnp.arcsin(x), jnp.arccos(x), jnp.arctan(x),
                jnp.exp2(x), x ** 0 * 2)
    _check_against_jvp(f, (x,), (hs,))


def test_recurrences_at_order_4(x64):
    x, y = _vec(), _vec() + 1.0
    hx, hy = [rng.normal(size=3) for _ in range(4)], [rng.normal(size=3) for _ in range(4)]
    _check_against_jvp(lambda x, y: (jx.nn.sigmoid(x) * lax.erf_inv(x - 0.5), jnp.log(x) / y, x ** y),
                       (x, y), (hx, hy))


def test_binary_and_piecewise_against_nested_jvp(x64):
    x, y = _vec(), _vec() + 1.0
    hx, hy = [rng.normal(size=3) for _ in range(K)], [rng.normal(size=3) for _ in range(K)]

    def f(x, y):
        return (x ** y, x / y, jnp.arctan2(x, y), jnp.maximum(x, y / 2), jnp.minimum(x, y / 2),
                lax.rem(-3 * x, y), lax.rem(3 * x, -y), lax.clamp(0.3, x, 0.6),
                jnp.where(x > 0.5, x * y, -x), x * y)
    _check_against_jvp(f, (x, y), (hx, hy))


def test_clamp_with_series_on_every_operand(x64):
    # lo > hi in the first two places: XLA's clamp (min(max(x, lo), hi)) is hi there.
    lo, x, hi = np.array([0.9, 0.7, 0.1, 0.2]), np.array([0.5, 0.8, 0.3, 0.05]), np.array([0.2, 0.3, 0.6, 0.8])
    series = [[rng.normal(size=4) for _ in range(3)] for _ in range(3)]
    _check_against_jvp(lax.clamp, (lo, x, hi), series)
    # the first derivative by central differences of numpy's min(max(x, lo), hi) along the curve
    at = _curve((lo, x, hi), series)
    fd = (np.minimum(np.maximum(at(1e-6)[1], at(1e-6)[0]), at(1e-6)[2])
          - np.minimum(np.maximum(at(-1e-6)[1], at(-1e-6)[0]), at(-1e-6)[2])) / 2e-6
    np.testing.assert_allclose(jet(lax.clamp, (lo, x, hi), series)[1][0], fd, rtol=1e-6)


def test_select_ignores_the_terms_of_its_boolean_operand():
    # JAX's jet accepts any terms for a boolean (or integer) argument; it cannot move along the curve.
    b, x, y = np.array([True, False, True]), _vec().astype(np.float32), _vec().astype(np.float32)
    hb, hx, hy = ([rng.normal(size=3).astype(np.float32) for _ in range(2)] for _ in range(3))
    out, terms = jet(jnp.where, (b, x, y), (hb, hx, hy))
    np.testing.assert_array_equal(out, np.where(b, x, y))
    for t, tx, ty in zip(terms, hx, hy):
        np.testing.assert_array_equal(t, np.where(b, tx, ty))


def test_structural_against_nested_jvp(x64):
    x = _vec(6)
    a = rng.normal(size=(2, 3, 4))
    hs = [rng.normal(size=6) for _ in range(K)]
    ha = [rng.normal(size=(2, 3, 4)) for _ in range(K)]

    def f(x, a):
        m = x.reshape(2, 3)
        conv = lax.conv_general_dilated(a[None, :1], a[None, 1:, :2, :2] ** 2, (1, 1), "VALID")
        return (jnp.sum(x * x), jnp.max(m, axis=1), jnp.min(jnp.sin(m), axis=0), m @ a[0] ** 2,
                jnp.concatenate([x[::-1], jnp.pad(x, 1)]), m.T[1:], x[np.array([4, 0, 4])],
                x.at[np.array([0, 0])].add(x[2:4] ** 2),
                lax.dynamic_update_slice(x, lax.dynamic_slice(x, (1,), (2,)) ** 2, (3,)),
                jnp.cumsum(x), jnp.cumprod(x),
                lax.reduce_window(x, 0., lax.add, (2,), (1,), "VALID"),
                jnp.fft.fft(x).real, conv, jnp.squeeze(m[:1]), jnp.broadcast_to(x, (2, 6)),
                x.astype(np.float32).astype(np.float64))
    _check_against_jvp(f, (x, a), (hs, ha))


def test_closed_forms():
    x = np.float32(0.7)
    # along x(t) = x + t every derivative of exp is exp(x), of sin the cycle cos, -sin, -cos, sin
    out, terms = jet(jnp.exp, (x,), ((1., 0., 0., 0.),))
    np.testing.assert_allclose(terms, [np.exp(x)] * 4, rtol=2e-6)
    out, terms = jet(jnp.sin, (x,), ((1., 0., 0., 0.),))
    np.testing.assert_allclose(terms, [np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)], rtol=2e-6)
    # unscaled: the Taylor coefficients of 1/(1-x) at 0 along x(t) = t are all 1
    out, terms = jet2(lambda x: 1 / (1 - x), (0.,), ((1., 0., 0., 0., 0.),))
    np.testing.assert_allclose(terms, [1.] * 5)
    # a polynomial of degree 2 has no third derivative
    _, terms = jet(lambda x: 3 * x ** 2 + x, (2.,), ((1., 0., 0.),))
    np.testing.assert_allclose(terms, [13., 6., 0.], rtol=1e-6)


def test_zero_series_and_constants():
    x = np.arange(3, dtype=np.float32)
    zeros = np.zeros(3, np.float32)
    out, terms = jet(lambda x: (jnp.exp(x), jnp.floor(x), x > 1, jnp.ones(2)), (x,), ((zeros, zeros),))
    for leaf_terms, o in zip(terms, out):
        assert len(leaf_terms) == 2
        for t in leaf_terms:
            assert np.asarray(t).shape == np.asarray(o).shape
            np.testing.assert_array_equal(np.asarray(t), 0)
    # order 0: just the primal
    out, terms = jet(jnp.sin, (x,), ((),))
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    assert terms == []


def test_jit_inside_and_outside():
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    hs = (np.ones(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32))
    inner = jx.jit(lambda y: jnp.exp(jnp.sin(y)))
    want = jet(lambda y: jnp.exp(jnp.sin(y)) * 2, (x,), (hs,))
    got_inside = jet(lambda y: inner(y) * 2, (x,), (hs,))
    got_outside = jx.jit(lambda x, h: jet(lambda y: inner(y) * 2, (x,), (h,)))(x, hs)
    for got in (got_inside, got_outside):
        for w, g in zip(jx.tree_util.tree_leaves(want), jx.tree_util.tree_leaves(got)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
    # the nested jit stays a call of its callee's jet
    jaxpr = jx.make_jaxpr(lambda x, h: jet(lambda y: inner(y) * 2, (x,), (h,)))(x, hs)
    assert "jit[" in str(jaxpr)


def test_custom_jvp_uses_the_primal_function_and_checkpoint_inlines():
    @jx.custom_jvp
    def f(x):
        return jnp.sin(x) * x

    @f.defjvp
    def f_jvp(primals, tangents):       # deliberately wrong: jet ignores it, as JAX's does
        return f(*primals), 100 * tangents[0]

    g = jx.checkpoint(lambda x: lax.optimization_barrier(jx.ad_checkpoint.checkpoint_name(f(x), "f"))
                      + jnp.cos(x))
    x, hs = np.float32(0.3), (1.0, 0.0, 0.0)
    _, terms = jet(g, (x,), (hs,))
    _, want = jet(lambda x: jnp.sin(x) * x + jnp.cos(x), (x,), (hs,))
    np.testing.assert_allclose(terms, want, rtol=1e-6)


def test_beyond_jax_against_nested_jvp(x64):
    # functions whose primitives JAX's jet has no rule for
    x = np.array([0.3, -0.4, 1.2, 0.7, -0.1, 0.9])
    hs = [rng.normal(size=6) for _ in range(K)]

    def f(x):
        m = x.reshape(2, 3)
        return (jnp.cbrt(x), lax.lgamma(x + 2), lax.digamma(x + 2), lax.polygamma(2., x + 2),
                jnp.prod(m, axis=1), jnp.prod(m), jnp.prod(m[:, :0], axis=1), jnp.sort(m, axis=0),
                lax.sort((m[0], m[1]), num_keys=1)[1], jnp.median(x))
    _check_against_jvp(f, (x,), (hs,))


def test_control_flow_against_nested_jvp(x64):
    # beyond JAX's jet, which has no rules for cond, scan and while
    x = np.array([0.3, -0.4])
    hs = [rng.normal(size=2) for _ in range(K)]

    def f(x):
        branch = lax.cond(x[0] > 0, lambda y: jnp.sin(y) * y[::-1], lambda y: y ** 3, x)
        carry, ys = lax.scan(lambda c, a: (c * jnp.sin(a * x), jnp.exp(c + a)), x + 1, jnp.arange(3.) * x[0])
        power = lax.fori_loop(0, 3, lambda i, c: c * x, jnp.ones(2))
        loop = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.tanh(c[1]) * x), (0, x))[1]
        return branch, carry, ys, power, loop
    _check_against_jvp(f, (x,), (hs,))


def test_no_rule_is_a_clear_error():
    f = lambda x: lax.top_k(x, 1)[0]
    with pytest.raises(NotImplementedError, match="Jet rule for 'top_k' not implemented"):
        jet(f, (np.ones(2),), ((np.ones(2),),))
    # without a series through it, a primitive needs no rule
    out, terms = jet(lambda x: x + f(np.ones(2))[0], (0.3,), ((1.0,),))
    np.testing.assert_allclose(terms, [1.0])


def test_rules_cover_jax_jet():
    names = {p.name for p in jetmod.jet_rules}
    jax_jet = {   # the primitives jax.experimental.jet 0.10.2 has rules for (those jaxprc has)
        "le", "lt", "gt", "ge", "eq", "ne", "not", "and", "or", "xor", "floor", "ceil", "round", "sign",
        "stop_gradient", "is_finite", "shift_left", "shift_right_arithmetic", "shift_right_logical",
        "bitcast_convert_type", "neg", "real", "complex", "conj", "imag", "add", "sub",
        "convert_element_type", "broadcast_in_dim", "concatenate", "pad", "reshape", "squeeze", "rev",
        "transpose", "slice", "reduce_sum", "reduce_window_sum", "fft", "copy", "dynamic_slice",
        "dynamic_update_slice", "cumsum", "cumprod", "cummax", "cummin", "erf", "expm1", "log1p", "sqrt",
        "square", "rsqrt", "asinh", "acosh", "atanh", "erfc", "rem", "clamp", "erf_inv", "exp", "pow",
        "integer_pow", "logistic", "tanh", "log", "atan2", "div", "sin", "cos", "sinh", "cosh",
        "dot_general", "mul", "conv_general_dilated", "gather", "reduce_max", "reduce_min", "abs",
        "select_n", "max", "min", "scatter-add", "jit", "custom_jvp_call_jaxpr", "custom_vjp_call_jaxpr"}
    assert jax_jet <= names, sorted(jax_jet - names)


def test_bad_inputs():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(jnp.add, (1., 2.), ((1.,), (1., 2.)))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda x: x, ((1., 2.),), ((1.,),))
    with pytest.raises(ValueError, match="term 0 for argument 0 is not an array"):
        jet(lambda x: x, (1.,), (((1., 2.),),))
    with pytest.raises(TypeError, match="term 1 for argument 0 has shape"):
        jet(jnp.sin, (np.ones(3),), ((np.ones(3), np.ones(2)),))
    with pytest.raises(ValueError, match="2 primal arguments but 1 series"):
        jet(jnp.add, (1., 2.), ((1.,),))


def test_user_primitive_rules():
    double_p = Primitive("jet_test_double")
    double_p.def_impl(lambda x: np.asarray(x) * 2)
    double_p.def_abstract_eval(lambda a: ShapedArray(a.shape, a.dtype, a.weak_type))
    with pytest.raises(NotImplementedError, match="jet_test_double"):
        jet(double_p.bind, (np.float32(1.),), ((np.float32(1.),),))
    jetmod.deflinear(double_p)
    out, terms = jet(lambda x: double_p.bind(x) * x, (np.float32(3.),), ((np.float32(1.), np.float32(0.)),))
    np.testing.assert_allclose([out, *terms], [18., 12., 4.], rtol=1e-6)

    exp_p = Primitive("jet_test_exp")            # a second exp, from its derivative
    exp_p.def_impl(lambda x: np.exp(x))
    exp_p.def_abstract_eval(lambda a: ShapedArray(a.shape, a.dtype, a.weak_type))
    jetmod.def_deriv(exp_p, lambda x: exp_p.bind(x))
    _, terms = jet(exp_p.bind, (np.float32(0.5),), ((np.float32(1.), np.float32(0.), np.float32(0.)),))
    np.testing.assert_allclose(terms, [np.exp(0.5)] * 3, rtol=1e-6)


def test_pipeline_pass_and_text():
    g = lambda x: jnp.sin(x) * jnp.exp(x) + lax.cond(x > 0, jnp.cos, jnp.sin, x) + lax.fori_loop(
        0, 2, lambda i, c: c * x, 1.)
    cj = jx.make_jaxpr(lambda x, n: g(x) + n)(np.float32(0.5), np.int32(1))
    out = run_pipeline(cj, "jet:order=2,dce", verify=True)
    # inputs: x, n, then x's two terms (n is an integer: no series); outputs: primal, two terms
    assert len(out.in_avals) == 4 and len(out.out_avals) == 3
    assert_round_trip(out)
    res = jx.core.eval_jaxpr(out.jaxpr, out.consts, np.float32(0.5), np.int32(1),
                             np.float32(1.), np.float32(0.))
    _, terms = jet2(lambda x: g(x) + 1, (np.float32(0.5),), ((1., 0.),))
    np.testing.assert_allclose([float(r) for r in res[1:]], terms, rtol=1e-6)


def test_transformations_of_jet():
    second = lambda x: jet(jnp.sin, (x,), ((1., 0.),))[1][1]       # -sin(x)
    np.testing.assert_allclose(jx.grad(second)(0.5), -np.cos(0.5), rtol=1e-5)
    np.testing.assert_allclose(jx.vmap(second)(jnp.array([0.5, 1.0])), -np.sin([0.5, 1.0]), rtol=1e-5)
    nested = lambda x: jet(lambda y: jet(jnp.exp, (y,), ((1.,),))[1][0], (x,), ((1.,),))
    out, (term,) = nested(0.3)
    np.testing.assert_allclose([out, term], [np.exp(0.3)] * 2, rtol=1e-6)
