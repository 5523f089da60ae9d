"""With x64 on, jax.numpy computes booleans and integers of up to 32 bits in float32 (JAX's
``to_inexact_dtype``): only 64-bit integers become float64. Functions that promote their
operands to an inexact type must give JAX's dtypes, not the default float (float64). Likewise
arithmetic that needs numbers computes booleans in int32 (``to_numeric_dtype``), not int64."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

CASES = {   # name -> fun(m, x): m is jax.numpy or jaxprc.numpy, x a 1-d or 2-d array
    "sin": lambda m, x: m.sin(x), "sqrt": lambda m, x: m.sqrt(x), "log1p": lambda m, x: m.log1p(x),
    "arctan2": lambda m, x: m.arctan2(x, x), "true_divide": lambda m, x: m.true_divide(x, x),
    "mean": lambda m, x: m.mean(x), "var": lambda m, x: m.var(x), "median": lambda m, x: m.median(x),
    "average": lambda m, x: m.average(x), "percentile": lambda m, x: m.percentile(x, 30),
    "cov": lambda m, x: m.cov(x), "trapezoid": lambda m, x: m.trapezoid(x),
    "convolve": lambda m, x: m.convolve(x, x), "polyval": lambda m, x: m.polyder(x),
    "histogram_bin_edges": lambda m, x: m.histogram_bin_edges(x, 3),
    "norm": lambda m, x: m.linalg.norm(x), "vector_norm": lambda m, x: m.linalg.vector_norm(x),
    "inv": lambda m, x: m.linalg.inv(m.reshape(x, (2, 2)) + m.eye(2, dtype=x.dtype)),
    "fft": lambda m, x: m.fft.fft(x), "rfft": lambda m, x: m.fft.rfft(x),
}
SPECIAL = {"erf", "gammaln", "xlogy"}
NN = {"gelu", "elu", "softplus", "log_softmax", "leaky_relu"}
DTYPES = ["bool", "int8", "uint16", "int32", "uint32", "int64"]


def _call(lib, name, x):
    if name in SPECIAL:
        f = getattr(lib.scipy.special, name)
        return f(x, x) if name == "xlogy" else f(x)
    if name in NN:
        return getattr(lib.nn, name)(x)
    return CASES[name](jnp if lib is jax else xnp, x)


@pytest.fixture
def x64():
    for lib in (jax, jaxprc):
        lib.config.update("jax_enable_x64", True)
    yield
    for lib in (jax, jaxprc):
        lib.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("name", sorted(CASES) + sorted(SPECIAL) + sorted(NN))
def test_integer_and_bool_operands_take_jax_inexact_dtype(name, x64):
    for dtype in DTYPES:
        x = np.array([1, 0, 1, 1], dtype)
        try:
            want = jax.tree_util.tree_leaves(_call(jax, name, x))
        except TypeError:        # JAX rejects the dtype (log_softmax of booleans): so must jaxprc
            with pytest.raises(TypeError):
                _call(jaxprc, name, x)
            continue
        got = jaxprc.tree_util.tree_leaves(_call(jaxprc, name, x))
        assert [np.asarray(g).dtype for g in got] == [np.asarray(w).dtype for w in want], (name, dtype)


NUMERIC = {"square": lambda m, x: m.square(x), "power": lambda m, x: m.power(x, x),
           "floor_divide": lambda m, x: m.floor_divide(x, x), "remainder": lambda m, x: m.remainder(x, x),
           "fmod": lambda m, x: m.fmod(x, x), "left_shift": lambda m, x: m.left_shift(x, x),
           "divmod": lambda m, x: m.divmod(x, x)}


@pytest.mark.parametrize("name", sorted(NUMERIC))
def test_boolean_operands_of_arithmetic_take_int32(name, x64):
    x = np.array([True, False, True])
    want = jax.tree_util.tree_leaves(NUMERIC[name](jnp, x))
    got = jaxprc.tree_util.tree_leaves(NUMERIC[name](xnp, x))
    assert [np.asarray(g).dtype for g in got] == [np.asarray(w).dtype for w in want]
