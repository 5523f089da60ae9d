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
