"""jaxprc.scipy / nn / image / random against jax on generic random inputs with their options: values,
dtypes, weak types and shapes, eager and under jit, and gradients where differentiable.

A table of (name, jax function, jaxprc function, argument builder); each case is compared eager and
jitted. Found differences that were fixed keep a case here as their regression test."""
import inspect

import jax
import jax.image as jim
import jax.nn as jnn
import jax.scipy.special as jsp
import jax.scipy.stats as jst
import numpy as np
import pytest

import jaxprc
import jaxprc.image as xim
import jaxprc.nn as xnn
import jaxprc.scipy.special as xsp
import jaxprc.scipy.stats as xst

F32 = np.float32


def _rng(name):
    return np.random.default_rng(abs(hash(name)) % (2 ** 32))


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def _compare(expected, got, rtol, atol):
    ej, gx = _leaves(expected), jaxprc.tree_util.tree_leaves(got)
    assert len(ej) == len(gx)
    for e, g in zip(ej, gx):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        assert getattr(g, "weak_type", False) == getattr(e, "weak_type", False)
        np.testing.assert_allclose(np.asarray(g, np.float64 if e.dtype.kind != "c" else np.complex128),
                                   np.asarray(e, np.float64 if e.dtype.kind != "c" else np.complex128),
                                   rtol=rtol, atol=atol, equal_nan=True)


def _check(jf, xf, args, kwargs=None, rtol=2e-4, atol=1e-5, jit=True):
    kwargs = kwargs or {}
    expected = jf(*args, **kwargs)
    _compare(expected, xf(*args, **kwargs), rtol, atol)
    if jit:
        arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

        def call(f):
            def g(*dyn):
                full = list(args)
                for i, a in zip(arrays, dyn):
                    full[i] = a
                return f(*full, **kwargs)
            return g
        dyn = [args[i] for i in arrays]
        _compare(jax.jit(call(jf))(*dyn), jaxprc.jit(call(xf))(*dyn), rtol, atol)


# --------------------------------------------------------------------------- scipy.special
def _real(rng, shape, lo=-4.0, hi=6.0):
    return rng.uniform(lo, hi, shape).astype(F32)


SPECIAL_SCALAR_WEAK = ["dawsn", "erfcx", "exp1", "expi", "ndtr", "log_ndtr", "sici", "spence", "expn",
                       "erf", "gammaln", "digamma", "i0e", "i1", "expit", "logit", "entr", "xlogy",
                       "gammainc", "betainc", "poch", "hyp1f1", "fresnel"]


@pytest.mark.parametrize("name", SPECIAL_SCALAR_WEAK)
def test_special_python_scalar_dtype_and_weak_type(name):
    # JAX's ndtr, expi, sici, ... return strongly typed results for Python scalars (regression)
    jf, xf = getattr(jsp, name), getattr(xsp, name)
    n = len([p for p in inspect.signature(jf).parameters.values() if p.default is inspect.Parameter.empty])
    for value in (1.5, 0.5):
        args = [value] * n
        if name == "betainc":
            args[-1] = 0.4
        _check(jf, xf, args, jit=False)


def test_expn_non_integer_order():
    # regressions: 0 < n < 1 with 0 < x <= 1 is NaN in JAX (jaxprc returned E_1(x)); n < 0 with
    # x > 1 is the continued fraction's value in JAX (jaxprc returned NaN)
    n = np.array([0.5, 0.5, 1.5, 2.5, 0.3, 0.3, 0.5, 1.5, 0.0, 1e-3, 2.0, 3.0, 7.0, -0.2, -2.05, -1.0, -3.0, 0.0], F32)
    x = np.array([0.2, 1.0, 0.5, 0.9, 0.2, 3.0, 0.0, 0.0, 0.0, 0.5, 0.3, 3.0, 0.1, 4.0, 2.04, 0.5, -2.0, -1.5], F32)
    _check(jsp.expn, xsp.expn, (n, x))
    _check(jsp.expn, xsp.expn, (n.astype(np.int32), x.astype(np.int32)), jit=False)


def test_special_generic_inputs():
    # every function of one or more array arguments on generic values (negative, non-integer)
    rng = _rng("special")
    skip = {"bernoulli", "bessel_jn", "multigammaln", "polygamma", "sph_harm_y", "zeta", "softmax",
            "log_softmax", "logsumexp", "lpmn", "lpmn_values", "sph_harm"}
    for name in sorted(n for n in dir(jsp) if not n.startswith("_") and n not in skip):
        jf, xf = getattr(jsp, name), getattr(xsp, name)
        try:
            params = inspect.signature(jf).parameters.values()
        except (TypeError, ValueError):
            continue
        n = len([p for p in params if p.default is inspect.Parameter.empty and p.kind == p.POSITIONAL_OR_KEYWORD])
        args = [_real(rng, (9,)) for _ in range(n)]
        _check(jf, xf, args, rtol=5e-4, jit=False)


