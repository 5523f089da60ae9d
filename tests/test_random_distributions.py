"""jaxprc.random's distributions and jaxprc.nn.initializers without JAX.

Oracles: each sampler's draws against the distribution's exact law (scipy.stats,
a test dependency): a Kolmogorov-Smirnov test for the continuous ones and a
chi-square test of the pmf for the discrete ones, plus the sample mean within
a few standard errors of the exact mean; gradients of gamma-based samples
against the implicit-reparameterisation formula and finite differences;
vmap over keys against a loop of single draws; jit against eager; the text
form of the gamma primitives. (Bit-equality with JAX is in
tests_oracle/test_random_distributions_oracle.py.)
"""
import math

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import jaxprc
import jaxprc.lax as lax
import jaxprc.nn.initializers as init
import jaxprc.numpy as jnp
import jaxprc.random as jr
from jaxprc.ir import ShapedArray, trace_to_jaxpr

from roundtrip import assert_round_trip

N = 3000
KEY = jr.key(11)
HAS_QR = hasattr(jnp.linalg, "qr")
HAS_CHOLESKY = hasattr(jnp.linalg, "cholesky")

def _on_simplex(x, total):
    """``x`` after checking that its rows sum to ``total`` (a marginal is then tested)."""
    x = np.asarray(x)
    np.testing.assert_allclose(x.sum(-1), total, rtol=1e-5)
    assert np.all(x >= 0)
    return x


