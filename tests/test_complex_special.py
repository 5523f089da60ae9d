"""Complex arguments of the gamma family and the logistic/log helpers, checked against the
mathematics: Gamma's recurrence and reflection, exp(loggamma) = gamma with loggamma's branch cut on
the negative real axis, poles and NaN as nan+nanj, expit/logit inverse to each other, x log y,
Box-Cox; complex sin/cos keep the small imaginary part near the zeros of cos."""
import cmath
import math

import numpy as np

import jaxprc
import jaxprc.numpy as jnp
import jaxprc.scipy.special as sp

Z = np.array([1 + 1j, -2.5 + 0.5j, 0.3 - 0.2j, 4 - 3j, -7.3 + 2j, 2.5 + 0j], np.complex64)
_gamma, _loggamma = jaxprc.jit(sp.gamma), jaxprc.jit(sp.loggamma)


def _close(a, b, rtol=2e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol)


def test_gamma_recurrence_reflection_and_known_values():
    g = np.asarray(_gamma(Z))
    assert g.dtype == np.complex64
    _close(g[0], 0.4980156681183560 - 0.1549498283018106j)                # Gamma(1 + i)
    _close(np.asarray(_gamma(Z + 1)), Z * g)                               # Gamma(z + 1) = z Gamma(z)
    reflection = g * np.asarray(_gamma(1 - Z))
    _close(reflection, np.pi / np.sin(np.pi * Z.astype(np.complex128)), rtol=1e-4)
    _close(np.asarray(_gamma(np.array([5 + 0j], np.complex64))), [24.0])


def test_loggamma_branch_poles_and_nan():
    lg = np.asarray(_loggamma(Z))
    _close(np.exp(lg.astype(np.complex128)), np.asarray(_gamma(Z)), rtol=1e-4)
    # principal branch: continuous away from the negative real axis, real on the positive axis
    assert abs(lg[-1].imag) == 0 and math.isclose(lg[-1].real, math.lgamma(2.5), rel_tol=1e-5)
    below, above = np.asarray(_loggamma(np.array([-2.5 - 1e-6j, -2.5 + 1e-6j], np.complex64)))
    np.testing.assert_allclose([below.imag, above.imag], [3 * np.pi, -3 * np.pi], rtol=1e-5)   # (SciPy too)
    bad = np.array([0j, -3 + 0j, complex(np.nan, 0)], np.complex64)
    for f in (_gamma, _loggamma):
        out = np.asarray(f(bad))
        assert np.isnan(out.real).all() and np.isnan(out.imag).all()


def test_logistic_and_log_helpers_on_complex():
    e = np.asarray(sp.expit(Z))
    _close(e, 1 / (1 + np.exp(-Z.astype(np.complex128))))
    _close(np.asarray(sp.logit(e)), Z, rtol=1e-4)
    w = np.roll(Z, 2)
    _close(np.asarray(sp.xlogy(w, Z)), w * np.log(Z.astype(np.complex128)))
    _close(np.asarray(sp.xlog1py(w, Z)), w * np.log1p(Z.astype(np.complex128)))
    assert np.asarray(sp.xlogy(np.complex64(0), np.complex64(0))) == 0
    _close(np.asarray(sp.boxcox(Z, 0.5)), (Z.astype(np.complex128) ** 0.5 - 1) / 0.5, rtol=1e-4)
    _close(np.asarray(sp.boxcox1p(Z, 0.0)), np.log1p(Z.astype(np.complex128)))
    # d/dz expit = expit (1 - expit): for holomorphic g, grad(Re g) is g'(z) (JAX's convention)
    g = jaxprc.grad(lambda z: sp.expit(z).real)(np.complex64(Z[0]))
    _close(g, e[0] * (1 - e[0]), rtol=1e-4)


def test_complex_sin_cos_keep_the_small_imaginary_part():
    z = np.array([-2.5 * np.pi - 1e-9j, np.pi / 2 + 1e-8j, 3j, 1 + 1j], np.complex64)
    exact = np.sin(z.astype(np.complex128)), np.cos(z.astype(np.complex128))
    for f, want in zip((jnp.sin, jnp.cos), exact):
        got = np.asarray(jaxprc.jit(f)(z)).astype(np.complex128)
        np.testing.assert_allclose(got.real, want.real, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.imag, want.imag, rtol=1e-2, atol=1e-20)   # sign and size
    assert cmath.isclose(complex(np.asarray(jnp.sin(np.complex64(0 + 2j)))), cmath.sin(2j), rel_tol=1e-6)
