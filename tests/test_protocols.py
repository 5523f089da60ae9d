"""The protocols JAX's API honours: ``__jax_array__`` (array constructors and operators take it,
primitives refuse it), objects with ``shape`` and ``dtype`` as abstract inputs, ``jaxprc.Array``
as the type of traced values too, and ShapeDtypeStruct's methods."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax


class _Wrapped:
    def __init__(self, value):
        self.value = np.asarray(value, np.float32)

    def __jax_array__(self):
        return jnp.asarray(self.value)


class _Abstract:
    shape = (2, 3)
    dtype = np.dtype("float32")


def test_jax_array_objects_convert_where_jax_converts_them():
    w = _Wrapped([1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(w)), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jnp.concatenate([w, w])), [1.0, 2.0, 1.0, 2.0])
    assert jnp.reshape(w, (2, 1)).shape == (2, 1)
    np.testing.assert_array_equal(np.asarray(jnp.ones(2) * w), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jnp.ones(2) + w), [2.0, 3.0])


@pytest.mark.parametrize("use", [jnp.sin, lambda w: lax.add(w, w), jx.jit(lambda x: x), jx.device_put,
                                 jx.grad(lambda x: x.sum())])
def test_primitives_refuse_jax_array_objects_as_jax(use):
    with pytest.raises(ValueError, match="Triggering __jax_array__\\(\\) during abstractification is no longer "
                                         "supported"):
        use(_Wrapped([1.0, 2.0]))


def test_anything_with_shape_and_dtype_is_an_abstract_input():
    assert jx.eval_shape(lambda x: x.sum(0), _Abstract()) == jx.ShapeDtypeStruct((3,), np.float32)
    f = jx.jit(lambda x: x * 2)
    assert f.trace(_Abstract()).jaxpr.in_avals[0].shape == (2, 3)
    assert "tensor<2x3xf32>" in f.lower(_Abstract()).as_text()
    assert f.eval_shape(_Abstract()).shape == (2, 3)
    assert jx.make_jaxpr(lambda x: x + 1)(_Abstract()).in_avals[0].shape == (2, 3)
    (ct,) = jx.linear_transpose(lambda x: x * 2, _Abstract())(jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(ct), 2 * np.ones((2, 3)))
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        f(_Abstract())          # a call runs: it needs values


@pytest.mark.parametrize("transform", [jx.jit, jx.grad, jx.vmap, lambda f: jx.jacfwd(f), jx.checkpoint])
def test_traced_values_are_jaxprc_arrays(transform):
    seen = []

    def f(x):
        seen.append(isinstance(x, jx.Array) and isinstance(x, jnp.ndarray))
        return (x * 2).sum() if transform is jx.grad else x * 2
    transform(f)(jnp.ones(()) if transform is jx.grad else jnp.ones(2))
    assert seen == [True]
    assert isinstance(jnp.ones(2), jx.Array) and not isinstance(np.ones(2), jx.Array) and not isinstance(1.0, jx.Array)
    assert jx.Array.__name__ == "Array"


def test_shape_dtype_struct_methods():
    s = jx.ShapeDtypeStruct((2, 3), jnp.float32)
    assert len(s) == 2 and s.update(shape=(4,)) == jx.ShapeDtypeStruct((4,), jnp.float32)
    assert s.update(dtype=jnp.int32, weak_type=True) == jx.ShapeDtypeStruct((2, 3), jnp.int32, weak_type=True)
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(jx.ShapeDtypeStruct((), jnp.float32))
    with pytest.raises(ValueError, match="ShapeDtypeStruct: dtype must be specified."):
        jx.ShapeDtypeStruct((2,), None)
    assert jx.ShapeDtypeStruct.like(jnp.ones(3)) == jx.ShapeDtypeStruct((3,), jnp.float32)
    assert jx.ShapeDtypeStruct.like(1.0) == jx.ShapeDtypeStruct((), jnp.float32, weak_type=True)
    assert jx.ShapeDtypeStruct.like(_Abstract()) == jx.ShapeDtypeStruct((2, 3), jnp.float32)


def test_make_jaxpr_axis_env_and_pretty_print():
    cj = jx.make_jaxpr(lambda x: lax.psum(x, "i") * lax.axis_index("i"), axis_env=[("i", 4)])(1.0)
    assert [e.primitive.name for e in cj.eqns][:2] == ["psum", "axis_index"]
    assert cj.eqns[0].params["axes"] == ("i",)
    with pytest.raises(NameError):
        jx.make_jaxpr(lambda x: lax.psum(x, "i"))(1.0)        # no such axis without axis_env
    assert cj.pretty_print(use_color=False) == str(cj) and cj.jaxpr.pretty_print() == str(cj.jaxpr)
    assert jx.make_jaxpr(jnp.sin).__name__ == "make_jaxpr(sin)"
