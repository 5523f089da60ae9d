"""User errors against JAX: the same exception type, and JAX's message (whole, or the lines a
user matches on) for vmap's sizes and in_axes, Jacobians of complex functions, grad's argnums,
Python ints too large, float0 arithmetic, the arguments of jax.vjp's function, shapes that do not
broadcast, conversions of traced values and escaped tracers."""
import jax
import numpy as np
import pytest

import jaxprc


def _error(lib, make):
    try:
        make(lib)
    except Exception as e:     # noqa: BLE001 - the type is what is compared
        return type(e).__name__, str(e)
    raise AssertionError(f"{lib.__name__} raised nothing")


_FLOAT0 = np.zeros(3, dtype=jax.dtypes.float0)


def _pair(x):
    return x * 2.0, x


WHOLE = {      # the whole message is JAX's
    "vmap_sizes": lambda lib: lib.vmap(lambda a, b, c: a)(np.ones(2), np.ones((3, 2)), {"k": np.ones(4)}),
    "vmap_most": lambda lib: lib.vmap(lambda a, b, c: a, in_axes=(0, 1, 0))(np.ones(2), np.ones((3, 4)), np.ones(2)),
    "in_axes_list_length": lambda lib: lib.vmap(lambda a: a[0], in_axes=([0, 0],))([np.ones(3)] * 3),
    "in_axes_types": lambda lib: lib.vmap(lambda a: a, in_axes=({"a": 0},))([np.ones(3)]),
    "jacfwd_complex_in": lambda lib: lib.jacfwd(lambda x: x)(1j),
    "jacfwd_holomorphic_real_in": lambda lib: lib.jacfwd(lambda x: x, holomorphic=True)(1.0),
    "jacrev_complex_out": lambda lib: lib.jacrev(lambda x: x * 1j)(1.0),
    "jacrev_holomorphic_real_in": lambda lib: lib.jacrev(lambda x: x, holomorphic=True)(1.0),
    "jacrev_int_in": lambda lib: lib.jacrev(lambda x: x)(1),
    "grad_too_few": lambda lib: lib.grad(lambda x, y: x * y, argnums=1)(1.0),
    "overflow_kwarg": lambda lib: lib.jit(lambda x, y: x * y)(np.ones(3), y=2**70),
    "overflow_nested": lambda lib: lib.jit(lambda d: d["a"])({"a": [1, 2**70]}),
    "overflow_make_jaxpr": lambda lib: lib.make_jaxpr(lambda x: x)(2**40),
    "float0_add": lambda lib: lib.numpy.add(_FLOAT0, _FLOAT0),
    "float0_in_jit": lambda lib: lib.jit(lambda x: x * 2)(_FLOAT0),
    "vjp_two_arguments": lambda lib: lib.vjp(_pair, 1.0)[1](1.0, 2.0),
    "vjp_other_structure": lambda lib: lib.vjp(_pair, 1.0)[1]([1.0, 2.0]),
    "vjp_other_shape": lambda lib: lib.vjp(_pair, 1.0)[1]((np.ones(3, np.float32), 1.0)),
    "vjp_other_dtype": lambda lib: lib.vjp(_pair, 1.0)[1]((np.int32(1), 1.0)),
}


@pytest.mark.parametrize("name", list(WHOLE))
def test_same_error_as_jax(name):
    assert _error(jaxprc, WHOLE[name]) == _error(jax, WHOLE[name])


HEADLINE = {   # the lines JAX's message starts with
    "int": lambda lib: lib.jit(int)(1.0),
    "float": lambda lib: lib.jit(float)(1.0),
    "bool": lambda lib: lib.jit(lambda x: 1 if x > 0 else 0)(1.0),
    "index": lambda lib: lib.jit(lambda x: [1, 2, 3][x])(1),
    "range": lambda lib: lib.jit(lambda x: range(x))(3),
    "shapes": lambda lib: lib.numpy.ones(2) + lib.numpy.ones(3),
    "shapes_in_jit": lambda lib: lib.jit(lambda x: lib.numpy.add(x, lib.numpy.ones(3)))(np.ones(2, np.float32)),
    "index_python_float": lambda lib: lib.numpy.ones(3)[1.0],
    "index_float_array": lambda lib: lib.numpy.ones(3)[np.float32(1)],
    "index_traced_float": lambda lib: lib.jit(lambda i: lib.numpy.ones(3)[i])(1.0),
    "hash_of_a_tracer": lambda lib: lib.jit(hash)(1.0),
}


@pytest.mark.parametrize("name", list(HEADLINE))
def test_tracer_conversions_start_as_jax(name):
    (kind, message), (want_kind, want) = _error(jaxprc, HEADLINE[name]), _error(jax, HEADLINE[name])
    assert kind == want_kind
    first = want.split("\nThe error occurred")[0]
    assert message.startswith(first)


