"""jaxprc.scipy.special, jaxprc.scipy.stats, optimize and integrate against scipy (ordinary points,
tails, edges), derivatives against central differences (float64), and the lax special-function
primitives under vmap, jit and the text form. (JAX itself is the oracle in tests_oracle.)"""
import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp
import scipy.stats as ss

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.scipy import integrate, optimize, special as js, stats as jst
from roundtrip import assert_round_trip

F32 = np.float32
X = np.array([-7.5, -2.5, -0.5, 0.0, 0.25, 1.0, 2.5, 7.0, 15.0, 30.0], F32)
POS = np.array([1e-6, 0.01, 0.3, 1.0, 2.5, 7.0, 15.0, 30.0, 150.0], F32)
UNIT = np.array([0.0, 1e-7, 0.01, 0.3, 0.5, 0.7, 0.99, 1 - 1e-6, 1.0], F32)


@pytest.fixture
def x64():
    jx.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jx.config.update("jax_enable_x64", False)


def close(got, want, rtol=2e-5, atol=1e-6):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# name: (our function, scipy's, arguments); float32 against scipy's float64
VALUES = {
    "gammaln": (js.gammaln, sp.gammaln, (X[X != 0],)),
    "gamma": (js.gamma, sp.gamma, (np.array([-2.5, -0.5, 0.25, 1.0, 4.5, 20.0], F32),)),
    "gammasgn": (js.gammasgn, sp.gammasgn, (np.array([-2.5, -1.5, -0.5, 0.5, 3.0], F32),)),
    "digamma": (js.digamma, sp.digamma, (POS[1:],)),
    "erf": (js.erf, sp.erf, (X,)),
    "erfc": (js.erfc, sp.erfc, (X[:-1],)),
    "erfinv": (js.erfinv, sp.erfinv, (2 * UNIT[1:-1] - 1,)),
    "erfcx": (js.erfcx, sp.erfcx, (X,)),
    "dawsn": (js.dawsn, sp.dawsn, (X,)),
    "ndtr": (js.ndtr, sp.ndtr, (X,)),
    "ndtri": (js.ndtri, sp.ndtri, (UNIT[2:-2],)),
    "log_ndtr": (js.log_ndtr, sp.log_ndtr, (np.array([-40.0, -12.0, -3.0, 0.0, 3.0, 8.0], F32),)),
    "expit": (js.expit, sp.expit, (X,)),
    "logit": (js.logit, sp.logit, (UNIT[2:-2],)),
    "entr": (js.entr, sp.entr, (np.array([-1.0, 0.0, 0.3, 2.0], F32),)),
    "i0": (js.i0, sp.i0, (X[:-2],)),
    "i0e": (js.i0e, sp.i0e, (X,)),
    "i1": (js.i1, sp.i1, (X[:-2],)),
    "i1e": (js.i1e, sp.i1e, (X,)),
    "expi": (js.expi, sp.expi, (np.array([-5.0, -0.5, 0.5, 3.0, 10.0, 40.0], F32),)),
    "exp1": (js.exp1, sp.exp1, (POS[1:-1],)),
    "spence": (js.spence, sp.spence, (np.array([0.0, 0.3, 1.0, 1.7, 2.5, 10.0], F32),)),
    "sici": (js.sici, sp.sici, (np.array([-3.0, 0.5, 4.0, 6.0, 20.0], F32),)),
    "fresnel": (js.fresnel, sp.fresnel, (np.array([-3.0, 0.5, 1.5, 4.0, 50.0], F32),)),
    "loggamma": (js.loggamma, sp.loggamma, (POS,)),
    "factorial": (js.factorial, sp.factorial, (np.array([-1.0, 0.0, 3.0, 4.5, 10.0], F32),)),
    "gammainc": (js.gammainc, sp.gammainc, (POS[1:], POS[::-1][:-1])),
    "gammaincc": (js.gammaincc, sp.gammaincc, (POS[1:], POS[::-1][:-1])),
    "betainc": (js.betainc, sp.betainc, (POS[1:8], POS[::-1][1:8], UNIT[1:8])),
    "betaln": (js.betaln, sp.betaln, (POS, POS[::-1])),
    "beta": (js.beta, sp.beta, (POS[2:6], POS[::-1][2:6])),
    "xlogy": (js.xlogy, sp.xlogy, (X, np.abs(X))),
    "xlog1py": (js.xlog1py, sp.xlog1py, (X, np.abs(X))),
    "rel_entr": (js.rel_entr, sp.rel_entr, (X, np.abs(X[::-1]))),
    "kl_div": (js.kl_div, sp.kl_div, (X, np.abs(X[::-1]))),
    "boxcox": (js.boxcox, sp.boxcox, (POS[2:], np.linspace(-1, 1, 7).astype(F32))),
    "boxcox1p": (js.boxcox1p, sp.boxcox1p, (POS[2:], np.linspace(-1, 1, 7).astype(F32))),
    "zeta": (js.zeta, sp.zeta, (np.array([1.5, 2.0, 3.0, 7.5], F32), np.array([0.5, 1.0, 2.0, 3.0], F32))),
    "polygamma": (js.polygamma, sp.polygamma, (np.array([0, 1, 2, 3]), np.array([0.5, 1.0, 2.0, 7.0], F32))),
    "poch": (js.poch, sp.poch, (np.array([0.5, 1.0, 2.0, 3.0], F32), np.array([0.0, 1.5, 2.0, -0.5], F32))),
    "comb": (js.comb, sp.comb, (np.array([5.0, 10.0, 3.0, 2.0], F32), np.array([2.0, 3.0, 4.0, -1.0], F32))),
    "owens_t": (js.owens_t, sp.owens_t, (X[:6], np.array([0.5, -2.0, 1.0, 0.3, 5.0, -0.1], F32))),
    "hyp1f1": (js.hyp1f1, sp.hyp1f1, (np.array([0.5, 1.0, -2.0, 0.0], F32), np.array([1.5, 2.0, 3.0, 1.0], F32),
                                       np.array([0.3, -2.0, 4.0, 2.0], F32))),
    "hyp2f1": (js.hyp2f1, sp.hyp2f1, (np.array([0.5, 2.0, -2.0, 1.5], F32), np.array([1.5, 2.0, 3.0, 2.5], F32),
                                       np.array([2.5, 4.0, 1.5, 1.5], F32), np.array([0.3, 0.5, 0.95, 0.2], F32))),
    "expn": (js.expn, sp.expn, (np.array([0.0, 1.0, 2.0, 3.0, 5.0], F32), np.array([0.5, 0.3, 2.0, 1.5, 7.0], F32))),
}
LOOSE = {"gamma": 1e-4, "beta": 1e-4, "poch": 1e-4, "factorial": 1e-4, "i0": 5e-5, "i1": 5e-5,
         "betainc": 1e-4, "hyp1f1": 1e-4, "hyp2f1": 1e-4, "expn": 1e-4, "exp1": 5e-5, "expi": 5e-5,
         "zeta": 1e-4, "polygamma": 1e-4, "gammainc": 1e-4, "gammaincc": 1e-4}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_against_scipy(name):
    fun, ref, args = VALUES[name]
    got = fun(*args)
    with np.errstate(all="ignore"):
        want = ref(*[a.astype(np.float64) if a.dtype == F32 else a for a in args])
    close(got, want, rtol=LOOSE.get(name, 2e-5))


