"""Complex arguments of jax.scipy.special (issue 19): gamma and loggamma (Lanczos with reflection;
loggamma with SciPy's branch cut), expit, logit, xlogy, xlog1py, boxcox and boxcox1p accept
complex input in JAX and agree with jaxprc bit for bit, values and gradients, eager and jitted,
in complex64 and (x64) complex128; the functions JAX rejects for complex input are rejected too.
Complex sin/cos (which the reflection uses) are lowered as JAX lowers them."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp
import jaxprc.scipy.special as xsp

Z = np.array([1 + 1j, -2.5 + 0.5j, -3.0 + 0j, 0j, 1 + 0j, -2.5 - 1e-9j, 0.3 - 0.2j, 10 - 3j,
              -7.3 + 2j, 1e3 + 1j, complex(np.nan, 1), -0.5 + 0j, 2.5 + 0j, 1e-3 - 1e-3j])
W = np.roll(Z, 3)
UNARY = ("gamma", "loggamma", "expit", "logit")
BINARY = ("xlogy", "xlog1py", "boxcox", "boxcox1p")


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)          # (NaN positions must agree too)


def _check(name, dtype):
    args = (Z.astype(dtype),) if name in UNARY else (W.astype(dtype), Z.astype(dtype))
    jf, xf = getattr(jsp, name), getattr(xsp, name)
    _same(jax.jit(jf)(*args), jaxprc.jit(xf)(*args))
    _same(jf(*args), xf(*args))
    if name == "loggamma":         # (its shift loop is a while_loop: no reverse mode in either)
        return
    argnums = tuple(range(len(args)))
    jg = jax.jit(jax.vmap(jax.grad(lambda *a: jf(*a).real, argnums)))(*args)
    xg = jaxprc.jit(jaxprc.vmap(jaxprc.grad(lambda *a: xf(*a).real, argnums)))(*args)
    for a, b in zip(jg, xg):
        if name == "gamma":     # z has several uses: the cotangents are summed in another order
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=4 * np.finfo(dtype).eps)
        else:
            _same(a, b)


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_complex64_values_and_gradients_equal_jaxs(name):
    _check(name, np.complex64)


@pytest.mark.x64
@pytest.mark.parametrize("name", ("gamma", "loggamma", "xlogy"))
def test_complex128(name):
    _check(name, np.complex128)


@pytest.mark.parametrize("name", ("gammaln", "digamma", "polygamma", "zeta", "gammainc", "betaln",
                                  "gammasgn", "i0e", "erf", "factorial"))
def test_complex_input_rejected_where_jax_rejects_it(name):
    z = Z[:2].astype(np.complex64)
    for f in (getattr(jsp, name), getattr(xsp, name)):
        with pytest.raises((TypeError, ValueError)):
            f(*([np.float32(1.0)] if name == "polygamma" else []), z,
              *([z] if name in ("zeta", "gammainc", "betaln") else []))


@pytest.mark.parametrize("name", ("sin", "cos"))
def test_complex_sin_cos_lowered_as_jax(name):
    z = np.concatenate([Z, [np.pi / 2 + 1e-8j, 50 + 80j, 0 + 100j]]).astype(np.complex64)
    _same(jax.jit(getattr(jnp, name))(z), jaxprc.jit(getattr(xnp, name))(z))