@pytest.mark.parametrize("make", [lambda lib: lib.lax.add(np.ones(3, np.float32), np.ones(4, np.float32)),
                                  lambda lib: lib.lax.mul(np.ones((3, 1), np.float32), np.ones(3, np.float32))])
def test_lax_shape_errors_are_jaxs_type_errors(make):
    errors = []
    for lib in (jaxprc, jax):
        with pytest.raises(TypeError) as e:      # jaxprc's is a JaxprTypeError, a TypeError
            make(lib)
        errors.append(str(e.value).split("\n")[0])
    assert errors[0] == errors[1]


def test_escaped_tracer_says_what_jax_says():
    def run(lib):
        leaked = []

        def leak(x):
            leaked.append(x * 2)
            return x
        lib.jit(leak)(np.ones(3, np.float32))
        return leaked[0] + 1
    (kind, message), (want_kind, want) = _error(jaxprc, run), _error(jax, run)
    assert kind == want_kind == "UnexpectedTracerError"
    assert message.split("\n")[:2] == want.split("\n")[:2]    # the tracer's type and JAX's class


def test_non_jax_values_are_named_as_jax():
    def bad_input(lib):
        lib.jit(lambda x: x)({"a": "abc"})

    def bad_output(lib):
        lib.jit(lambda x: "abc")(1.0)
    for make in (bad_input, bad_output):
        (kind, message), (want_kind, want) = _error(jaxprc, make), _error(jax, make)
        assert kind == want_kind == "TypeError"
        if make is bad_input:
            assert message.split("\n")[0] == want.split("\n")[0].replace(
                want.split(" as an abstract array")[0], "Error interpreting argument to <lambda>")
        else:
            assert "returned a value of type <class 'str'>, which is not a valid JAX type" in message
            assert "returned a value of type <class 'str'>, which is not a valid JAX type" in want


LAX_ERROR_TYPES = {     # the exception type JAX raises (jaxprc's typing errors of these are ValueErrors too)
    "pad_config_length": lambda lib: lib.lax.pad(np.ones(3, np.float32), np.float32(0), [(1, 1, 0)] * 2),
    "squeeze_not_one": lambda lib: lib.lax.squeeze(np.ones((2, 3), np.float32), (0,)),
    "top_k_too_large": lambda lib: lib.lax.top_k(np.ones(3, np.float32), 5),
    "dot_sizes": lambda lib: lib.lax.dot(np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)),
    "dot_rank_3": lambda lib: lib.lax.dot(np.ones((2, 2, 2), np.float32), np.ones((2, 2, 2), np.float32)),
    "dynamic_slice_starts": lambda lib: lib.lax.dynamic_slice(np.ones(3, np.float32), (0, 0), (1,)),
    "integer_pow_float": lambda lib: lib.lax.integer_pow(np.ones(3, np.float32), 1.5),
}


@pytest.mark.parametrize("name", list(LAX_ERROR_TYPES))
def test_lax_errors_have_jaxs_types(name):
    def kinds(lib):
        try:
            LAX_ERROR_TYPES[name](lib)
        except Exception as e:     # noqa: BLE001 - the type is what is compared
            return isinstance(e, ValueError), isinstance(e, TypeError) and not isinstance(e, ValueError)
        raise AssertionError(f"{lib.__name__} raised nothing")
    assert kinds(jaxprc) == kinds(jax)


@pytest.mark.parametrize("make", [lambda lib: lib.numpy.ones(3) * 2**40,
                                  lambda lib: lib.numpy.ones(2, np.uint32) & 0xFFFFFFFF,
                                  lambda lib: lib.jit(lambda x: x - 2**31)(np.ones(2, np.float32))])
def test_python_ints_beyond_the_weak_int_type_overflow_in_jax_numpy(make):
    """jax.numpy functions are jitted in JAX: a Python int is parsed as a weak int32 first, so
    one beyond it overflows whatever it is combined with."""
    errors = []
    for lib in (jaxprc, jax):
        with pytest.raises(OverflowError) as e:
            make(lib)
        errors.append(str(e.value).split(", whose argument path is")[0])
    assert errors[0] == errors[1]
    assert float(jaxprc.numpy.ones(2)[0] + (-2**31)) == float(jax.numpy.ones(2)[0] + (-2**31))    # the bound fits


def test_device_put_of_no_placement_and_vmap_spmd_axis_name_as_jax():
    assert _error(jaxprc, lambda lib: lib.device_put(1.0, "cpu")) == _error(jax, lambda lib: lib.device_put(1.0, "cpu"))
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for lib in (jaxprc, jax):    # outside shard_map / a sharded jit the name changes no value
        np.testing.assert_array_equal(lib.vmap(lambda r: r * 2, spmd_axis_name="i")(x), x * 2)