def test_all_53_names():
    names = """bernoulli bessel_jn beta betainc betaln boxcox boxcox1p comb dawsn digamma entr erf erfc
    erfcx erfinv exp1 expi expit expn factorial fresnel gamma gammainc gammaincc gammaln gammasgn hyp1f1
    hyp2f1 i0 i0e i1 i1e kl_div log_ndtr log_softmax loggamma logit logsumexp multigammaln ndtr ndtri
    owens_t poch polygamma rel_entr sici softmax spence sph_harm_y wofz xlog1py xlogy zeta""".split()
    assert len(names) == 53 and all(callable(getattr(js, n)) for n in names)


def test_structured_functions():
    close(js.bernoulli(12), sp.bernoulli(12), rtol=1e-5)
    z = np.array([7.5, 12.0], F32)    # (smaller z overflow the float32 recurrence: NaN, as in JAX)
    close(js.bessel_jn(z, v=3), np.stack([sp.jv(k, z.astype(np.float64)) for k in range(4)]), rtol=1e-4, atol=1e-5)
    close(js.multigammaln(np.array([2.5, 4.0], F32), 3), sp.multigammaln(np.array([2.5, 4.0]), 3), rtol=1e-5)
    w = np.array([0.5 + 0.2j, -1.0 + 2.0j, 3.0 - 0.5j], np.complex64)
    close(js.wofz(w).real, sp.wofz(w.astype(complex)).real, rtol=1e-4)
    close(js.wofz(w).imag, sp.wofz(w.astype(complex)).imag, rtol=1e-4)
    n, m = np.array([0, 1, 2, 3]), np.array([0, -1, 2, 1])
    theta, phi = np.array([0.3, 1.0, 2.0, 2.8], F32), np.array([0.1, -1.0, 2.0, 0.5], F32)
    got = js.sph_harm_y(n, m, theta, phi)
    want = sp.sph_harm_y(n, m, theta.astype(float), phi.astype(float))
    close(got.real, want.real, rtol=1e-4, atol=1e-6)
    close(got.imag, want.imag, rtol=1e-4, atol=1e-6)


