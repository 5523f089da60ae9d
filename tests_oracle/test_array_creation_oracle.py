"""Arrays against JAX: ``device=`` on the creation functions (``arange``, ``linspace``, ``eye``,
``array``, ``asarray``), ``asarray(copy=True)``, ``array``'s ``order`` and ``None``, formatting,
and pickling of arrays, typed keys and key dtypes."""
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

CREATIONS = {
    "arange": lambda np_, d: np_.arange(3, device=d),
    "arange_float": lambda np_, d: np_.arange(0.5, 2.0, 0.5, device=d),
    "linspace": lambda np_, d: np_.linspace(0, 1, 4, device=d),
    "linspace_retstep": lambda np_, d: np_.linspace(0, 1, 4, retstep=True, device=d)[0],
    "eye": lambda np_, d: np_.eye(3, 2, k=-1, device=d),
    "array": lambda np_, d: np_.array([1, 2], device=d),
    "asarray": lambda np_, d: np_.asarray([1.5, 2], device=d),
    "zeros": lambda np_, d: np_.zeros(2, device=d),
    "full_like": lambda np_, d: np_.full_like(np_.ones(2), 3, device=d),
}


@pytest.mark.parametrize("name", list(CREATIONS))
def test_creation_on_a_device_matches_jax(name):
    theirs = CREATIONS[name](jnp, jax.devices()[0])
    ours = CREATIONS[name](xnp, jaxprc.devices()[0])
    assert (ours.dtype, ours.shape, ours.weak_type) == (theirs.dtype, theirs.shape, theirs.weak_type)
    np.testing.assert_array_equal(ours, theirs)
    assert ours.device == jaxprc.devices()[0]


def _outcome(f):
    try:
        return repr(f())
    except Exception as e:        # noqa: BLE001
        return type(e).__name__


@pytest.mark.parametrize("call", [
    lambda np_: np_.array([1], order="F"),
    lambda np_: np_.array(None),
    lambda np_: np_.asarray(np_.ones(2), copy=True) is np_.ones(2),
    lambda np_: f"{np_.array(1.5):.2f}",
    lambda np_: f"{np_.ones(2):.2f}",
    lambda np_: f"{np_.ones(2)}" == str(np_.ones(2)),
], ids=["order_F", "None", "copy", "format_scalar", "format_array_spec", "format_array_plain"])
def test_array_corners_match_jax(call):
    assert _outcome(lambda: call(xnp)) == _outcome(lambda: call(jnp))


def test_asarray_copy_true_is_a_new_array():
    x = xnp.ones(2)
    assert xnp.asarray(x) is x and xnp.asarray(x, copy=True) is not x


def test_pickling_arrays_and_keys_as_jax():
    x = xnp.arange(6.0).reshape(2, 3)
    back = pickle.loads(pickle.dumps(x))
    np.testing.assert_array_equal(back, x)
    assert (back.dtype, back.weak_type) == (x.dtype, x.weak_type)
    assert pickle.loads(pickle.dumps(xnp.asarray(1.0))).weak_type is jnp.asarray(1.0).weak_type is True
    for impl in ("threefry2x32", "rbg"):
        keys = jaxprc.random.split(jaxprc.random.key(3, impl=impl), 2)
        back = pickle.loads(pickle.dumps(keys))
        assert back.dtype == keys.dtype
        np.testing.assert_array_equal(jaxprc.random.key_data(back), jaxprc.random.key_data(keys))
        np.testing.assert_array_equal(jaxprc.random.key_data(back),
                                      jax.random.key_data(jax.random.split(jax.random.key(3, impl=impl), 2)))
        assert pickle.loads(pickle.dumps(keys.dtype)) == keys.dtype