# name -> (draw N samples from a key, the exact law as a frozen scipy distribution)
CONTINUOUS = {
    "exponential": (lambda k: jr.exponential(k, (N,)), st.expon()),
    "gamma_small": (lambda k: jr.gamma(k, 0.4, (N,)), st.gamma(0.4)),
    "gamma": (lambda k: jr.gamma(k, 3.5, (N,)), st.gamma(3.5)),
    "loggamma": (lambda k: jnp.exp(jr.loggamma(k, 0.7, (N,))), st.gamma(0.7)),
    "beta": (lambda k: jr.beta(k, 2.0, 0.5, (N,)), st.beta(2.0, 0.5)),
    "dirichlet": (lambda k: _on_simplex(jr.dirichlet(k, jnp.array([1.0, 2.0, 3.0]), (N,)), 1.0)[:, 0],
                  st.beta(1.0, 5.0)),
    "laplace": (lambda k: jr.laplace(k, (N,)), st.laplace()),
    "logistic": (lambda k: jr.logistic(k, (N,)), st.logistic()),
    "cauchy": (lambda k: jr.cauchy(k, (N,)), st.cauchy()),
    "pareto": (lambda k: jr.pareto(k, 3.0, (N,)), st.pareto(3.0)),
    "weibull_min": (lambda k: jr.weibull_min(k, 2.0, 1.5, (N,)), st.weibull_min(1.5, scale=2.0)),
    "rayleigh": (lambda k: jr.rayleigh(k, 2.0, (N,)), st.rayleigh(scale=2.0)),
    "maxwell": (lambda k: jr.maxwell(k, (N,)), st.maxwell()),
    # |x - loc| / scale is Maxwell distributed
    "double_sided_maxwell": (lambda k: jnp.abs(jr.double_sided_maxwell(k, 1.0, 2.0, (N,)) - 1.0) / 2.0,
                             st.maxwell()),
    "generalized_normal": (lambda k: jr.generalized_normal(k, 1.5, (N,)), st.gennorm(1.5)),
    "lognormal": (lambda k: jr.lognormal(k, 0.5, (N,)), st.lognorm(0.5)),
    "chisquare": (lambda k: jr.chisquare(k, 3.0, (N,)), st.chi2(3.0)),
    "f": (lambda k: jr.f(k, 3.0, 7.0, (N,)), st.f(3.0, 7.0)),
    "t": (lambda k: jr.t(k, 4.0, (N,)), st.t(4.0)),
    "triangular": (lambda k: jr.triangular(k, 0.0, 0.3, 1.0, (N,)), st.triang(0.3)),
    "wald": (lambda k: jr.wald(k, 1.5, (N,)), st.invgauss(1.5)),
    # the radius of a point uniform in the unit 3-ball, cubed, is uniform
    "ball": (lambda k: jnp.linalg.norm(jr.ball(k, 3, 2, (N,)), axis=-1) ** 3, st.uniform()),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_sampler_law(name):
    draw, law = CONTINUOUS[name]
    x = np.asarray(draw(KEY), np.float64)
    assert x.shape == (N,) and np.all(np.isfinite(x))
    assert st.kstest(x, law.cdf).pvalue > 1e-3, name
    mean, var = law.stats()
    if np.isfinite(var):
        assert abs(x.mean() - mean) < 5 * math.sqrt(var / N), (name, x.mean(), mean)


def _pmf_check(x, pmf, support):
    """Chi-square goodness of fit over ``support`` (counts outside it pooled into the last cell)."""
    x = np.asarray(x)
    assert np.all(x == np.round(x))
    observed = np.array([np.sum(x == v) for v in support] + [np.sum(~np.isin(x, support))], np.float64)
    expected = np.array([pmf(v) for v in support] + [0.0]) * len(x)
    expected[-1] = len(x) - expected[:-1].sum()
    keep = expected > 5           # pool the sparse cells
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    assert st.chisquare(observed, expected).pvalue > 1e-3


DISCRETE = {
    "poisson_knuth": (lambda k: jr.poisson(k, 3.0, (N,)), st.poisson(3.0), range(0, 15)),
    "poisson_rejection": (lambda k: jr.poisson(k, 25.0, (N,)), st.poisson(25.0), range(5, 50)),
    "binomial_inversion": (lambda k: jr.binomial(k, 20.0, 0.3, (N,)), st.binom(20, 0.3), range(0, 21)),
    "binomial_btrs": (lambda k: jr.binomial(k, 200.0, 0.6, (N,)), st.binom(200, 0.6), range(90, 150)),
    "geometric": (lambda k: jr.geometric(k, 0.3, (N,)), st.geom(0.3), range(1, 30)),
    "rademacher": (lambda k: jr.rademacher(k, (N,)), st.bernoulli(0.5), (-1, 1)),
    "multinomial": (lambda k: _on_simplex(jr.multinomial(k, 10.0, jnp.array([0.2, 0.3, 0.5]), shape=(N, 3)),
                                          10.0)[:, 1], st.binom(10, 0.3), range(0, 11)),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_sampler_law(name):
    draw, law, support = DISCRETE[name]
    x = np.asarray(draw(KEY))
    if name == "rademacher":      # -1 or 1: 2 * Bernoulli(1/2) - 1
        x = (x + 1) // 2
        support = (0, 1)
    _pmf_check(x, law.pmf, list(support))
    mean, var = law.stats()
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / N), (name, x.mean(), mean)


def test_dtypes_shapes_and_parameter_broadcasting():
    def aval(f, *args):
        out = jaxprc.eval_shape(f, jr.key(3), *args)       # traced only: no compilation
        return out.shape, np.dtype(out.dtype)
    f32, f16, i32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32)
    assert aval(lambda k: jr.gamma(k, jnp.ones((2, 3)))) == ((2, 3), f32)
    assert aval(lambda k: jr.gamma(k, 2.0, (4,), jnp.float16)) == ((4,), f16)
    assert aval(lambda k: jr.loggamma(k, jnp.ones(3), (2, 3))) == ((2, 3), f32)
    assert aval(lambda k: jr.poisson(k, jnp.array([1.0, 20.0]))) == ((2,), i32)
    assert aval(lambda k: jr.poisson(k, 2.0, (3,), jnp.int8)) == ((3,), np.dtype(np.int8))
    assert aval(lambda k: jr.geometric(k, 0.5, (2,))) == ((2,), i32)
    assert aval(lambda k: jr.binomial(k, 5, 0.5, (2,))) == ((2,), f32)
    assert aval(lambda k: jr.rademacher(k, (3,))) == ((3,), i32)
    assert aval(lambda k: jr.multinomial(k, 4, jnp.array([0.5, 0.5]))) == ((2,), f32)
    assert aval(lambda k: jr.multinomial(k, jnp.ones(3), jnp.ones((3, 2)) / 2, dtype=jnp.int32)) == ((3, 2), i32)
    assert aval(lambda k: jr.dirichlet(k, jnp.ones((2, 4)))) == ((2, 4), f32)
    assert aval(lambda k: jr.dirichlet(k, jnp.ones(4), (3, 2))) == ((3, 2, 4), f32)
    assert aval(lambda k: jr.beta(k, jnp.ones(3), 2.0)) == ((3,), f32)
    assert aval(lambda k: jr.f(k, jnp.ones(3), 2.0)) == ((3,), f32)
    assert aval(lambda k: jr.t(k, jnp.ones((2, 1)), (2, 5))) == ((2, 5), f32)
    assert aval(lambda k: jr.double_sided_maxwell(k, jnp.zeros(2), 1.0)) == ((2, 2), f32)   # JAX's shape rule
    assert aval(lambda k: jr.ball(k, 4, shape=(2,))) == ((2, 4), f32)
    assert aval(lambda k: jr.lognormal(k, 0.5, (2,), jnp.complex64)) == ((2,), np.dtype(np.complex64))
    assert aval(lambda k: jr.triangular(k, 0.0, jnp.full(3, 0.5), 1.0)) == ((3,), f32)
    assert aval(lambda k: jr.wald(k, jnp.ones(2), (4, 2))) == ((4, 2), f32)
    assert aval(lambda k: jr.orthogonal(k, 3, (2,), m=5)) == ((2, 3, 5), f32) if HAS_QR else True
    assert jr.gamma(jr.key(0), 1.0, (0, 2)).shape == (0, 2)