def test_logsumexp_softmax():
    a = np.array([[1.0, -2.0, 3.0], [0.5, np.inf, -np.inf]], F32)
    b = np.array([[1.0, -1.0, 2.0], [1.0, 0.0, 1.0]], F32)
    close(js.logsumexp(a[:1], axis=1), sp.logsumexp(a[:1], axis=1))
    close(js.logsumexp(a[:1], b=b[:1], axis=1), sp.logsumexp(a[:1], b=b[:1], axis=1))
    out, sign = js.logsumexp(a[:1], b=-b[:1], axis=1, return_sign=True)
    close(out, sp.logsumexp(a[:1], b=-b[:1], axis=1, return_sign=True)[0])
    assert float(sign[0]) == -1.0
    assert np.isnan(js.logsumexp(np.array([0.0, 1.0], F32), b=np.array([1.0, -2.0], F32)))
    close(js.logsumexp(a, axis=1, keepdims=True), sp.logsumexp(a, axis=1, keepdims=True))
    mask = np.array([[True, False, True], [True, True, True]])
    close(js.logsumexp(a[:1], axis=1, where=mask[:1]), np.logaddexp(1.0, 3.0))
    close(js.softmax(a[:1]), sp.softmax(a[:1]))
    close(js.log_softmax(a[:1], axis=1), sp.log_softmax(a[:1], axis=1))


# --------------------------------------------------------------- derivatives

def _central_difference(fun, x, i, h=1e-6):
    args = [np.float64(a) for a in x]
    up, down = list(args), list(args)
    up[i] += h
    down[i] -= h
    return (float(fun(*up)) - float(fun(*down))) / (2 * h)


