"""jaxprc.random's PRNG implementations without JAX: rbg and unsafe_rbg keys (uint32[4] data)
beside threefry2x32, selected per key, by key dtype or by jax_default_prng_impl; user-defined
implementations. Bit equality with JAX is in tests_oracle/test_prng_impls_oracle.py."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
import jaxprc.random as jr

IMPLS = {"threefry2x32": ("fry", 2), "rbg": ("rbg", 4), "unsafe_rbg": ("urbg", 4)}


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_key_shapes_and_dtypes(impl):
    tag, words = IMPLS[impl]
    k = jr.key(3, impl=impl)
    assert k.shape == () and str(k.dtype) == f"key<{tag}>" and k.dtype.itemsize == 4 * words
    assert f"dtype=key<{tag}>" in repr(k)
    assert jr.key_data(k).shape == (words,) and jr.key_impl(k) == impl
    assert jr.PRNGKey(3, impl=impl).shape == (words,)
    keys = jr.split(k, (2, 3))
    assert keys.shape == (2, 3) and jr.key_data(keys).shape == (2, 3, words) and keys.dtype == k.dtype
    assert jr.fold_in(k, 7).shape == () and jr.key_data(jr.fold_in(keys[1, 2], 7)).shape == (words,)
    assert keys[1].shape == (3,) and keys.reshape(6).shape == (6,) and len(list(keys[0])) == 3
    np.testing.assert_array_equal(np.asarray(jr.key_data(keys[1, 2])), np.asarray(jr.key_data(keys))[1, 2])
    assert bool(jr.wrap_key_data(jr.key_data(keys), impl=impl)[0, 1] == keys[0, 1])
    assert jr.key_dtype(impl) == k.dtype and jr.key(3, dtype=k.dtype).dtype == k.dtype


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_keys_draw_and_split_deterministically(impl):
    k = jr.key(0, impl=impl)
    a, b = jr.split(k)
    draws = [np.asarray(jr.uniform(x, (64,))) for x in (a, b, jr.fold_in(k, 1))]
    assert all(((0 <= d) & (d < 1)).all() for d in draws)
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[0], draws[2])
    np.testing.assert_array_equal(np.asarray(jr.uniform(jr.split(jr.key(0, impl=impl))[0], (64,))), draws[0])
    np.testing.assert_array_equal(np.asarray(jaxprc.jit(lambda x: jr.uniform(x, (64,)))(a)), draws[0])


def test_rbg_and_unsafe_rbg_differ_on_the_same_key_data():
    """Same uint32[4] data, different implementations: jit must not share their executables."""
    split_data = jaxprc.jit(lambda k: jr.key_data(jr.split(k)))
    data = jr.PRNGKey(0, impl="rbg")
    rbg, urbg = (split_data(jr.wrap_key_data(data, impl=i)) for i in ("rbg", "unsafe_rbg"))
    assert not np.array_equal(np.asarray(rbg), np.asarray(urbg))
    # rbg splits each half of the key as threefry splits it
    np.testing.assert_array_equal(np.asarray(rbg)[:, :2], np.asarray(jr.split(data[:2])))


def test_vmap_over_keys():
    # split and fold_in of rbg keys are threefry's: vmap agrees with a loop
    keys = jr.split(jr.key(1, impl="rbg"), 3)
    mapped = jaxprc.vmap(lambda k: jr.key_data(jr.fold_in(jr.split(k)[1], 5)))(keys)
    looped = np.stack([np.asarray(jr.key_data(jr.fold_in(jr.split(k)[1], 5))) for k in keys])
    np.testing.assert_array_equal(np.asarray(mapped), looped)
    # XLA's bit generator batched as JAX batches it: the first key draws for the whole batch
    bits = jaxprc.vmap(lambda k: jr.bits(k, (2,)))(keys)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(jr.bits(keys[0], (3, 2))))
    assert jaxprc.vmap(lambda k: k)(keys).dtype == keys.dtype


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_grad_through_samplers(impl):
    k = jr.key(2, impl=impl)
    z = np.asarray(jr.normal(k, (3,)))
    np.testing.assert_allclose(np.asarray(jaxprc.grad(lambda s: jnp.sum(s * jr.normal(k, (3,))))(2.0)), z.sum(),
                               rtol=1e-6)
    g = jaxprc.grad(lambda lo: jnp.sum(jr.uniform(k, (4,), minval=lo, maxval=3.0)))(1.0)
    u = np.asarray(jr.uniform(k, (4,)))
    np.testing.assert_allclose(np.asarray(g), np.sum(1 - u), rtol=1e-5)


def test_default_impl_switch():
    old = jaxprc.config.jax_default_prng_impl
    assert old == "threefry2x32"
    try:
        jaxprc.config.update("jax_default_prng_impl", "rbg")
        raw = jr.PRNGKey(0)
        assert raw.shape == (4,) and str(jr.key(0).dtype) == "key<rbg>" and jr.key_impl(raw) == "rbg"
        assert jr.split(raw).shape == (2, 4)
        with pytest.raises(TypeError, match="rbg key data of type uint32\\[4\\]"):
            jr.uniform(np.zeros(2, np.uint32))
    finally:
        jaxprc.config.update("jax_default_prng_impl", old)
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        jaxprc.config.update("jax_default_prng_impl", "philox")
    assert jaxprc.config.jax_default_prng_impl == old
    with pytest.raises(TypeError, match="threefry2x32 key data of type uint32\\[2\\]"):
        jr.split(np.zeros(4, np.uint32))


def test_user_defined_impl():
    fry = jr.threefry_prng_impl
    mine = jr.define_prng_impl(key_shape=(2,), seed=fry.seed, split=fry.split, fold_in=fry.fold_in,
                               random_bits=lambda k, bit_width, shape: fry.random_bits(k[::-1], bit_width, shape),
                               name="reversed", tag="rev")
    k = jr.key(4, impl=mine)
    assert str(k.dtype) == "key<rev>" and jr.key_impl(k) is mine and "reversed" not in jr.prngs
    reversed_data = jr.wrap_key_data(jr.key_data(k)[::-1])
    np.testing.assert_array_equal(np.asarray(jr.bits(k, (3,))), np.asarray(jr.bits(reversed_data, (3,))))
    with pytest.raises(TypeError, match="cannot compare keys"):
        k == jr.key(4)
