"""Python ints that do not fit the integer dtype they become raise OverflowError, as in JAX,
instead of wrapping silently (with x64 off: int32)."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp

OVERFLOWING = {
    "array of a list": lambda: jnp.array([1, 2**40]),
    "asarray of a scalar": lambda: jnp.asarray(2**31),
    "below int32": lambda: jnp.asarray(-2**31 - 1),
    "binary op with an array": lambda: jnp.arange(3) + 2**40,
    "binary op under jit": lambda: jx.jit(lambda a: a + 2**40)(1),
    "jit argument": lambda: jx.jit(lambda a: a + 1)(2**40),
    "unsigned operand": lambda: jnp.array([1], jnp.uint32) + 2**32,
    "lax op": lambda: jx.lax.add(jnp.arange(3), 2**40),
    "beyond int64": lambda: jnp.array(2**1030),
    "beyond int64 in a list": lambda: jnp.array([1, 2**70]),
    "beyond int32 as uint64 in numpy": lambda: jnp.array([2**63]),
    "explicit small dtype": lambda: jnp.array(300, dtype=jnp.uint8),
    "full": lambda: jnp.full(3, 2**40),
}


@pytest.mark.parametrize("name", sorted(OVERFLOWING))
def test_out_of_range_python_int_raises(name):
    with pytest.raises(OverflowError, match="too large|out of bounds|overflow was encountered"):
        OVERFLOWING[name]()


def test_python_int_operand_wraps_to_a_narrower_integer_dtype():
    # JAX's numbers: an int that fits the default integer type converts with wrap-around
    np.testing.assert_array_equal(jnp.ones(2, jnp.uint16) * -1, [65535, 65535])
    np.testing.assert_array_equal(jnp.ones(2, jnp.uint16) * -70000, [61072, 61072])
    np.testing.assert_array_equal(jnp.ones(2, jnp.int8) + 200, [-55, -55])
    np.testing.assert_array_equal(jnp.ones(2, jnp.uint32) * -(2**31), [2**31, 2**31])
    with pytest.raises(OverflowError):
        jnp.ones(2, jnp.uint32) * -(2**31 + 1)


def test_boundaries_fit():
    assert int(jnp.array(2**31 - 1)) == 2**31 - 1
    assert int(jnp.array(-2**31)) == -2**31
    np.testing.assert_array_equal(jnp.array([2**31 - 1, -2**31]), np.array([2**31 - 1, -2**31], np.int32))
    assert int(jnp.array([255], jnp.uint8)[0]) == 255
    # a float dtype holds a big Python int (rounded), as in JAX
    assert float(jnp.asarray(2**40, jnp.float32)) == float(2**40)


def test_x64_python_ints_are_int64():
    jx.config.update("jax_enable_x64", True)
    try:
        assert int(jnp.array(2**40)) == 2**40
        assert jnp.array([1, 2**40]).dtype == np.int64
        with pytest.raises(OverflowError):
            jnp.array([2**63])          # numpy says uint64; a Python int is signed
        with pytest.raises(OverflowError):
            jnp.arange(3) + 2**63
    finally:
        jx.config.update("jax_enable_x64", False)
