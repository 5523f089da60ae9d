"""Typed key arrays through the jax.numpy and lax functions that move, select or replicate
elements, against JAX: the same key dtype, shape and key data; key dtypes accepted as ``dtype=`` of
the creation functions and of ``ShapeDtypeStruct``; the errors where keys meet non-keys."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

MOVES = {
    "concatenate": lambda np_, lax, ks, k: np_.concatenate([ks, ks[::-1]]),
    "concatenate_axis_none": lambda np_, lax, ks, k: np_.concatenate([ks[None], ks[None]], axis=None),
    "stack_last_axis": lambda np_, lax, ks, k: np_.stack([ks, ks], axis=-1),
    "hstack": lambda np_, lax, ks, k: np_.hstack([ks, ks]),
    "vstack": lambda np_, lax, ks, k: np_.vstack([ks, ks]),
    "where": lambda np_, lax, ks, k: np_.where(np_.array([True, False, True]), ks, ks[::-1]),
    "select": lambda np_, lax, ks, k: np_.select([np_.array([True, False, True])], [ks], k),
    "expand_dims": lambda np_, lax, ks, k: np_.expand_dims(ks, -1),
    "squeeze": lambda np_, lax, ks, k: np_.squeeze(ks[None]),
    "broadcast_to": lambda np_, lax, ks, k: np_.broadcast_to(k, (2, 3)),
    "tile": lambda np_, lax, ks, k: np_.tile(ks, 2),
    "repeat": lambda np_, lax, ks, k: np_.repeat(ks, 2),
    "roll": lambda np_, lax, ks, k: np_.roll(ks, 1),
    "flip": lambda np_, lax, ks, k: np_.flip(ks),
    "swapaxes": lambda np_, lax, ks, k: np_.swapaxes(ks[None], 0, 1),
    "moveaxis": lambda np_, lax, ks, k: np_.moveaxis(ks[None], 0, -1),
    "take": lambda np_, lax, ks, k: np_.take(ks, np_.array([0, 2, -1])),
    "take_along_axis": lambda np_, lax, ks, k: np_.take_along_axis(ks, np_.array([2, 0]), axis=0),
    "split": lambda np_, lax, ks, k: np_.split(ks, 3),
    "array_split": lambda np_, lax, ks, k: np_.array_split(ks, 2),
    "append": lambda np_, lax, ks, k: np_.append(ks, ks[:1]),
    "delete": lambda np_, lax, ks, k: np_.delete(ks, 1),
    "insert": lambda np_, lax, ks, k: np_.insert(ks, 1, ks[2]),
    "reshape": lambda np_, lax, ks, k: np_.reshape(ks, (3, 1)),
    "transpose": lambda np_, lax, ks, k: np_.transpose(ks[None]),
    "array": lambda np_, lax, ks, k: np_.array(ks),
    "array_of_list": lambda np_, lax, ks, k: np_.asarray([ks[1], ks[0]]),
    "copy": lambda np_, lax, ks, k: np_.copy(ks),
    "full": lambda np_, lax, ks, k: np_.full((2,), ks[1]),
    "zeros_key_dtype": lambda np_, lax, ks, k: np_.zeros((2,), dtype=ks.dtype),
    "full_key_dtype": lambda np_, lax, ks, k: np_.full((2,), 5, dtype=ks.dtype),
    "ones_like": lambda np_, lax, ks, k: np_.ones_like(ks),
    "full_like": lambda np_, lax, ks, k: np_.full_like(ks, ks[2]),
    "lax.concatenate": lambda np_, lax, ks, k: lax.concatenate([ks, ks], 0),
    "lax.broadcast_in_dim": lambda np_, lax, ks, k: lax.broadcast_in_dim(ks, (2, 3), (1,)),
    "lax.dynamic_slice": lambda np_, lax, ks, k: lax.dynamic_slice(ks, (1,), (2,)),
    "lax.dynamic_update_slice": lambda np_, lax, ks, k: lax.dynamic_update_slice(ks, ks[:1], (1,)),
    "lax.rev": lambda np_, lax, ks, k: lax.rev(ks, (0,)),
    "lax.slice": lambda np_, lax, ks, k: lax.slice(ks, (1,), (3,)),
    "lax.select_n": lambda np_, lax, ks, k: lax.select_n(np_.array([0, 1, 1]), ks, ks[::-1]),
    "lax.transpose": lambda np_, lax, ks, k: lax.transpose(ks[None], (1, 0)),
    "method_swapaxes": lambda np_, lax, ks, k: ks[None].swapaxes(0, 1),
    "method_squeeze": lambda np_, lax, ks, k: ks[None].squeeze(),
    "method_take": lambda np_, lax, ks, k: ks.take(np_.array([2, 0])),
    "method_copy": lambda np_, lax, ks, k: ks.copy().block_until_ready(),
}
ERRORS = {
    "keys_with_integers": lambda np_, lax, ks, k: np_.concatenate([ks, np_.zeros(3, np_.uint32)]),
    "keys_of_two_impls": lambda np_, lax, ks, k: np_.concatenate([ks, ks_rbg(np_)]),
    "where_key_and_int": lambda np_, lax, ks, k: np_.where(True, ks, 0),
    "array_to_float": lambda np_, lax, ks, k: np_.array(ks, dtype=np_.float32),
    "numpy_conversion": lambda np_, lax, ks, k: np.asarray(ks),
}


def ks_rbg(np_):
    lib = jax if np_ is jnp else jaxprc
    return lib.random.split(lib.random.key(1, impl="rbg"), 3)


def _keys(lib):
    k = lib.random.key(3)
    return lib.random.split(k, 3), k


def _is_key(x):
    return "key<" in str(getattr(x, "dtype", ""))


def _as_data(lib, out):
    """(dtype, shape, data) of each result; keys as their key data."""
    return [(str(o.dtype), o.shape, np.asarray(lib.random.key_data(o) if _is_key(o) else o))
            for o in lib.tree_util.tree_leaves(out, is_leaf=_is_key)]


@pytest.mark.parametrize("name", list(MOVES))
def test_key_moves_match_jax(name):
    theirs = _as_data(jax, MOVES[name](jnp, jax.lax, *_keys(jax)))
    ours = _as_data(jaxprc, MOVES[name](xnp, jaxprc.lax, *_keys(jaxprc)))
    assert [(d, s) for d, s, _ in ours] == [(d, s) for d, s, _ in theirs]
    for (_, _, o), (_, _, t) in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)


def test_key_moves_under_jit_and_vmap():
    """Traced keys move the same way: jit of a concatenate, vmap of a where over keys."""
    ks, _ = _keys(jaxprc)
    theirs_ks, _ = _keys(jax)
    ours = jaxprc.jit(lambda a: xnp.concatenate([a, a[:1]]))(ks)
    theirs = jax.jit(lambda a: jnp.concatenate([a, a[:1]]))(theirs_ks)
    np.testing.assert_array_equal(jaxprc.random.key_data(ours), jax.random.key_data(theirs))
    cond = np.array([True, False, True])
    ours = jaxprc.vmap(lambda c, a, b: xnp.where(c, a, b))(cond, ks, ks[::-1])
    theirs = jax.vmap(lambda c, a, b: jnp.where(c, a, b))(cond, theirs_ks, theirs_ks[::-1])
    np.testing.assert_array_equal(jaxprc.random.key_data(ours), jax.random.key_data(theirs))


@pytest.mark.parametrize("name", list(ERRORS))
def test_key_errors_match_jax(name):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](jnp, jax.lax, *_keys(jax))
    with pytest.raises(type(theirs.value)):
        ERRORS[name](xnp, jaxprc.lax, *_keys(jaxprc))


def test_key_array_metadata_matches_jax():
    ours, theirs = _keys(jaxprc)[0], _keys(jax)[0]
    for attr in ("shape", "ndim", "size", "itemsize", "nbytes"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert (xnp.shape(ours), xnp.ndim(ours), xnp.size(ours)) == (jnp.shape(theirs), jnp.ndim(theirs), jnp.size(theirs))
    np.testing.assert_array_equal(xnp.equal(ours, ours[::-1]), jnp.equal(theirs, theirs[::-1]))
    np.testing.assert_array_equal(xnp.not_equal(ours, ours[::-1]), jnp.not_equal(theirs, theirs[::-1]))


def test_key_shape_dtype_structs_as_jax():
    """A ShapeDtypeStruct of a key dtype stands for keys in eval_shape, and keys come out as one."""
    for lib in (jax, jaxprc):
        dtype = lib.random.key_dtype()
        sds = lib.ShapeDtypeStruct((3,), dtype)
        assert sds.dtype == dtype
        like = lib.ShapeDtypeStruct.like(lib.random.split(lib.random.key(0), 3))
        assert (like.shape, like.dtype) == ((3,), dtype)
        out = lib.eval_shape(lambda ks: (ks[0], lib.random.split(ks[1], 4), lib.random.normal(ks[2], (2,))), sds)
        assert [(o.shape, str(o.dtype)) for o in out] == [((), "key<fry>"), ((4,), "key<fry>"), ((2,), "float32")]
