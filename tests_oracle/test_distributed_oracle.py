"""One process: jaxprc's process queries, make_array_from_process_local_data and multihost_utils
against JAX's (values, shapes, dtypes, weak types; the numpy results' types)."""
import jax
import jax.numpy as jnp_
import numpy as np
import pytest
from jax.experimental import multihost_utils as jmh

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.experimental import multihost_utils as xmh

DATA = [np.arange(6.0).reshape(2, 3), np.arange(4, dtype=np.int32), np.float64(2.5), np.array(True), 3]


def _same(a, b):
    assert type(a) is type(b) or (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)), (type(a), type(b))
    assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype, (a, b)
    assert np.array_equal(np.asarray(a), np.asarray(b))


def test_process_queries():
    for name in ("process_index", "process_count", "process_indices"):
        assert getattr(jx, name)() == getattr(jax, name)(), name
    assert not jx.distributed.is_initialized() and not jax.distributed.is_initialized()


@pytest.mark.parametrize("i", range(len(DATA)))
def test_process_local_data(i):
    x = np.asarray(DATA[i])
    a = jax.make_array_from_process_local_data(jax.sharding.SingleDeviceSharding(jax.devices()[0]), x)
    b = jx.make_array_from_process_local_data(jx.sharding.SingleDeviceSharding(jx.devices()[0]), x)
    assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
    assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("i", range(len(DATA)))
def test_multihost_utils(i):
    x = DATA[i]
    _same(jmh.broadcast_one_to_all(x), xmh.broadcast_one_to_all(x))
    _same(jmh.broadcast_one_to_all(jnp_.asarray(x)), xmh.broadcast_one_to_all(jnp.asarray(x)))
    for tiled in (False, True):
        _same(jmh.process_allgather(x, tiled=tiled), xmh.process_allgather(x, tiled=tiled))
        _same(jmh.process_allgather(jnp_.asarray(x), tiled=tiled), xmh.process_allgather(jnp.asarray(x), tiled=tiled))
    jmh.assert_equal(x)
    xmh.assert_equal(x)


CONVERSIONS = ("host_local_array_to_global_array", "global_array_to_host_local_array")


@pytest.mark.parametrize("name", CONVERSIONS)
def test_host_local_global_conversions(name):
    """One process: both conversions give the array laid out over the mesh (or the array itself),
    with JAX's values, dtypes, weak types and specs, eagerly, under jit, grad and vmap."""
    jm, xm = jax.make_mesh((1,), ("x",)), jx.make_mesh((1,), ("x",))
    jf, xf = getattr(jmh, name), getattr(xmh, name)
    jspec, xspec = jax.P("x", None), jx.P("x", None)
    for x in (np.arange(6.0).reshape(2, 3), np.arange(4, dtype=np.int32).reshape(4, 1)):
        a, b = jf(x, jm, jspec), xf(x, xm, xspec)
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
        assert np.array_equal(np.asarray(a), np.asarray(b)) and a.sharding.spec == jspec and b.sharding.spec == xspec
        a, b = jf(jnp_.asarray(x), jm, jspec), xf(jnp.asarray(x), xm, xspec)
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
        assert np.array_equal(np.asarray(a), np.asarray(b))
    tree = {"a": np.ones((2, 2)), "b": (np.float32(2), np.zeros(4, np.int8))}
    specs = {"a": jax.P("x"), "b": jax.P()}
    ja, xa = jf(tree, jm, specs), xf(tree, xm, {"a": jx.P("x"), "b": jx.P()})
    jax.tree.map(lambda u, v: _same(np.asarray(u), np.asarray(v)), ja, xa)
    for fn in (lambda f, m, p: lambda v: f(v * 2, m, p), lambda f, m, p: lambda v: f(2.0, m, jax.P() if m is jm else jx.P())):
        a, b = jax.jit(fn(jf, jm, jspec))(np.ones((2, 3), np.float32)), jx.jit(fn(xf, xm, xspec))(np.ones((2, 3), np.float32))
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type) and np.array_equal(a, b)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    ga = jax.grad(lambda v: jnp_.sum(jf(v, jm, jspec) ** 3))(x)
    gb = jx.grad(lambda v: jnp.sum(xf(v, xm, xspec) ** 3))(x)
    np.testing.assert_allclose(ga, gb)
    va = jax.vmap(lambda v: jf(v, jm, jax.P("x")) * 2, in_axes=1)(x)
    vb = jx.vmap(lambda v: xf(v, xm, jx.P("x")) * 2, in_axes=1)(x)
    assert va.shape == vb.shape and np.array_equal(va, vb)
    with pytest.raises(ValueError, match="is not a valid input to the pspecs"):
        xf(x, xm, None)
    with pytest.raises(ValueError, match="Resource axis: y"):
        xf(x, xm, jx.P("y"))


@pytest.mark.parametrize("name", ["sum", "prod", "cumsum", "cumprod"])
def test_bool_sums_and_products(name):
    """broadcast_one_to_all sums a leaf in its own dtype over processes: for bools, as in JAX, the
    sum (product) computes in integers and the result is whether it is nonzero (an or, an and)."""
    b = np.array([[True, True], [False, True], [False, False]])
    for axis in (0, 1, None):
        want = getattr(jnp_, name)(b, axis=axis, dtype=bool)
        got = getattr(jnp, name)(b, axis=axis, dtype=bool)
        assert got.dtype == want.dtype and np.array_equal(got, want), (axis, got, want)