def test_edge_parameters():
    k = jr.key(4)
    g = np.asarray(jr.gamma(k, jnp.array([0.0, -1.0, np.nan, 1e-30, 1e-3, 1e6])))
    assert g[0] == 0 and np.isnan(g[1]) and np.isnan(g[2]) and g[3] == 0
    assert np.all(np.isfinite(g[4:])) and abs(g[5] / 1e6 - 1) < 0.01
    p = np.asarray(jr.poisson(k, jnp.array([0.0, 9.99, 10.0, 1e4, 0.5, 100.0])))
    assert p[0] == 0 and abs(p[3] - 1e4) < 500
    b = np.asarray(jr.binomial(k, jnp.array([np.inf, 10.0, -1.0, 10.0, 10.0, 0.0]),
                               jnp.array([0.3, np.nan, 0.5, 1.0, 0.0, 0.5])))
    assert b[0] == np.inf and np.isnan(b[1]) and np.isnan(b[2]) and b[3] == 10 and b[4] == 0 and b[5] == 0


def test_user_errors():
    k = jr.key(0)
    with pytest.raises(ValueError, match="dtype argument to `gamma`"):
        jr.gamma(k, 1.0, dtype=jnp.int32)
    with pytest.raises(ValueError, match="must be an int dtype"):
        jr.geometric(k, 0.5, dtype=jnp.float32)
    with pytest.raises(ValueError, match="broadcast"):
        jr.beta(k, jnp.ones(3), 1.0, (2,))
    with pytest.raises(ValueError, match="single key"):
        jr.exponential(jr.split(k), (2,))
    with pytest.raises(ValueError, match="alpha.ndim >= 1"):
        jr.dirichlet(k, 1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        jr.multivariate_normal(k, jnp.zeros(2), jnp.eye(2), method="qr")
    with pytest.raises(ValueError, match="cannot safely cast"):
        jr.pareto(k, jnp.ones(2, jnp.complex64))
    with pytest.raises(TypeError, match="concrete integer"):
        jaxprc.jit(lambda d: jr.ball(k, d))(3)
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        jr.key_dtype("philox")
    with pytest.raises(TypeError, match="specifying PRNG implementation"):
        jr.key(0, impl=3)
    # the gamma family draws from registered implementations (rbg: tests_oracle/test_prng_impls_oracle.py)
    from jaxprc.random import define_prng_impl, rbg_prng_impl
    unregistered = define_prng_impl(
        key_shape=(4,), seed=rbg_prng_impl.seed, split=rbg_prng_impl.split, random_bits=rbg_prng_impl.random_bits,
        fold_in=rbg_prng_impl.fold_in, name="mine", tag="mine")
    with pytest.raises(NotImplementedError, match="registered PRNG implementations only"):
        jr.gamma(jr.key(0, impl=unregistered), 1.0)
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32 RNG"):
        jr.poisson(jr.key(0, impl="rbg"), 1.0)


def test_key_functions():
    k = jr.key(5)
    assert jr.key_impl(k) == "threefry2x32" and jr.key_impl(jr.PRNGKey(5)) == "threefry2x32"
    assert jr.key_impl(jr.split(k, 3)) == "threefry2x32"
    assert jr.key_dtype() == k.dtype and str(jr.key_dtype("threefry2x32")) == "key<fry>"
    k2 = jr.wrap_key_data(jr.key_data(k), dtype=k.dtype)
    assert bool(k2 == k)
    assert bool(jr.key(5, impl="threefry2x32") == k)
    np.testing.assert_array_equal(np.asarray(jr.PRNGKey(5, impl="threefry2x32")), np.asarray(jr.key_data(k)))


# ------------------------------------------------------------- derivatives

def _gamma_sample_grad_reference(a, x):
    """dx/da = -(dF/da) / f(x) for the gamma CDF F(x; a) (its a-derivative by central differences)."""
    h = 1e-6 * max(a, 1.0)
    dF_da = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    return -dF_da / st.gamma(a).pdf(x)


def test_random_gamma_grad_against_the_implicit_formula():
    a = np.array([0.3, 0.8, 1.0, 2.5, 4.0, 7.0, 30.0, 0.5], np.float64)
    x = np.array([0.05, 1.5, 0.7, 2.0, 6.5, 5.0, 28.0, 3.0], np.float64)   # series and continued fraction
    with _x64():       # one compiled program: the edge cases share the shape
        ours = np.asarray(lax.random_gamma_grad(a, x))
        # edges: x = 0 gives 0; a <= 0, x < 0 and NaN give NaN
        e = np.asarray(lax.random_gamma_grad(np.array([1.0, 0.0, 1.0, np.nan, 1, 1, 1, 1]),
                                             np.array([0.0, 1.0, -1.0, 1.0, 1, 1, 1, 1])))
    expected = [_gamma_sample_grad_reference(ai, xi) for ai, xi in zip(a, x)]
    np.testing.assert_allclose(ours, expected, rtol=1e-6)
    assert e[0] == 0 and np.all(np.isnan(e[1:4]))
    assert lax.random_gamma_grad(np.float16(2.0), np.float16(1.5)).dtype == np.float16   # computed in float32


class _x64:
    def __enter__(self):
        self.old = jaxprc.config.jax_enable_x64
        jaxprc.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        jaxprc.config.update("jax_enable_x64", self.old)


def test_sample_gradients_are_unbiased():
    """Implicit reparameterisation: the mean of d sample / d a over many draws is d E[sample] / d a
    (a pathwise derivative of the rejection sampler itself would differ draw by draw)."""
    g = np.asarray(jaxprc.vmap(jaxprc.grad(lambda a: jr.gamma(KEY, a, (N,)).sum()))(jnp.array([0.4, 3.5])))
    np.testing.assert_allclose(g / N, 1.0, atol=0.05)           # E[x] = a
    alpha = np.array([0.5, 2.0, 3.5], np.float32)
    w = np.array([1.0, -2.0, 0.5], np.float32)
    g = np.asarray(jaxprc.grad(lambda a: (jr.dirichlet(KEY, a, (N,)) @ w).sum())(alpha)) / N
    expected = (w - w @ alpha / alpha.sum()) / alpha.sum()         # d/da of w . a / sum(a)
    np.testing.assert_allclose(g, expected, atol=0.03)


def test_second_derivative_of_gamma_samples():
    """d2x/da2 = dg/da + dg/dx * g for g = random_gamma_grad(a, x(a)) (its partials by differences)."""
    k = jr.key(8)
    a = np.array([0.7, 2.0, 5.0], np.float32)
    grad = jaxprc.grad(lambda a: jr.gamma(k, a).sum())
    hess = np.diag(np.asarray(jaxprc.jacfwd(grad)(a)))
    a64, x64 = a.astype(np.float64), np.asarray(jr.gamma(k, a), np.float64)
    g = lambda a, x: np.array([_gamma_sample_grad_reference(ai, xi) for ai, xi in zip(a, x)])
    h = 1e-4
    dg_da = (g(a64 + h, x64) - g(a64 - h, x64)) / (2 * h)
    dg_dx = (g(a64, x64 + h) - g(a64, x64 - h)) / (2 * h)
    np.testing.assert_allclose(hess, dg_da + dg_dx * g(a64, x64), rtol=1e-2)


# ------------------------------------------------------------ transformations

def test_vmap_over_keys_is_a_loop_of_draws():
    keys = jr.split(jr.key(9), 3)
    a = jnp.array([0.5, 4.0])
    draws = {
        "gamma": lambda k: jr.gamma(k, a),
        "binomial": lambda k: jr.binomial(k, jnp.array([5.0, 300.0]), 0.4),
    }
    for name, draw in draws.items():
        batched = np.asarray(jaxprc.vmap(draw)(keys))
        looped = np.stack([np.asarray(draw(k)) for k in keys])
        np.testing.assert_array_equal(batched, looped, err_msg=name)


def test_gamma_primitives_in_the_text_form():
    key = ShapedArray((3, 2), np.dtype(np.uint32))
    alpha = ShapedArray((3, 4), np.dtype(np.float32))
    cj = trace_to_jaxpr(lambda k, a: [jr.random_gamma_p.bind(k, a, log_space=True)], [key, alpha])
    assert "random_gamma[log_space=True]" in str(cj)
    assert_round_trip(cj)
    cj = trace_to_jaxpr(lambda a, x: [lax.random_gamma_grad(a, x)], [alpha, alpha])
    assert "random_gamma_grad" in str(cj)
    assert_round_trip(cj)
    with pytest.raises(Exception, match="random_gamma"):
        trace_to_jaxpr(lambda k, a: [jr.random_gamma_p.bind(k, a, log_space=False)],
                       [ShapedArray((2, 2), np.dtype(np.uint32)), alpha])


# ------------------------------------------------------------ linear algebra

@pytest.mark.skipif(not HAS_QR, reason="needs jaxprc.numpy.linalg.qr")
def test_orthogonal_and_orthogonal_initializers():
    q = np.asarray(jr.orthogonal(jr.key(1), 4, (2,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), (2, 4, 4)), atol=1e-5)
    r = np.asarray(jr.orthogonal(jr.key(1), 3, m=5))
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-5)
    w = np.asarray(init.orthogonal(2.0)(jr.key(2), (6, 3)))
    np.testing.assert_allclose(w.T @ w, 4 * np.eye(3), atol=1e-4)
    d = np.asarray(init.delta_orthogonal()(jr.key(2), (3, 3, 4, 4)))
    assert np.count_nonzero(d[0]) == 0 and np.count_nonzero(d[2]) == 0
    np.testing.assert_allclose(d[1, 1].T @ d[1, 1], np.eye(4), atol=1e-5)


