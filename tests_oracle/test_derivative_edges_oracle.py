"""Derivatives at the edges JAX handles in a particular way: cumprod at zeros, cummax/cummin ties
(JAX's tie-splitting tree), gather with mode="fill" (tangent 0 out of bounds), dropped scatter
updates in second order, precision in the VJP program, and vmap's out_axes=None outputs."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy  # noqa: F401

LIBS = (jax, jaxprc)


def both(fn, *args):
    return [np.asarray(fn(lib, *args)) for lib in LIBS]


def assert_same(fn, *args, rtol=1e-6):
    want, got = both(fn, *args)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


def derivatives(f, argnum=0):
    """Value, gradient, jvp, and hessian of the scalar ``f(lib, x)``."""
    def value(lib, *a):
        return f(lib, *a)

    def grad(lib, *a):
        return lib.grad(lambda *b: f(lib, *b), argnum)(*a)

    def hessian(lib, *a):
        return lib.hessian(lambda *b: f(lib, *b), argnum)(*a)

    def fwd_over_rev(lib, *a):
        return lib.jacfwd(lib.grad(lambda *b: f(lib, *b), argnum), argnum)(*a)

    def rev_over_fwd(lib, *a):
        return lib.jacrev(lib.jacfwd(lambda *b: f(lib, *b), argnum), argnum)(*a)
    return [value, grad, hessian, fwd_over_rev, rev_over_fwd]


WEIGHTS = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)


@pytest.mark.parametrize("x", [[0.8, 0.0, 0.5, 1.0, 2.0], [0.0, 0.0, 3.0, -1.0, 0.5],
                               [1.5, -2.0, 0.0, 0.7, 0.0]])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_derivatives_at_zeros(x, reverse):
    x = np.array(x, np.float32)
    f = lambda lib, x: (lib.lax.cumprod(x, reverse=reverse) * WEIGHTS).sum()
    for d in derivatives(f):
        assert_same(d, x)
    assert np.isfinite(both(derivatives(f)[2], x)[1]).all()


def test_jnp_cumprod_grad_at_zero_is_the_exact_product_rule():
    x = np.array([0.8, 0.0, 0.5, 1.0], np.float32)
    g = jaxprc.grad(lambda x: jaxprc.numpy.cumprod(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), [1.0, 0.8 + 0.4 + 0.4, 0.0, 0.0], rtol=1e-6)
    assert_same(lambda lib, x: lib.grad(lambda x: lib.numpy.cumprod(x).sum())(x), x)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_cumprod_grad_low_precision(dtype):
    x = np.array([[0.8, 0.0, 0.5], [1.5, 2.0, 0.0]], dtype)
    assert_same(lambda lib, x: lib.grad(lambda x: lib.lax.cumprod(x, axis=1).astype(np.float32).sum())(x)
                .astype(np.float32), x, rtol=1e-2)


def test_cumprod_grad_any_axis_vmap_and_empty():
    x = np.array([[0.8, 0.0, 0.5], [1.5, -2.0, 0.0]], np.float32)
    for axis in (0, 1):
        for reverse in (False, True):
            f = lambda lib, x: (lib.lax.cumprod(x, axis=axis, reverse=reverse) ** 2).sum()
            assert_same(lambda lib, x: lib.grad(lambda x: f(lib, x))(x), x)
            assert_same(lambda lib, x: lib.vmap(lib.grad(lambda x: f(lib, x)))(np.stack([x, x + 1])), x)
    e = np.zeros((0, 3), np.float32)
    assert_same(lambda lib, x: lib.grad(lambda x: lib.lax.cumprod(x, axis=0).sum())(x), e)


@pytest.mark.parametrize("x", [[1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0],
                               [0.0, -0.0, 1.0, 1.0, 0.5]])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_extremum_ties_as_jax(x, op, reverse):
    x = np.array(x, np.float32)
    f = lambda lib, x: (getattr(lib.lax, op)(x, reverse=reverse) * WEIGHTS).sum()
    for d in derivatives(f):
        assert_same(d, x)
    assert_same(lambda lib, x: lib.jvp(lambda x: getattr(lib.lax, op)(x, reverse=reverse), (x,), (WEIGHTS,))[1], x)


def test_cummax_ties_2d():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 3.0, 1.0], [4.0, 4.0, 1.0, 4.0, 0.0, 4.0, 4.0]], np.float32)
    w = np.arange(14, dtype=np.float32).reshape(2, 7)
    for axis in (0, 1):
        f = lambda lib, x: (lib.lax.cummax(x, axis=axis) * w).sum()
        assert_same(lambda lib, x: lib.grad(lambda x: f(lib, x))(x), x)


@pytest.mark.parametrize("take", [False, True])
def test_gather_fill_tangent_is_zero_out_of_bounds(take):
    a = np.arange(4.0, dtype=np.float32)
    idx = np.array([1, 5, -7, 3])

    def get(lib, a):
        if take:
            return lib.numpy.take(a, idx, mode="fill", fill_value=7.0)
        return lib.numpy.asarray(a).at[idx].get(mode="fill", fill_value=7.0)
    assert_same(lambda lib, a: lib.jvp(lambda a: get(lib, a), (a,), (np.ones(4, np.float32),))[1], a)
    assert_same(lambda lib, a: lib.jacfwd(lambda a: get(lib, a))(a), a)
    assert_same(lambda lib, a: lib.jacrev(lambda a: get(lib, a))(a), a)
    t = jaxprc.jvp(lambda a: get(jaxprc, a), (a,), (np.ones(4, np.float32),))[1]
    np.testing.assert_array_equal(np.asarray(t), [1.0, 0.0, 0.0, 1.0])


A = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
Y = np.array([1.0, 2.0, 3.0], np.float32)


@pytest.mark.parametrize("op", ["add", "max", "min", "set"])
@pytest.mark.parametrize("idx", [[0, 2, 0], [0, 7, 0], [-1, 2, -1], [0, -9, 0]])
def test_scatter_second_derivatives(op, idx):
    idx = np.array(idx)
    f = lambda lib, x, y: (getattr(lib.numpy.asarray(x).at[idx], op)(y) ** 3).sum()
    for argnum in (0, 1):
        for d in derivatives(f, argnum):
            assert_same(d, A, Y, rtol=1e-5)


def test_scatter_add_dropped_update_gets_zero_cotangent():
    idx = np.array([0, 7, 0])
    g = jaxprc.grad(lambda y: (jaxprc.numpy.asarray(A).at[idx].add(y) ** 2).sum())(Y)
    np.testing.assert_allclose(np.asarray(g), [2 * (0.5 + 1 + 3), 0.0, 2 * (0.5 + 1 + 3)])


@pytest.mark.parametrize("precision", ["highest", ("highest", "default")])
def test_vjp_program_keeps_precision(precision):
    m, n = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)

    def dots(lib):
        P = lib.lax.Precision
        prec = (P.HIGHEST, P.HIGHEST) if precision == "highest" else (P.HIGHEST, P.DEFAULT)
        f = lambda m, n: lib.numpy.matmul(m, n, precision=prec).sum()
        jaxpr = lib.make_jaxpr(lib.grad(f, (0, 1)))(m, n).jaxpr
        return [(str(e.params["precision"]), np.dtype(e.params["preferred_element_type"]).name)
                for e in jaxpr.eqns if e.primitive.name == "dot_general"]
    want, got = dots(jax), dots(jaxprc)
    assert got == want[1:]          # JAX keeps the (dead) forward dot in grad's jaxpr
    assert len(got) == 2


def test_dot_general_precision_strings():
    m = np.ones((2, 3), np.float32)
    for prec in ["highest", "float32", "tensorfloat32", ("bfloat16", "highest")]:
        def params(lib):
            jaxpr = lib.make_jaxpr(lambda m: lib.lax.dot_general(m, m, (((1,), (1,)), ((), ())),
                                                                  precision=prec))(m).jaxpr
            return str(jaxpr.eqns[0].params["precision"])
        assert params(jaxprc) == params(jax)


def _leaves(lib, r):
    return [(type(v).__name__ if isinstance(v, (float, int, bool, complex, np.ndarray, np.generic))
             else "array", np.asarray(v).dtype, str(v)) for v in lib.tree_util.tree_leaves(r)]


@pytest.mark.parametrize("out", ["float", "int", "bool", "complex", "np", "npscalar", "passthrough"])
def test_vmap_out_axes_none_returns_unbatched_outputs_unchanged(out):
    n = np.ones(2, np.float32)
    fns = {"float": lambda x, y: 1.5, "int": lambda x, y: 2, "bool": lambda x, y: True,
           "complex": lambda x, y: 1j, "np": lambda x, y: n, "npscalar": lambda x, y: np.float32(2),
           "passthrough": lambda x, y: y}
    a = np.arange(3.0, dtype=np.float32)
    got, want = [_leaves(lib, lib.vmap(fns[out], in_axes=(0, None), out_axes=None)(a, n)) for lib in (jaxprc, jax)]
    assert got == want
    mixed = [_leaves(lib, lib.vmap(lambda x: (1.5, x * 2), out_axes=(None, 0))(a)) for lib in (jaxprc, jax)]
    assert mixed[0] == mixed[1]
