"""cond, switch, while_loop, scan, fori_loop and map misused as users misuse them: the same exception
types and messages as JAX (users search for these words), and the lax binary ops' refusals of
operands of two dtypes."""
import re

import jax
import numpy as np
import pytest

import jaxprc

F32, I32 = np.float32, np.int32


class Tagged:
    """A pytree node whose metadata (the tag) is compared by structure checks."""

    def __init__(self, value, tag):
        self.value, self.tag = value, tag


for _lib in (jax, jaxprc):
    _lib.tree_util.register_pytree_node(Tagged, lambda t: ((t.value,), t.tag), lambda tag, c: Tagged(c[0], tag))


def _error(lib, make):
    try:
        make(lib)
    except Exception as e:     # noqa: BLE001 - the type is what is compared
        # a traced value prints as each library prints its tracers
        return type(e), re.sub(r"JitTracer\([^)]*\)|Traced<[^>]*>", "TRACER", str(e))
    raise AssertionError(f"{lib.__name__} raised nothing")


def _jit_pred(lib, branches_out):
    return lib.jit(lambda p: lib.lax.cond(p, *branches_out))(True)


ERRORS = {
    "cond_pred_vector": lambda lib: lib.lax.cond(np.array([True, False]), lambda: 1.0, lambda: 2.0),
    "cond_pred_str": lambda lib: lib.lax.cond("a", lambda: 1.0, lambda: 2.0),
    "cond_pred_none": lambda lib: lib.lax.cond(None, lambda: 1.0, lambda: 2.0),
    "cond_pred_complex": lambda lib: lib.lax.cond(1j, lambda: 1.0, lambda: 2.0),
    "cond_dtypes": lambda lib: lib.lax.cond(True, lambda: F32(1.0), lambda: I32(1)),
    "cond_shapes_jit": lambda lib: _jit_pred(lib, (lambda: np.ones(2, F32), lambda: np.ones(3, F32))),
    "cond_dtypes_in_tree": lambda lib: _jit_pred(lib, (lambda: {"a": F32(1), "b": (F32(1), F32(2))},
                                                       lambda: {"a": F32(1), "b": (I32(1), np.ones(2, F32))})),
    "cond_tree_types": lambda lib: _jit_pred(lib, (lambda: (1.0, 2.0), lambda: [1.0, 2.0])),
    "cond_tree_lengths": lambda lib: _jit_pred(lib, (lambda: (1.0, 2.0), lambda: (1.0,))),
    "cond_tree_metadata": lambda lib: _jit_pred(lib, (lambda: Tagged(1.0, "a"), lambda: Tagged(1.0, "b"))),
    "cond_not_callable": lambda lib: lib.lax.cond(True, 1.0, lambda: 2.0),
    "switch_float_index": lambda lib: lib.lax.switch(1.0, [lambda: 1.0, lambda: 2.0]),
    "switch_float_index_jit": lambda lib: lib.jit(lambda i: lib.lax.switch(i, [lambda: 1.0, lambda: 2.0]))(1.0),
    "switch_bool_index": lambda lib: lib.lax.switch(True, [lambda: 1.0, lambda: 2.0]),
    "switch_vector_index": lambda lib: lib.lax.switch(np.array([0, 1]), [lambda: 1.0, lambda: 2.0]),
    "switch_no_branches": lambda lib: lib.lax.switch(0, []),
    "switch_dtypes_jit": lambda lib: lib.jit(lambda i: lib.lax.switch(i, [lambda: F32(1), lambda: F32(2),
                                                                         lambda: I32(1)]))(0),
    "switch_not_callable": lambda lib: lib.lax.switch(0, [1.0, lambda: 2.0]),
    "while_not_callable": lambda lib: lib.lax.while_loop(1, lambda c: c, 0.0),
    "fori_not_callable": lambda lib: lib.lax.fori_loop(0, 2, 1, 0.0),
    "map_not_callable": lambda lib: lib.lax.map(1, np.ones(3, F32)),
    "cond_operand_count": lambda lib: lib.lax.cond(True, lambda x: x, lambda x, y: x, 1.0),
    "while_cond_float": lambda lib: lib.lax.while_loop(lambda c: F32(1.0), lambda c: c, 0.0),
    "while_cond_vector": lambda lib: lib.lax.while_loop(lambda c: c < np.ones(2, F32), lambda c: c + 1,
                                                        np.zeros(2, F32)),
    "while_cond_tuple": lambda lib: lib.lax.while_loop(lambda c: (True,), lambda c: c, 0.0),
    "while_carry_dtype": lambda lib: lib.lax.while_loop(lambda c: c < 3, lambda c: c + 1.0, I32(0)),
    "while_carry_shape": lambda lib: lib.lax.while_loop(lambda c: c[0] < 3, lambda c: np.ones(3, F32),
                                                        np.zeros(2, F32)),
    "while_carry_two_leaves": lambda lib: lib.lax.while_loop(
        lambda c: c["n"] < 3, lambda c: {"n": c["n"] + 1.0, "x": c["x"][:1]}, {"n": I32(0), "x": np.zeros(2, F32)}),
    "while_carry_tree": lambda lib: lib.lax.while_loop(lambda c: c[0] < 3, lambda c: [c[0], c[1]], (0, 1)),
    "while_carry_metadata": lambda lib: lib.lax.while_loop(lambda c: c.value < 3,
                                                           lambda c: Tagged(c.value + 1, "b"), Tagged(0, "a")),
    "scan_lengths": lambda lib: lib.lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3, F32), np.ones(4, F32))),
    "scan_length_argument": lambda lib: lib.lax.scan(lambda c, x: (c, x), 0.0, np.ones(3, F32), length=4),
    "scan_nothing_to_scan": lambda lib: lib.lax.scan(lambda c, x: (c, x), 0.0, None),
    "scan_body_not_pair": lambda lib: lib.lax.scan(lambda c, x: c, 0.0, np.ones(3, F32)),
    "scan_body_triple": lambda lib: lib.lax.scan(lambda c, x: (c, x, x), 0.0, np.ones(3, F32)),
    "scan_carry_dtype": lambda lib: lib.lax.scan(lambda c, x: (c + x, x), I32(0), np.ones(3, F32)),
    "scan_carry_shape": lambda lib: lib.lax.scan(lambda c, x: (np.ones(2, F32), x), 0.0, np.ones(3, F32)),
    "scan_carry_dict_keys": lambda lib: lib.lax.scan(lambda c, x: ({"a": c["a"], "b": x}, x), {"a": 0.0},
                                                     np.ones(3, F32)),
    "scan_carry_metadata": lambda lib: lib.lax.scan(lambda c, x: (Tagged(c.value, "b"), x), Tagged(0.0, "a"),
                                                    np.ones(3, F32)),
    "scan_unroll": lambda lib: lib.lax.scan(lambda c, x: (c, x), 0.0, np.ones(3, F32), unroll=-1),
    "scan_not_callable": lambda lib: lib.lax.scan(1, 0.0, np.ones(3, F32)),
    "fori_bound_dtypes": lambda lib: lib.lax.fori_loop(0.0, 3, lambda i, c: c, 0.0),
    "map_lengths": lambda lib: lib.lax.map(lambda x: x, (np.ones(3, F32), np.ones(4, F32))),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_same_error_as_jax(name):
    assert _error(jaxprc, ERRORS[name]) == _error(jax, ERRORS[name])


