"""Protocols against JAX: which uses of a ``__jax_array__`` object convert and which raise (with
JAX's error), duck-typed abstract inputs, isinstance of traced values, ShapeDtypeStruct."""
import jax
import numpy as np
import pytest

import jaxprc


class _Wrapped:
    def __init__(self, value):
        self.value = np.asarray(value, np.float32)

    def __jax_array__(self):
        return self.value


class _Abstract:
    shape = (2, 3)
    dtype = np.dtype("float32")


USES = {
    "sin": lambda lib, w: lib.numpy.sin(w),
    "lax_add": lambda lib, w: lib.lax.add(w, w),
    "jit": lambda lib, w: lib.jit(lambda x: x * 2)(w),
    "grad": lambda lib, w: lib.grad(lambda x: (x ** 2).sum())(w),
    "vmap": lambda lib, w: lib.vmap(lambda x: x * 2)(w),
    "device_put": lambda lib, w: lib.device_put(w),
    "asarray": lambda lib, w: lib.numpy.asarray(w),
    "concatenate": lambda lib, w: lib.numpy.concatenate([w, w]),
    "reshape": lambda lib, w: lib.numpy.reshape(w, (2, 1)),
    "array_times": lambda lib, w: lib.numpy.ones(2) * w,
}


def _outcome(lib, use):
    try:
        return "value", np.asarray(USES[use](lib, _Wrapped([1.0, 2.0]))).tolist()
    except Exception as e:     # noqa: BLE001 - the type is what is compared
        return type(e).__name__, str(e)


@pytest.mark.parametrize("use", list(USES))
def test_jax_array_protocol_as_jax(use):
    assert _outcome(jaxprc, use) == _outcome(jax, use)


ABSTRACT = {
    "eval_shape": lambda lib: lib.eval_shape(lambda x: x.sum(0), _Abstract()),
    "trace": lambda lib: lib.jit(lambda x: x * 2).trace(_Abstract()).out_info,
    "lower": lambda lib: lib.jit(lambda x: x * 2).lower(_Abstract()).out_info,
    "like": lambda lib: lib.ShapeDtypeStruct.like(_Abstract()),
    "update": lambda lib: lib.ShapeDtypeStruct((2, 3), np.float32).update(shape=(4,), weak_type=True),
}


@pytest.mark.parametrize("name", list(ABSTRACT))
def test_abstract_inputs_as_jax(name):
    mine, theirs = ABSTRACT[name](jaxprc), ABSTRACT[name](jax)
    assert (mine.shape, mine.dtype, mine.weak_type) == (theirs.shape, theirs.dtype, theirs.weak_type)


def test_linear_transpose_of_an_abstract_input_as_jax():
    outs = [np.asarray(lib.linear_transpose(lambda x: x * 2, _Abstract())(np.ones((2, 3), np.float32))[0])
            for lib in (jax, jaxprc)]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_isinstance_of_traced_values_as_jax():
    def seen(lib):
        out = []

        def f(x):
            out.append(isinstance(x, lib.Array))
            return x.sum()
        for transform in (lib.jit, lib.grad, lib.vmap, lib.checkpoint):
            transform(f)(lib.numpy.ones(2))
        return out
    assert seen(jaxprc) == seen(jax)


@pytest.mark.parametrize("make", [lambda lib: len(lib.ShapeDtypeStruct((), np.float32)),
                                  lambda lib: lib.ShapeDtypeStruct((2,), None)])
def test_shape_dtype_struct_errors_as_jax(make):
    def raised(lib):
        with pytest.raises(Exception) as e:
            make(lib)
        return type(e.value), str(e.value)
    assert raised(jaxprc) == raised(jax)


def test_make_jaxpr_axis_env_as_jax():
    def eqns(lib):
        cj = lib.make_jaxpr(lambda x: lib.lax.psum(x, "i") * 2, axis_env=[("i", 4)])(1.0)
        assert cj.pretty_print(use_color=False) == str(cj)
        return [(e.primitive.name, tuple(e.params["axes"]) if "axes" in e.params else None) for e in cj.eqns]
    assert eqns(jaxprc) == eqns(jax)
