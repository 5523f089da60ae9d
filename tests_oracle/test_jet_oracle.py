"""jaxprc.experimental.jet against jax.experimental.jet: values and dtypes of the primal outputs
and of every Taylor term, on one function per rule (each written once, for both libraries)."""
import jax
import jax.experimental.jet as jjet
import jax.numpy as jjnp
import numpy as np
import pytest

import jaxprc
import jaxprc.experimental.jet as pjet
import jaxprc.numpy as pjnp

LIBS = {"jax": (jax, jjnp, jax.lax, jjet), "jaxprc": (jaxprc, pjnp, jaxprc.lax, pjet)}

rng = np.random.default_rng(0)
X = rng.uniform(0.2, 0.8, (3,)).astype(np.float32)       # inside every domain below
T1, T2, T3 = (rng.normal(size=(3,)).astype(np.float32) for _ in range(3))
M = rng.normal(size=(3, 3)).astype(np.float32)

# name -> (fun(lib, jnp, lax) -> f, primals, series); a few cases with many outputs (each case
# is one compiled program per library)
CASES = {
    "unary": (lambda lib, jnp, lax: lambda x: (
        jnp.exp(x), jnp.log(x), jnp.sin(x) * jnp.cos(2 * x), jnp.sinh(x) + jnp.cosh(x),
        jnp.tanh(x) * lib.nn.sigmoid(x), jnp.sqrt(x) + lax.rsqrt(x), x ** 3 + x ** -2 + x ** 0,
        jnp.expm1(x) * jnp.log1p(x), lax.erf(x) + lax.erfc(x / 2), lax.erf_inv(x - 0.5),
        jnp.arcsinh(x) + jnp.arccosh(x + 1) + jnp.arctanh(x / 2), jnp.square(x) * jnp.abs(x - 0.5)),
        (X,), ((T1, T2, T3),)),
    "binary": (lambda _, jnp, lax: lambda x, y: (
        x ** y, x / y, jnp.arctan2(x, y), jnp.maximum(x, y) - jnp.minimum(x, y / 2)),
        (X, np.array([0.1, 0.5, 1.9], np.float32)), ((T1, T2, T3), (T2, T3, T1))),
    "structural": (lambda _, jnp, lax: lambda x: (
        jnp.where(x > 0.5, x ** 2, lax.clamp(jnp.full_like(x, 0.3), x, jnp.full_like(x, 0.6))),
        jnp.sum(x * x), jnp.max(x), jnp.min(jnp.sin(x)),
        jnp.concatenate([x[::-1], jnp.pad(x, 1)[2:], x.reshape(3, 1)[:, 0]]).reshape(3, 3).T[1:],
        x[np.array([2, 0, 2])].at[np.array([0, 0])].add(x[:2] ** 2),
        lax.dynamic_update_slice(x, lax.dynamic_slice(x, (1,), (2,)) ** 2, (0,)),
        jnp.cumsum(x), jnp.cumprod(x), lax.cummax(x), lax.cummin(x)),
        (X,), ((T1, T2),)),
    "edges": (lambda _, jnp, lax: lambda x: (
        jnp.abs(x), jnp.maximum(x, 0.5 * jnp.ones_like(x)), jnp.minimum(x, x),
        lax.clamp(jnp.zeros_like(x), x, jnp.full_like(x, 0.5)), jnp.sqrt(x), jnp.log(x), 1 / x,
        jnp.exp(x * 1e3), jnp.arctanh(x * 2)),
        (np.array([0., 0.5, -0.5], np.float32),), ((T1, T2),)),
    "max_ties": (lambda _, jnp, lax: jnp.max, (np.array([1., 2., 2.], np.float32),), ((T1, T2),)),
    "dot": (lambda _, jnp, lax: lambda a, x: jnp.tanh(a @ x), (M, X), ((M, M), (T1, T2))),
    "jit_inside": (lambda lib, jnp, lax: lambda x: lib.jit(lambda y: jnp.exp(jnp.sin(y)))(x) * 2,
                   (X,), ((T1, T2, T3),)),
    # JAX 0.10.2's jet fails on custom_jvp functions (a leaked tracer), so its side is the primal
    "custom_jvp": (lambda lib, jnp, lax: lambda x: (lib.nn.relu(x - 0.5) if lib is jaxprc else
                                                    jnp.maximum(x - 0.5, 0.)), (X,), ((T1, T2),)),
    "zero_series_out": (lambda _, jnp, lax: lambda x: (jnp.floor(x), x > 0.5, jnp.ones(2), x),
                        (X,), ((T1, T2),)),
    "scalars": (lambda _, jnp, lax: lambda x: jnp.exp(x) * 3.0, (0.5,), ((1.0, 0.5),)),
    "complex": (lambda _, jnp, lax: lambda z: jnp.exp(z) * z, (1 + 1j,), ((1 + 0j, 0.5j),)),
    "int_terms": (lambda _, jnp, lax: jnp.sin, (X,), ((np.ones(3, np.int32), np.full(3, 2, np.int32)),)),
    "order_zero": (lambda _, jnp, lax: jnp.sin, (X,), ((),)),
    # lo > hi in the first place, lo == hi in the last (JAX's jet test of clamp)
    "clamp_every_operand": (lambda _, jnp, lax: lax.clamp,
                            (np.array([0.9, 0.1, 0.5], np.float32), X, np.array([0.1, 0.9, 0.5], np.float32)),
                            ((T1, T2, T3), (T2, T3, T1), (T3, T1, T2))),
    "select_bool_terms": (lambda _, jnp, lax: jnp.where, (np.array([True, False, True]), X, X[::-1]),
                          ((T1, T2), (T2, T3), (T3, T1))),
}


def _run(name, lib, factorial_scaled):
    make, primals, series = CASES[name]
    top, jnp, lax, jetmod = LIBS[lib]
    f = make(top, jnp, lax)
    if lib == "jax":        # one compiled program, rather than every op compiled on its own
        return jax.jit(lambda p, s: jetmod.jet(f, p, s, factorial_scaled=factorial_scaled))(primals, series)
    return jetmod.jet(f, primals, series, factorial_scaled=factorial_scaled)


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jet_matches_jax(name):
    for scaled in (True, False) if name in ("unary", "dot") else (True,):
        want, got = _run(name, "jax", scaled), _run(name, "jaxprc", scaled)
        assert jax.tree_util.tree_structure(want) == jaxprc.tree_util.tree_structure(got)
        for w, g in zip(_leaves(want), _leaves(got)):
            assert np.asarray(g).dtype == np.asarray(w).dtype, (name, w, g)
            assert getattr(g, "weak_type", False) == getattr(w, "weak_type", False), (name, w, g)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-5, err_msg=name)


@pytest.mark.x64
def test_jet_x64():
    x = np.linspace(0.2, 0.8, 3)
    f = lambda jnp: lambda x: jnp.exp(jnp.sin(x)) / (1 + x)
    want = jjet.jet(f(jjnp), (x,), ((np.ones(3), np.zeros(3), np.zeros(3)),))
    got = pjet.jet(f(pjnp), (x,), ((np.ones(3), np.zeros(3), np.zeros(3)),))
    for w, g in zip(_leaves(want), _leaves(got)):
        assert np.asarray(g).dtype == np.float64
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


def test_jet2_is_unscaled():
    want = jjet.jet2(jjnp.exp, (X,), ((T1, T2),))
    got = pjet.jet2(pjnp.exp, (X,), ((T1, T2),))
    for w, g in zip(_leaves(want), _leaves(got)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5)