GRADS = {   # name: (function, point, differentiated arguments)
    "gammainc": (js.gammainc, (2.5, 1.5), (0, 1)),
    "gammainc_fraction": (js.gammainc, (1.5, 4.0), (0, 1)),
    "gammaincc": (js.gammaincc, (2.5, 1.5), (0, 1)),
    "betainc_x": (js.betainc, (2.0, 3.0, 0.4), (2,)),
    "zeta": (js.zeta, (3.0, 2.0), (0, 1)),
    "polygamma_x": (lambda x: js.polygamma(2, x), (1.5,), (0,)),
    "i0e": (js.i0e, (-1.5,), (0,)),
    "i1e": (js.i1e, (2.5,), (0,)),
    "erfcx": (js.erfcx, (1.5,), (0,)),
    "dawsn": (js.dawsn, (0.7,), (0,)),
    "log_ndtr_tail": (js.log_ndtr, (-25.0,), (0,)),
    "log_ndtr": (js.log_ndtr, (0.5,), (0,)),
    "owens_t": (js.owens_t, (0.7, 1.5), (0, 1)),
    "expi": (js.expi, (1.5,), (0,)),
    "expn": (lambda x: js.expn(2, x), (0.7,), (0,)),
    "sici": (lambda x: js.sici(x)[0] + 2 * js.sici(x)[1], (2.5,), (0,)),
    "fresnel": (lambda x: js.fresnel(x)[0] + 2 * js.fresnel(x)[1], (1.3,), (0,)),
    "hyp1f1": (js.hyp1f1, (0.5, 1.5, 0.8), (0, 1, 2)),
    "poch": (js.poch, (1.5, 2.5), (0, 1)),
    "xlogy": (js.xlogy, (0.5, 2.0), (0, 1)),
    "kl_div": (js.kl_div, (0.5, 2.0), (0, 1)),
    "betaln": (js.betaln, (2.5, 9.0), (0, 1)),
    "logit": (js.logit, (0.3,), (0,)),
    "norm_logcdf": (jst.norm.logcdf, (-3.0,), (0,)),
    "gamma_logpdf": (jst.gamma.logpdf, (1.5, 2.5), (0, 1)),
    "t_logpdf": (jst.t.logpdf, (0.5, 3.0), (0, 1)),
    "truncnorm_logpdf": (jst.truncnorm.logpdf, (0.2, -0.5, 1.5), (0,)),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_central_differences(name, x64):
    fun, point, argnums = GRADS[name]
    grads = jx.grad(fun, argnums)(*map(np.float64, point))
    for i, g in zip(argnums, grads):
        np.testing.assert_allclose(float(g), _central_difference(fun, point, i), rtol=2e-6, atol=1e-8,
                                   err_msg=f"d{name}/d(arg {i})")


def test_edges_and_errors():
    assert float(js.ndtri(np.float32(0.0))) == -np.inf and float(js.ndtri(np.float32(1.0))) == np.inf
    assert np.isnan(float(js.gammainc(-1.0, 1.0))) and float(js.gammainc(2.0, np.inf)) == 1.0
    assert float(js.gammaincc(0.0, 1.0)) == 0.0 and float(js.betainc(2.0, 3.0, 1.0)) == 1.0
    assert float(js.entr(0.0)) == 0.0 and float(js.xlogy(0.0, 0.0)) == 0.0
    assert float(jx.grad(js.i1e)(0.0)) == 0.5
    with pytest.raises(ValueError, match="integer type"):
        js.polygamma(1.5, 2.0)
    with pytest.raises(NotImplementedError, match="Riemann"):
        js.zeta(2.0)
    with pytest.raises(TypeError, match="not supported"):
        js.ndtr(np.int32(1))
    with pytest.raises(ValueError, match="complex"):
        js.gammaln(1j)
    with pytest.raises(ValueError, match="betainc.*derivative with respect to a"):
        jx.grad(js.betainc)(2.0, 3.0, 0.5)


# ---------------------------------------------------- lax special primitives

def test_lax_special_primitives_vmap_and_text():
    """Elementwise batching: vmap over rows equals the unbatched op (and one row of it); the
    programs print and parse back."""
    a = np.array([[0.5, 2.0, 9.0], [1.5, 0.2, 3.0]], F32)
    x = np.array([[0.3, 2.5, 4.0], [1.0, 0.1, 7.0]], F32)
    for f, args in [(lax.igamma, (a, x)), (lax.igammac, (a, x)), (lax.igamma_grad_a, (a, x)),
                    (lax.betainc, (a, a[::-1], x / 8)), (lax.zeta, (a + 1.5, x)), (lax.polygamma, (a.round(), x)),
                    (lax.bessel_i0e, (x,)), (lax.bessel_i1e, (x,))]:
        whole = np.asarray(f(*args))
        np.testing.assert_allclose(np.asarray(jx.vmap(f)(*args)), whole, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(jx.vmap(f, in_axes=1)(*args)), whole.T, rtol=1e-6)
        assert_round_trip(jx.make_jaxpr(f)(*args))
    with pytest.raises(TypeError, match="igamma.*float"):
        lax.igamma(np.int32(1), np.int32(2))


def test_igamma_grad_a_derivative_in_x(x64):
    """d/dx dP/da = dP/dx (log x - digamma(a)), the mixed second derivative."""
    fun = lambda a, x: lax.igamma_grad_a(a, x)
    got = jx.grad(fun, 1)(2.5, 1.5)
    np.testing.assert_allclose(float(got), _central_difference(fun, (2.5, 1.5), 1), rtol=1e-6)


# ---------------------------------------------------------------------- stats

XS = np.linspace(-2.5, 2.5, 6).astype(F32)
QS = np.array([0.05, 0.3, 0.5, 0.9], F32)
PX = np.array([0.2, 1.0, 2.5, 6.0], F32)
STATS = [   # (module, function, arguments, scipy's frozen arguments)
    ("norm", "logpdf", (XS, 0.5, 2.0)), ("norm", "cdf", (XS, 0.5, 2.0)), ("norm", "logcdf", (XS * 10,)),
    ("norm", "sf", (XS,)), ("norm", "logsf", (XS,)), ("norm", "ppf", (QS, 1.0, 3.0)), ("norm", "isf", (QS,)),
    ("cauchy", "logpdf", (XS, 0.5, 2.0)), ("cauchy", "cdf", (XS,)), ("cauchy", "ppf", (QS,)), ("cauchy", "isf", (QS,)),
    ("logistic", "logpdf", (XS,)), ("logistic", "cdf", (XS,)), ("logistic", "ppf", (QS,)), ("logistic", "sf", (XS,)),
    ("laplace", "logpdf", (XS, 0.5, 2.0)), ("laplace", "cdf", (XS,)),
    ("expon", "logpdf", (PX, 0.1, 2.0)), ("expon", "cdf", (PX,)), ("expon", "logsf", (PX,)), ("expon", "ppf", (QS,)),
    ("uniform", "logpdf", (XS, -1.0, 2.0)), ("uniform", "cdf", (XS, -1.0, 2.0)), ("uniform", "ppf", (QS, -1.0, 2.0)),
    ("gamma", "logpdf", (PX, 2.5)), ("gamma", "cdf", (PX, 2.5)), ("gamma", "sf", (PX, 2.5, 0.0, 2.0)),
    ("chi2", "logpdf", (PX, 3.0)), ("chi2", "cdf", (PX, 3.0)), ("chi2", "sf", (PX, 3.0)),
    ("beta", "logpdf", (QS, 2.5, 1.5)), ("beta", "cdf", (QS, 2.5, 1.5)), ("beta", "sf", (QS, 2.5, 1.5)),
    ("pareto", "logpdf", (PX + 1, 2.5)), ("pareto", "cdf", (PX + 1, 2.5)), ("pareto", "ppf", (QS, 2.5)),
    ("t", "logpdf", (XS, 3.0, 0.5, 2.0)), ("gennorm", "logpdf", (XS, 1.5)), ("gennorm", "cdf", (XS, 1.5)),
    ("gumbel_l", "logpdf", (XS,)), ("gumbel_l", "cdf", (XS,)), ("gumbel_l", "logsf", (XS,)), ("gumbel_l", "ppf", (QS,)),
    ("gumbel_r", "logpdf", (XS,)), ("gumbel_r", "cdf", (XS,)), ("gumbel_r", "logsf", (XS,)), ("gumbel_r", "ppf", (QS,)),
    ("truncnorm", "logpdf", (XS / 2, -0.5, 1.5)), ("truncnorm", "logcdf", (XS / 2, -0.5, 1.5)),
    ("truncnorm", "logsf", (XS / 2, -0.5, 1.5)), ("truncnorm", "cdf", (XS / 2, 0.5, 3.0)),
    ("vonmises", "logpdf", (XS, 1.5)), ("wrapcauchy", "logpdf", (PX, 0.5)),
    ("poisson", "logpmf", (PX.round(), 2.5)), ("poisson", "cdf", (PX.round(), 2.5)),
    ("binom", "logpmf", (PX.round(), 6.0, 0.3)), ("nbinom", "logpmf", (PX.round(), 3.0, 0.3)),
    ("betabinom", "logpmf", (PX.round(), 6.0, 2.0, 3.0)), ("geom", "logpmf", (PX.round(), 0.3)),
    ("bernoulli", "logpmf", (np.array([0.0, 1.0, 2.0], F32), 0.3)), ("bernoulli", "cdf", (XS, 0.3)),
    ("bernoulli", "ppf", (QS, 0.3)),
]


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("case", STATS, ids=lambda c: f"{c[0]}.{c[1]}")
def test_stats_against_scipy(case):
    module, name, args = case
    got = getattr(getattr(jst, module), name)(*args)
    with np.errstate(all="ignore"):
        want = getattr(getattr(ss, module), name)(*[np.asarray(a, np.float64) for a in args])
    close(got, want, rtol=1e-4, atol=1e-5)


def test_stats_multivariate_and_sample_statistics():
    close(jst.multinomial.logpmf(np.array([1, 2, 3]), 6, np.array([0.2, 0.3, 0.5], F32)),
          ss.multinomial.logpmf([1, 2, 3], 6, [0.2, 0.3, 0.5]))
    close(jst.dirichlet.logpdf(np.array([0.2, 0.3, 0.5], F32), np.array([1.5, 2.0, 3.0], F32)),
          ss.dirichlet.logpdf([0.2, 0.3, 0.5], [1.5, 2.0, 3.0]))
    close(jst.poisson.entropy(np.array([0.5, 5.0, 50.0, 500.0], F32)),
          ss.poisson.entropy(np.array([0.5, 5.0, 50.0, 500.0])), rtol=1e-4)
    data = np.array([[3, 1, 2, 2, 7], [1, 1, 5, 0, 5]], F32)
    result = jst.mode(data, axis=1)
    want = ss.mode(data, axis=1)
    close(result.mode, want.mode)
    close(result.count, want.count)
    for method in ("average", "min", "max", "dense", "ordinal"):
        close(jst.rankdata(data, method, axis=1), ss.rankdata(data, method, axis=1))
    close(jst.rankdata(data), ss.rankdata(data))
    close(jst.sem(data, axis=1), ss.sem(data, axis=1))
    with_nan = data.copy()
    with_nan[0, 1] = np.nan
    close(jst.sem(with_nan, axis=1, nan_policy="omit"), ss.sem(with_nan, axis=1, nan_policy="omit"))
    assert np.isnan(np.asarray(jst.rankdata(with_nan))).all()


def _linalg_available():
    try:
        from jaxprc.lax import linalg  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _linalg_available(), reason="needs jaxprc.lax.linalg (cholesky, triangular_solve), "
                    "added by the linalg work")