@pytest.mark.parametrize("kwargs", [{}, dict(axis=0), dict(axis=-1, keepdims=True), dict(axis=(0, 1)),
                                    dict(b="pos"), dict(b="neg", return_sign=True),
                                    dict(b="x", axis=1, return_sign=True), dict(where="mask"),
                                    dict(where="mask", axis=1), dict(b="row", axis=1),
                                    dict(axis=None, keepdims=True)])
def test_logsumexp_options(kwargs):
    rng = _rng("logsumexp")
    x = rng.normal(size=(3, 4)).astype(F32)
    pos = rng.uniform(0.1, 5, (3, 4)).astype(F32)
    values = dict(pos=pos, neg=-pos, x=x, mask=x > 0, row=pos[0])
    kwargs = {k: values.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    _check(jsp.logsumexp, xsp.logsumexp, (x,), kwargs)


# --------------------------------------------------------------------------- stats
def test_stats_every_method_generic_vector_parameters():
    # every method of every univariate distribution, vector shape parameters, loc and scale
    # included, on generic values (negative parameters and out-of-support points among them)
    rng = _rng("stats")
    ranges = dict(x=(-3, 6), k=(-3, 6), q=(-0.1, 1.1), n=(0, 8), loc=(-1, 1), p=(-0.1, 1.1))
    for module in ("beta", "betabinom", "binom", "cauchy", "chi2", "expon", "gamma", "gennorm", "geom",
                   "gumbel_l", "gumbel_r", "laplace", "logistic", "nbinom", "norm", "pareto", "poisson", "t",
                   "truncnorm", "uniform", "vonmises", "wrapcauchy", "bernoulli"):
        jm, xm = getattr(jst, module), getattr(xst, module)
        for name in sorted(n for n in dir(jm) if not n.startswith("_") and callable(getattr(jm, n))):
            params = list(inspect.signature(getattr(jm, name)).parameters)
            args = [rng.uniform(*ranges.get(p, (-0.3, 3.0)), 5).astype(F32) for p in params]
            args = [np.round(a) if p in ("k", "n") else a for p, a in zip(params, args)]
            _check(getattr(jm, name), getattr(xm, name), args, jit=False)


# --------------------------------------------------------------------------- nn
NN_CASES = [("relu", {}), ("relu6", {}), ("sigmoid", {}), ("softplus", {}), ("sparse_plus", {}),
            ("sparse_sigmoid", {}), ("soft_sign", {}), ("silu", {}), ("swish", {}), ("log_sigmoid", {}),
            ("leaky_relu", dict(negative_slope=0.2)), ("hard_sigmoid", {}), ("hard_silu", {}),
            ("hard_tanh", {}), ("elu", dict(alpha=0.3)), ("celu", dict(alpha=2.5)), ("selu", {}),
            ("gelu", {}), ("gelu", dict(approximate=False)), ("glu", dict(axis=0)), ("squareplus", dict(b=0.5)),
            ("mish", {}), ("identity", {}), ("softmax", dict(axis=0)), ("softmax", dict(axis=(0, 1))),
            ("log_softmax", dict(axis=None)), ("log_softmax", {}), ("logsumexp", dict(axis=1, keepdims=True)),
            ("standardize", dict(axis=0)), ("one_hot", {})]


@pytest.mark.parametrize("name,kwargs", NN_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(NN_CASES)])
def test_nn_activation_options(name, kwargs):
    x = _rng(name).normal(size=(4, 6)).astype(F32) * 3
    jf, xf = getattr(jnn, name), getattr(xnn, name)
    if name == "one_hot":
        _check(lambda i: jnn.one_hot(i, 5, axis=0), lambda i: xnn.one_hot(i, 5, axis=0),
               (np.array([0, 3, -1, 7], np.int32),))
        return
    _check(jf, xf, (x,), kwargs)
    _check(jf, xf, (x.astype(np.float16),), kwargs, rtol=2e-3, atol=2e-3, jit=False)
    grad_j = jax.grad(lambda v: jf(v, **kwargs).sum())(x)
    grad_x = jaxprc.grad(lambda v: xf(v, **kwargs).sum())(x)
    _compare(grad_j, grad_x, 2e-4, 1e-5)


