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