def test_multivariate_normal_and_kde():
    mean = np.array([0.5, -1.0], F32)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]], F32)
    x = np.array([[0.0, 0.0], [1.0, -2.0], [3.0, 1.0]], F32)
    close(jst.multivariate_normal.logpdf(x, mean, cov), ss.multivariate_normal.logpdf(x, mean, cov), rtol=1e-5)
    close(jst.multivariate_normal.logpdf(x, mean, 2.0), ss.multivariate_normal.logpdf(x, mean, 2.0), rtol=1e-5)
    data = np.array([[0.1, 0.5, 1.2, -0.3, 2.0, 0.8], [1.0, 0.2, -0.5, 0.4, 1.1, 0.0]], F32)
    kde, ref = jst.gaussian_kde(data), ss.gaussian_kde(data)
    points = np.array([[0.0, 1.0], [0.5, 0.0]], F32)
    close(kde.evaluate(points), ref.evaluate(points), rtol=1e-4)
    close(kde.logpdf(points), ref.logpdf(points), rtol=1e-4)
    one = jst.gaussian_kde(data[0], bw_method="silverman")
    close(one.integrate_box_1d(-1.0, 1.0), ss.gaussian_kde(data[0], bw_method="silverman").integrate_box_1d(-1.0, 1.0),
          rtol=1e-4)


