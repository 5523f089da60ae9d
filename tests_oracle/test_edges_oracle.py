"""Kinks, ties and edges against JAX: values and derivatives (first, second, third) at the points
where a convention decides the number (±0, the kinks of piecewise functions, masked slices).

Values are compared bit for bit (the sign of zero included) under ``jit``; derivatives too where
both libraries compute the same expression, else to a few ulps. Dtypes always, weak types of values.
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.nn  # noqa: F401  (lib.nn)
import jaxprc.numpy  # noqa: F401  (lib.numpy)

LIBS = (jax, jaxprc)
F32 = np.float32


def _same(expected, actual, exact=True, rtol=1e-6):
    expected, actual = np.asarray(expected), np.asarray(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if exact:
        assert np.array_equal(actual, expected, equal_nan=True), (expected, actual)
        assert np.array_equal(np.signbit(actual), np.signbit(expected)), (expected, actual)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-6)


def _weak(x):
    return bool(getattr(x, "weak_type", False))


def _derivatives(lib, fn, order):
    """fn and its first ``order`` derivatives (grad of grad of ...), each jitted."""
    fns = [fn]
    for _ in range(order):
        fns.append(lib.grad(fns[-1]))
    return [lib.jit(f) for f in fns]


def _compare(fn, points, order=2, exact_orders=(0, 1, 2), rtol=1e-6):
    for x in points:
        outs = [[f(x) for f in _derivatives(lib, lambda v, lib=lib: fn(lib, v), order)] for lib in LIBS]
        for k, (expected, actual) in enumerate(zip(*outs)):
            _same(expected, actual, exact=k in exact_orders, rtol=rtol)
            if k == 0:      # (grad of a Python float in jaxprc is not always weak: a known gap)
                assert _weak(actual) == _weak(expected), x


# ------------------------------------------------------------------ abs at ±0 (the primitive)

ZEROS = [F32(0.), F32(-0.), 0., -0.]


@pytest.mark.parametrize("x", ZEROS + [F32(2.), F32(-3.), F32(np.inf), F32(-np.inf)], ids=repr)
def test_abs_slope_is_one_at_both_zeros(x):
    _compare(lambda lib, v: lib.numpy.abs(v), [x])
    _compare(lambda lib, v: lib.lax.abs(v), [x])


def test_abs_of_complex_keeps_its_rule():
    for z in (np.complex64(3 + 4j), np.complex64(0), np.complex64(-1e-3j)):
        for t in (np.complex64(1 + 1j), np.complex64(-2j)):
            expected, actual = (lib.jvp(lib.numpy.abs, (z,), (t,)) for lib in LIBS)
            for e, a in zip(expected, actual):
                _same(e, a, exact=False)
        _same(jax.grad(lambda v: jnp.abs(v))(z), jaxprc.grad(lambda v: jaxprc.numpy.abs(v))(z), exact=False)


# ---------------------------------------------------------------- integer_pow (the primitive)

@pytest.mark.parametrize("y", [0, 1, 2, 3, 4, -1, -2], ids=str)
@pytest.mark.parametrize("x", [F32(0.), F32(-0.), F32(1.5), 0.], ids=repr)
def test_integer_pow_derivatives_at_zero(x, y):
    if y < 0 and x == 0:
        pytest.skip("a pole")
    _compare(lambda lib, v: lib.lax.integer_pow(v, y), [x], order=3, exact_orders=(0, 1, 2))
    _compare(lambda lib, v: v ** y, [x], order=3, exact_orders=(0, 1, 2))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("y", [-1, -3])
def test_integers_cannot_be_raised_to_negative_powers(dtype, y):
    x = np.array([2, 3], dtype)
    for call in (lambda lib: lib.numpy.asarray(x) ** y, lambda lib: lib.lax.integer_pow(x, y),
                 lambda lib: lib.jit(lambda v: lib.numpy.power(v, y))(x)):
        messages = []
        for lib in LIBS:
            with pytest.raises(TypeError) as info:
                call(lib)
            messages.append(str(info.value))
        assert messages[0] == messages[1]


# ----------------------------------------------------------------------- front-end kinks

@pytest.mark.parametrize("x", [F32(0.), F32(6.), F32(-0.), F32(3.), F32(-1.), F32(7.), 0., 6.], ids=repr)
def test_relu6_kinks(x):
    _compare(lambda lib, v: lib.nn.relu6(v), [x])
    _compare(lambda lib, v: lib.nn.hard_sigmoid(v - 3), [x])
    _compare(lambda lib, v: lib.nn.hard_silu(v - 3), [x])


@pytest.mark.parametrize("x", [F32(1.), F32(-1.), F32(0.), F32(-0.), F32(2.), F32(-2.), 1., -1.], ids=repr)
def test_hard_tanh_kinks(x):
    _compare(lambda lib, v: lib.nn.hard_tanh(v), [x])


def test_hard_tanh_of_integers_keeps_the_dtype():
    x = np.array([-3, -1, 0, 1, 3], np.int32)
    expected, actual = jax.nn.hard_tanh(x), jaxprc.nn.hard_tanh(x)
    _same(expected, actual)


@pytest.mark.parametrize("args", [(0., 0.), (F32(0.), F32(0.)), (F32(-0.), F32(0.)), (F32(3.), F32(0.)),
                                  (F32(0.), F32(-2.)), (F32(2.), F32(2.))], ids=repr)
def test_hypot_at_the_origin_and_ties(args):
    for argnum in (0, 1):
        _compare(lambda lib, v: lib.numpy.hypot(*(v, args[1]) if argnum == 0 else (args[0], v)),
                 [args[argnum]], exact_orders=(0, 1))


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 3, "fro"], ids=repr)
@pytest.mark.parametrize("x", [np.zeros(3, F32), np.array([0., 1., -1.], F32), np.array([3., -4., 0.], F32)],
                         ids=["zero", "ties", "mixed"])
def test_norm_gradient_at_zero_and_ties(ord, x):
    if ord == "fro":
        x = x.reshape(1, 3)
    fn = lambda lib, v: lib.numpy.linalg.norm(v, ord)
    expected, actual = (lib.jit(lib.grad(lambda v, lib=lib: fn(lib, v)))(x) for lib in LIBS)
    _same(expected, actual, exact=False)
    expected, actual = (lib.jit(lib.hessian(lambda v, lib=lib: fn(lib, v)))(x) for lib in LIBS)
    _same(expected, actual, exact=False, rtol=1e-5)


GELU_POINTS = np.concatenate([
    -np.logspace(-40, 2, 200, dtype=np.float64), np.logspace(-40, 2, 200, dtype=np.float64),
    [0., -0., -1e-45, 1e-45, -5., -9., -10., -13., -14., -20., -30., -50., -100., np.inf, -np.inf, np.nan],
]).astype(F32)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_bit_for_bit_including_signed_zeros(approximate):
    expected, actual = (lib.jit(lambda v, lib=lib: lib.nn.gelu(v, approximate=approximate))(GELU_POINTS)
                        for lib in LIBS)
    _same(expected, actual)
    expected, actual = (lib.jit(lib.vmap(lib.grad(lambda v, lib=lib: lib.nn.gelu(v, approximate=approximate))))(
        GELU_POINTS) for lib in LIBS)
    _same(expected, actual, exact=False, rtol=1e-5)


@pytest.mark.parametrize("approximate", [True, False])
@pytest.mark.parametrize("x", [0., F32(-1e-30), F32(-12.), F32(-0.)], ids=repr)
def test_gelu_types_and_second_derivative(approximate, x):
    _compare(lambda lib, v: lib.nn.gelu(v, approximate=approximate), [x], exact_orders=(0,))


# ------------------------------------------------------------------------- sinc at 0

@pytest.mark.parametrize("x", [F32(0.), F32(-0.), 0., F32(0.5), F32(0.25), F32(np.inf), F32(np.nan)], ids=repr)
def test_sinc_derivatives_at_zero(x):
    # away from 0 both differentiate sin(pi x)/(pi x), with rules rounding differently in float32
    _compare(lambda lib, v: lib.numpy.sinc(v), [x], order=3, exact_orders=(0, 1, 2) if x == 0 else (0,),
             rtol=1e-4)


def test_sinc_derivatives_match_the_series():
    """d^k/dx^k sinc at 0 = pi^k (-1)^(k/2) / (k+1) for even k, 0 for odd k."""
    fns = _derivatives(jaxprc, jaxprc.numpy.sinc, 6)
    for k, f in enumerate(fns):
        expected = 0. if k % 2 else np.pi ** k * (-1) ** (k // 2) / (k + 1)
        np.testing.assert_allclose(f(F32(0.)), expected, rtol=1e-6)
    xs = np.array([0., 0.5, 0., -2.], F32)
    expected, actual = (lib.vmap(lib.grad(lib.grad(lib.numpy.sinc)))(xs) for lib in LIBS)
    _same(expected, actual, exact=False, rtol=1e-5)


# -------------------------------------------------------------- softmax with a where mask

MASKS = [np.array([False, False, False]), np.array([True, False, True]), np.array([True, True, True])]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("mask", MASKS, ids=lambda m: "".join("TF"[not b] for b in m))
def test_softmax_where_mask(name, mask):
    x = np.array([1., 2., 3.], F32)
    fn = lambda lib: lambda v: getattr(lib.nn, name)(v, where=mask)
    expected, actual = (lib.jit(fn(lib))(x) for lib in LIBS)
    _same(expected, actual)
    for transform in ("jacfwd", "jacrev"):
        expected, actual = (lib.jit(getattr(lib, transform)(fn(lib)))(x) for lib in LIBS)
        _same(expected, actual, exact=False)
    scalar = lambda lib: lambda v: lib.numpy.sum(lib.numpy.where(mask, fn(lib)(v), 0.))
    expected, actual = (lib.jit(lib.hessian(scalar(lib)))(x) for lib in LIBS)
    _same(expected, actual, exact=False, rtol=1e-5)


def test_softmax_where_mask_on_rows():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    mask = np.array([[False, False, False], [True, False, True]])
    for name in ("softmax", "log_softmax"):
        expected, actual = (lib.jit(lambda v, lib=lib: getattr(lib.nn, name)(v, axis=1, where=mask))(x)
                            for lib in LIBS)
        _same(expected, actual)
        expected, actual = (lib.jit(lib.grad(lambda v, lib=lib: lib.numpy.sum(
            lib.numpy.where(mask, getattr(lib.nn, name)(v, axis=1, where=mask), 0.))))(x) for lib in LIBS)
        _same(expected, actual, exact=False)


# ------------------------------------------------------------ power: result dtypes and weak types

def _power_operands(lib):
    np_ = lib.numpy
    return {"py_int": 2, "py_float": 2.0, "py_bool": True, "bool": np_.array([True, False]),
            "int8": np_.array([2, 3], np_.int8), "int32": np_.array([2, 3], np_.int32),
            "uint8": np_.array([2, 3], np_.uint8), "float16": np_.array([2, 3], np_.float16),
            "float32": np_.array([2, 3], np_.float32), "weak_f32": np_.asarray(2.0), "weak_i32": np_.asarray(2),
            "np_int32": np.int32(3)}


POWER_NAMES = ["py_int", "py_float", "py_bool", "bool", "int8", "int32", "uint8", "float16", "float32",
               "weak_f32", "weak_i32", "np_int32"]


@pytest.mark.sample(3)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("a,b", list(itertools.product(POWER_NAMES, POWER_NAMES)), ids="-".join)
def test_power_result_types_match_jax(a, b):
    def run(lib, jit):
        ops = _power_operands(lib)
        fn = lambda u, v: lib.numpy.power(u, v)
        if jit:
            if isinstance(ops[a], (int, float)) or isinstance(ops[b], (int, float)):
                return None
            fn = lib.jit(fn)
        try:
            out = fn(ops[a], ops[b])
        except TypeError as e:
            return type(e).__name__
        return np.dtype(out.dtype), _weak(out), np.asarray(out).tolist()
    for jit in (False, True):
        assert run(jaxprc, jit) == run(jax, jit), jit


@pytest.mark.parametrize("x", [0., 2., -1.5])
def test_power_of_float_by_integer_array_derivatives(x):
    y = np.array([0, 1, 2, 3, -1], np.int32)
    xs = np.full(5, x, F32)
    expected, actual = (lib.jit(lib.grad(lambda v, lib=lib: lib.numpy.sum(lib.numpy.power(v, y))))(xs)
                        for lib in LIBS)
    _same(expected, actual)
    expected, actual = (lib.jit(lib.vmap(lib.grad(lib.grad(lambda v, e, lib=lib: lib.numpy.power(v, e)))))(xs, y)
                        for lib in LIBS)
    _same(expected, actual, exact=False)


def test_division_by_a_constant_of_subnormal_reciprocal_under_jit_is_jaxs():
    """XLA rewrites x / c (c a constant) as x * (1 / c) and XLA:CPU flushes a subnormal 1 / c to
    zero, so under jit 3e38 / 3e38 is 0 and -inf / 3e38 NaN, in JAX as in jaxprc; with c a runtime
    0-d operand both divide exactly, and a divisor broadcast to x's shape gives what JAX gives."""
    x = np.array([3e38, -np.inf, 1.0], np.float32)
    c = np.float32(3e38)
    for lib in (jax, jaxprc):
        np.testing.assert_array_equal(np.asarray(lib.jit(lambda v: v / c)(x)), [0.0, np.nan, 0.0])
        np.testing.assert_array_equal(np.asarray(lib.jit(lambda v, d: v / d)(x[1], c)), -np.inf)
    np.testing.assert_array_equal(np.asarray(jaxprc.numpy.divide(x, jaxprc.numpy.asarray(c))),
                                  np.asarray(jnp.divide(x, jnp.asarray(c))))