@pytest.mark.skipif(not HAS_CHOLESKY, reason="needs jaxprc.numpy.linalg.cholesky")
def test_multivariate_normal_moments():
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    x = np.asarray(jr.multivariate_normal(jr.key(3), jnp.array([1.0, -1.0]), cov, (N,)))
    np.testing.assert_allclose(x.mean(0), [1.0, -1.0], atol=0.1)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.15)


def test_missing_factorisations_are_named():
    if not HAS_CHOLESKY:
        with pytest.raises(NotImplementedError, match="linalg.cholesky"):
            jr.multivariate_normal(jr.key(0), jnp.zeros(2), jnp.eye(2))
    if not HAS_QR:
        with pytest.raises(NotImplementedError, match="linalg.qr"):
            jr.orthogonal(jr.key(0), 3)


# ------------------------------------------------------------ initializers

def test_initializers_shapes_dtypes_and_scales():
    k = jr.key(6)
    shape = (40, 60)
    assert np.all(np.asarray(init.zeros(k, (2, 3))) == 0) and init.ones(k, (2,), jnp.float16).dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(init.constant(0.5)(k, (2, 2))), np.full((2, 2), 0.5, np.float32))
    u = np.asarray(init.uniform(0.2)(k, shape))
    assert u.min() >= 0 and u.max() < 0.2
    tn = np.asarray(init.truncated_normal(1.0)(k, shape))
    assert np.all(np.abs(tn) < 2.0)
    fan_in, fan_out = 40, 60
    for make, var in [(init.glorot_uniform, 2 / (fan_in + fan_out)), (init.glorot_normal, 2 / (fan_in + fan_out)),
                      (init.lecun_uniform, 1 / fan_in), (init.lecun_normal, 1 / fan_in),
                      (init.he_uniform, 2 / fan_in), (init.he_normal, 2 / fan_in)]:
        w = np.asarray(make()(k, shape))
        assert w.shape == shape and w.dtype == np.float32
        assert abs(w.var() / var - 1) < 0.1, (make.__name__, w.var(), var)
    assert init.xavier_uniform is init.glorot_uniform and init.kaiming_normal is init.he_normal
    # receptive field: a 3x3 convolution with 4 inputs and 8 outputs has fan_in 36
    w = np.asarray(init.variance_scaling(1.0, "fan_in", "normal")(k, (3, 3, 4, 8)))
    assert abs(w.var() * 36 - 1) < 0.15
    c = np.asarray(init.variance_scaling(1.0, "fan_avg", "truncated_normal", dtype=jnp.complex64)(k, shape))
    assert c.dtype == np.complex64 and abs(np.mean(np.abs(c) ** 2) / (2 / (fan_in + fan_out)) - 1) < 0.1
    assert isinstance(init.normal(), init.Initializer)


def test_initializer_errors():
    k = jr.key(0)
    with pytest.raises(ValueError, match="invalid mode"):
        init.variance_scaling(1.0, "fan_sum", "normal")(k, (2, 2))
    with pytest.raises(ValueError, match="invalid distribution"):
        init.variance_scaling(1.0, "fan_in", "cauchy")(k, (2, 2))
    with pytest.raises(ValueError, match="at least 2D"):
        init.he_normal()(k, (3,))
    with pytest.raises(ValueError, match="at least a 2D shape"):
        init.orthogonal()(k, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(k, (3, 3))
    with pytest.raises(NotImplementedError, match="no sharding"):
        init.zeros(k, (2,), out_sharding="x")