# --------------------------------------------------------------------------- image
@pytest.mark.parametrize("method", ["nearest", "linear", "cubic", "lanczos3", "lanczos5"])
def test_image_resize_and_scale_and_translate(method):
    x = _rng(method).normal(size=(2, 5, 7, 3)).astype(F32)
    for antialias in (True, False):
        shape = (2, 9, 4, 3) if antialias else (1, 3, 3, 3)     # up and down on both settings
        _check(jim.resize, xim.resize, (x, shape, method), dict(antialias=antialias), jit=False)
        if method != "nearest":
            scale, shift = np.array([1.5, 0.4], F32), np.array([0.3, -1.2], F32)
            _check(jim.scale_and_translate, xim.scale_and_translate,
                   (x, (2, 8, 6, 3), (1, 2), scale, shift, method), dict(antialias=antialias), jit=False)


# --------------------------------------------------------------------------- random: bit for bit
COV = np.eye(3, dtype=F32) * 2 + 0.5
RANDOM_CASES = [
    ("uniform", dict(shape=(2, 3), minval=-2.0, maxval=np.array([1.0, 2.0, 3.0], F32))),
    ("randint", dict(shape=(6,), minval=0, maxval=300, dtype=np.uint8)),
    ("randint", dict(shape=(2, 3), minval=np.array([0, 10, 100]), maxval=1000)),
    ("bernoulli", dict(p=np.array([0.1, 0.5, 0.9], F32))),
    ("truncated_normal", dict(lower=np.array([-1.0, 0.0]), upper=3.0, shape=(3, 2))),
    ("gamma", dict(a=0.5, shape=(3,), dtype=np.float16)), ("loggamma", dict(a=np.array([0.1, 1.0, 5.0], F32))),
    ("beta", dict(a=np.array([0.1, 3.0]), b=np.array([2.0, 0.2]))),
    ("dirichlet", dict(alpha=np.array([0.5, 1.0, 2.0], F32), shape=(4,))),
    ("poisson", dict(lam=np.array([0.1, 5.0, 50.0, 200.0], F32))),
    ("binomial", dict(n=np.array([5.0, 100.0, 1000.0]), p=np.array([0.1, 0.5, 0.95]))),
    ("categorical", dict(logits=np.zeros((3, 4), F32), axis=0)),
    ("choice", dict(a=np.arange(12.0).reshape(3, 4), shape=(2,), axis=1)),
    ("choice", dict(a=5, shape=(3,), p=np.array([0.1, 0.2, 0.3, 0.2, 0.2], F32), replace=False)),
    ("permutation", dict(x=np.arange(12).reshape(3, 4), axis=1, independent=True)),
    ("f", dict(dfnum=np.array([0.5, 2.0], F32), dfden=3.0)), ("wald", dict(mean=np.array([0.5, 2.0], F32))),
    ("weibull_min", dict(scale=2.0, concentration=np.array([0.5, 2.0], F32))),
    ("geometric", dict(p=0.3, shape=(4,), dtype=np.int32)), ("rademacher", dict(shape=(6,), dtype=F32)),
    ("bits", dict(shape=(3,), dtype=np.uint16)),
    ("multivariate_normal", dict(mean=np.zeros(3, F32), cov=COV, shape=(4,), method="svd")),
]


@pytest.mark.parametrize("name,kwargs", RANDOM_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RANDOM_CASES)])
def test_random_sampler_options_bit_for_bit(name, kwargs):
    expected = getattr(jax.random, name)(jax.random.key(7), **kwargs)
    got = getattr(jaxprc.random, name)(jaxprc.random.key(7), **kwargs)
    if name == "multivariate_normal":     # through a factorization
        _compare(expected, got, 1e-5, 1e-6)
    else:
        _compare(expected, got, 0, 0)


def test_bernoulli_ppf_weak_type_follows_q():
    # regression: jaxprc's ppf was weakly typed for strongly typed array operands
    for q, p in ((np.array([0.0, 0.5, 1.0], F32), 0.3), (0.4, 0.3), (0.2, np.array([0.1, 0.5, 2.0], F32))):
        _check(jst.bernoulli.ppf, xst.bernoulli.ppf, (q, p), jit=False)


def test_uniform_cdf_strongly_typed():
    # regression: JAX's uniform.cdf is strongly typed even for Python scalars; jaxprc's was weak
    for args in ((0.5,), (0.5, -1.0, 3.0), (np.array([-1.0, 0.3, 2.0], F32), 0.0, 1.0)):
        _check(jst.uniform.cdf, xst.uniform.cdf, args, jit=False)
