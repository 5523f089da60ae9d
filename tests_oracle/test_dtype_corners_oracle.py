"""jax.dtypes / jnp dtype corners against JAX: numpy's abstract scalar classes in ``issubdtype``
(``np.generic``, ``np.floating``...), typed-key classes, invalid dtypes in promotion (ValueError),
``isdtype``'s unknown kinds (ValueError), and strict promotion in the user's ``promote_types`` /
``result_type`` (TypePromotionError)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

ABSTRACT = [np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer, np.signedinteger,
            np.unsignedinteger]
CONCRETE = [np.bool_, np.int8, np.uint16, np.int32, np.float16, ml_dtypes.bfloat16, np.float32, np.complex64]


def test_issubdtype_of_abstract_and_concrete_types_matches_jax():
    for a in ABSTRACT + CONCRETE:
        for b in ABSTRACT + CONCRETE:
            assert jaxprc.dtypes.issubdtype(a, b) == jax.dtypes.issubdtype(a, b), (a, b)
            assert xnp.issubdtype(a, b) == jnp.issubdtype(a, b), (a, b)


def test_issubdtype_of_key_classes_matches_jax():
    for lib in (jax, jaxprc):
        d = lib.dtypes
        got = [d.issubdtype(d.prng_key, d.extended), d.issubdtype(d.extended, d.prng_key),
               d.issubdtype(lib.random.key_dtype(), np.generic), d.issubdtype(np.float32, d.extended),
               d.issubdtype(lib.random.key_dtype(), d.prng_key)]
        if lib is jax:
            theirs = got
    assert got == theirs


def _outcome(f):
    try:
        return f()
    except Exception as e:       # noqa: BLE001
        return type(e).__name__


@pytest.mark.parametrize("call", [
    lambda np_, lib: np_.promote_types(object, np.int32),
    lambda np_, lib: lib.dtypes.result_type(np.float32, np.generic),
    lambda np_, lib: np_.promote_types(np.floating, np.int32),
    lambda np_, lib: np_.zeros(2, dtype=np_.floating),
    lambda np_, lib: np_.isdtype(np.float32, "floating"),
    lambda np_, lib: np_.isdtype(np.int8, ("integral", np.float32)),
], ids=["object", "generic", "abstract", "zeros_abstract", "isdtype_unknown_kind", "isdtype_tuple"])
def test_invalid_dtypes_raise_as_jax(call):
    theirs, ours = _outcome(lambda: call(jnp, jax)), _outcome(lambda: call(xnp, jaxprc))
    assert ours == theirs


def test_strict_promotion_in_user_promote_types_and_result_type():
    for lib, np_ in ((jax, jnp), (jaxprc, xnp)):
        with lib.numpy_dtype_promotion("strict"):
            outcomes = [_outcome(lambda: np_.promote_types(np.float32, np.float16)),
                        _outcome(lambda: lib.dtypes.result_type(np.int8, np.int16)),
                        _outcome(lambda: np_.promote_types(np.float32, np.float32)),
                        _outcome(lambda: lib.dtypes.result_type(np.float32, 1.0))]
            with pytest.raises(lib.dtypes.TypePromotionError, match="int8"):
                np_.array(1, np.int8) + np_.array(1, np.int16)
        if lib is jax:
            theirs = outcomes
    assert outcomes == theirs
    assert theirs[:2] == ["TypePromotionError"] * 2
