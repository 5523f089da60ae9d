"""Errors a user can cause through the API are one clear paragraph of the right type (as in
JAX), never a raw KeyError or jaxlib INVALID_ARGUMENT, and never a silently wrong value."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp


@pytest.mark.parametrize("make", [
    lambda v: jnp.asarray(v),
    lambda v: jx.jit(lambda x: x * 2)(v),
    lambda v: jnp.add(v, 1.0),
])
def test_big_endian_arrays_are_rejected_not_misread(make):
    v = np.arange(3, dtype=">f4")
    with pytest.raises(TypeError, match="non-native byte order"):
        make(v)


@pytest.mark.parametrize("value", [np.array(["a", "b"]), np.zeros(2, dtype=[("a", "f4")]),
                                   np.array([object()])])
def test_arrays_of_dtypes_without_a_jaxprc_type(value):
    with pytest.raises(TypeError, match="is not a valid jaxprc value"):
        jnp.asarray(value)
    with pytest.raises(TypeError, match="Argument 'x'.*is not a valid jaxprc value"):
        jx.jit(lambda x: x)(value)


def test_eager_op_on_a_deleted_array():
    x = jnp.arange(3.0)
    x.delete()
    with pytest.raises(jx.runtime.DeletedArrayError, match=r"Array has been deleted with shape=float32\[3\]. It is argument 0 of 'add'"):
        x + 1
    y = jnp.arange(3.0)
    assert np.asarray(y + 1).tolist() == [1.0, 2.0, 3.0]     # the process stays usable


def test_jit_of_a_non_callable():
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        jx.jit(3)


def test_static_args_must_name_parameters():
    with pytest.raises(ValueError, match=r"static_argnums=\(5,\), but only accepts 1 positional"):
        jx.jit(lambda x: x, static_argnums=5)
    with pytest.raises(ValueError, match="invalid argnames {'zz'}"):
        jx.jit(lambda x: x, static_argnames="zz")
    # *args and **kwargs accept any position and name
    assert jx.jit(lambda *a: a[0] * 2, static_argnums=3)(1.0, 2, 3, 4) == 2.0
    assert jx.jit(lambda x, **kw: x * kw["k"], static_argnames="k")(1.0, k=3) == 3.0