# lax refuses operands of two dtypes (jaxprc's message goes on to show the operands' types)
LAX_ERRORS = {
    "add_int_float": lambda lib: lib.lax.add(I32(1), F32(1)),
    "mul_float_vector_int_vector": lambda lib: lib.lax.mul(np.ones(3, F32), np.ones(3, I32)),
    "max_int_vector_bool_scalar": lambda lib: lib.lax.max(np.arange(3, dtype=I32), True),
    "ge_float_int_jit": lambda lib: lib.jit(lambda x: lib.lax.ge(x, I32(0)))(F32(1)),
    "add_float_int_python_scalars": lambda lib: lib.lax.add(1, 2.0),
}


@pytest.mark.parametrize("name", list(LAX_ERRORS))
def test_lax_mixed_dtypes_refused_as_jax(name):
    (kind, message), (want_kind, want) = _error(jaxprc, LAX_ERRORS[name]), _error(jax, LAX_ERRORS[name])
    assert issubclass(kind, want_kind) and message.startswith(want)


def test_platform_dependent_without_a_branch_for_this_platform():
    # JAX fails lowering (no rule for platform_index on cpu); jaxprc says which branches there are
    for lib in (jax, jaxprc):
        with pytest.raises(NotImplementedError):
            lib.lax.platform_dependent(1.0, tpu=lambda x: x)
