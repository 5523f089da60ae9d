"""JAX's conventions at poles, NaN and weak scalars (the edge sweep's findings, checked without JAX):
digamma's derivatives are XLA's polygamma (poles included), a max over a NaN has no derivative
mass at the NaN, logical ops on weak scalars give weak bools, mish/squareplus/softplus are jit
units (their second derivatives sum in JAX's order)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import jaxprc
import jaxprc.lax as lax
import jaxprc.nn as nn
import jaxprc.numpy as jnp
from jaxprc import grad, jit, vmap

_d1 = jit(vmap(grad(lax.digamma)))
_d2 = jit(vmap(grad(grad(lax.digamma))))


def test_digamma_derivatives_are_polygamma_with_its_poles():
    x = np.array([1.0, 0.5, -1.0, -2.0, 2.5], np.float32)
    d1, d2 = np.asarray(_d1(x)), np.asarray(_d2(x))
    np.testing.assert_allclose(d1[:2], [math.pi ** 2 / 6, math.pi ** 2 / 2], rtol=1e-6)
    np.testing.assert_allclose(d2[0], -2 * 1.2020569031595942, rtol=1e-6)    # -2 zeta(3)
    assert np.isposinf(d1[2]) and np.isposinf(d1[3]) and np.isnan(d2[2])
    polygamma = jit(lax.polygamma)     # (XLA specialises on a constant order: ulps apart)
    np.testing.assert_allclose(d1, np.asarray(polygamma(np.ones_like(x), x)), rtol=1e-5)
    np.testing.assert_allclose(d2[[0, 1, 4]], np.asarray(polygamma(np.full_like(x, 2.0), x))[[0, 1, 4]],
                               rtol=1e-5)
    # lgamma'' is digamma' (its pole included)
    assert np.isposinf(grad(grad(lax.lgamma))(-1.0))


def test_igamma_dx_is_the_gamma_density():
    a = np.array([1.0, 2.0, 3.5], np.float32)
    x = np.array([0.5, 2.0, 1.25], np.float32)
    dx = np.asarray(vmap(grad(lax.igamma, 1))(a, x))
    density = x ** (a - 1) * np.exp(-x) / np.array([math.gamma(v) for v in a], np.float32)
    np.testing.assert_allclose(dx, density, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(vmap(grad(lax.igammac, 1))(a, x)), -dx)


@pytest.mark.parametrize("fn", [jnp.max, jnp.min, jnp.amax, jnp.amin])
def test_extremum_gives_no_derivative_to_a_nan(fn):
    x = np.array([np.nan, 1.0, -2.0], np.float32)
    # a scalar reduction is reduce_max over no axes (as in JAX), whose tie mask excludes the NaN
    np.testing.assert_array_equal(np.asarray(jit(vmap(grad(fn)))(x)), [0.0, 1.0, 1.0])
    assert "reduce_m" in str(jaxprc.make_jaxpr(fn)(1.0))
    # ties share the derivative
    np.testing.assert_array_equal(np.asarray(grad(fn)(np.array([2.0, 2.0], np.float32))), [0.5, 0.5])


@pytest.mark.parametrize("op", [jnp.logical_and, jnp.logical_or, jnp.logical_xor])
def test_logical_ops_weak_types_follow_jaxs_constants(op):
    S = jaxprc.ShapeDtypeStruct
    weak = lambda *args: jaxprc.eval_shape(op, *args).weak_type
    assert weak(0.5, 0.5) and weak(3, 3) and weak(S((), jnp.float32, weak_type=True), True)
    assert not weak(S((3,), jnp.float32, weak_type=True), 1)           # weak arrays: strong bool
    assert not weak(S((2,), jnp.bool_), 0.5)
    assert jaxprc.eval_shape(jnp.logical_not, 0.5).weak_type
    assert not jaxprc.eval_shape(jnp.logical_not, S((3,), jnp.float32, weak_type=True)).weak_type


@pytest.mark.parametrize("fn", [nn.mish, nn.squareplus, nn.softplus])
def test_activations_are_jit_units_as_in_jax(fn):
    text = str(jaxprc.make_jaxpr(fn)(1.0))
    assert f'name="{fn.__name__}"' in text
    x = np.array([-1.5, 0.0, 0.5, 3.0], np.float32)
    d1 = np.asarray(vmap(grad(fn))(x))
    h = 1e-2
    fd = (np.asarray(vmap(fn)(x.astype(np.float32) + h)) - np.asarray(vmap(fn)(x - h))) / (2 * h)
    np.testing.assert_allclose(d1, fd, rtol=2e-3, atol=1e-3)


def test_promoted_weak_inputs_keep_weak_cotangents():
    """convert_element_type transposes back to its operand's type, weak bit included (JAX's rule):
    a Python-scalar scan carry promoted to the body's strong type gets a weak gradient."""
    def loss(c0):
        return lax.scan(lambda c, x: (jnp.sin(c) + x, c), c0, jnp.ones(3))[0]
    g = grad(loss)(1.0)
    assert g.weak_type and g.dtype == np.float32
    assert grad(lambda x: lax.convert_element_type(x, np.float32) * 2)(1.0).weak_type
    assert not grad(lambda x: lax.convert_element_type(x, np.float32) * 2)(np.float32(1.0)).weak_type