# ----------------------------------------------------------- optimize, integrate

def test_minimize_bfgs():
    def rosenbrock(x, scale):
        return jnp.sum(scale * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    result = optimize.minimize(rosenbrock, np.array([-1.0, 1.5], F32), (10.0,), method="BFGS")
    assert bool(result.success) and int(result.status) == 0
    close(result.x, [1.0, 1.0], rtol=1e-3, atol=1e-3)
    assert result.hess_inv.shape == (2, 2) and int(result.nit) > 0 and int(result.nfev) >= int(result.nit)
    batched = jx.jit(lambda x0: optimize.minimize(lambda x: jnp.sum((x - 3.0) ** 2), x0, method="BFGS").x)
    close(batched(np.zeros(3, F32)), [3.0, 3.0, 3.0], rtol=1e-5)
    with pytest.raises(ValueError, match="not recognized"):
        optimize.minimize(rosenbrock, np.zeros(2, F32), (1.0,), method="nelder-mead")
    with pytest.raises(TypeError, match="tuple"):
        optimize.minimize(rosenbrock, np.zeros(2, F32), 1.0, method="BFGS")


def test_trapezoid():
    y = np.array([[1.0, 2.0, 4.0, 7.0], [0.0, 1.0, 0.0, 1.0]], F32)
    x = np.array([0.0, 0.5, 1.5, 3.0], F32)
    close(integrate.trapezoid(y), si.trapezoid(y))
    close(integrate.trapezoid(y, dx=0.5, axis=0), si.trapezoid(y, dx=0.5, axis=0))
    close(integrate.trapezoid(y, x), si.trapezoid(y, x))
    close(jx.grad(lambda v: integrate.trapezoid(v, x))(y[0]), [0.25, 0.75, 1.25, 0.75])
