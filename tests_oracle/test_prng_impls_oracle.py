"""jaxprc.random's rbg and unsafe_rbg implementations against jax.random's on CPU: key data, bits
and samples equal bit for bit, eagerly and under jit, for typed keys, raw keys and the default
implementation switch."""
import contextlib

import jax
import numpy as np
import pytest

import jaxprc
import jaxprc.random as jr

IMPLS = ["rbg", "unsafe_rbg"]
SEEDS = [0, 7, 2**31 + 5]


def assert_same(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    np.testing.assert_array_equal(ours.reshape(-1).view(np.uint8), theirs.reshape(-1).view(np.uint8))


# name -> f(random module, key): the same call in both libraries; keys come back as their data.
DRAWS = {
    "bits": lambda r, k: r.bits(k, (2, 5)),
    "bits_u8": lambda r, k: r.bits(k, (7,), np.uint8),
    "bits_u16": lambda r, k: r.bits(k, (3,), np.uint16),
    "uniform": lambda r, k: r.uniform(k, (3, 2)),
    "uniform_scalar": lambda r, k: r.uniform(k, minval=-2.0, maxval=3.0),
    "normal": lambda r, k: r.normal(k, (5,)),
    "normal_c64": lambda r, k: r.normal(k, (2,), np.complex64),
    "split": lambda r, k: r.key_data(r.split(k, 3)),
    "split_shape": lambda r, k: r.key_data(r.split(k, (2, 3))),
    "fold_in": lambda r, k: r.key_data(r.fold_in(k, 12345)),
    "fold_in_then_bits": lambda r, k: r.bits(r.fold_in(k, 3), (4,)),
    "split_then_normal": lambda r, k: r.normal(r.split(k)[1], (3,)),
    "randint": lambda r, k: r.randint(k, (6,), -10, 10),
    "permutation": lambda r, k: r.permutation(k, 6),
}


@pytest.mark.parametrize("impl", IMPLS)
def test_draws_match_jax_eager_and_jit(impl):
    theirs = {name: draw(jax.random, jax.random.key(7, impl=impl)) for name, draw in DRAWS.items()}
    ours = jr.key(7, impl=impl)
    jitted = jaxprc.jit(lambda k: {name: draw(jr, k) for name, draw in DRAWS.items()})(ours)
    for name, draw in DRAWS.items():
        assert_same(draw(jr, ours), theirs[name])
        assert_same(jitted[name], theirs[name])


@pytest.mark.parametrize("impl", IMPLS)
def test_seeds_and_raw_keys_match_jax(impl):
    for seed in SEEDS:
        assert_same(jr.PRNGKey(seed, impl=impl), jax.random.PRNGKey(seed, impl=impl))
        assert_same(jr.key_data(jr.key(np.int32(seed % 2**31), impl=impl)),
                    jax.random.key_data(jax.random.key(np.int32(seed % 2**31), impl=impl)))


@contextlib.contextmanager
def default_impl(name):
    old_jax, old_ours = jax.config.jax_default_prng_impl, jaxprc.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", name)
    jaxprc.config.update("jax_default_prng_impl", name)
    try:
        yield
    finally:
        jax.config.update("jax_default_prng_impl", old_jax)
        jaxprc.config.update("jax_default_prng_impl", old_ours)


@pytest.mark.parametrize("impl", IMPLS)
def test_default_impl_reads_raw_keys(impl):
    with default_impl(impl):
        raw, theirs_raw = jr.PRNGKey(3), jax.random.PRNGKey(3)
        assert_same(raw, theirs_raw)
        assert str(jr.key(0).dtype) == str(jax.random.key(0).dtype)
        assert_same(jr.split(raw), jax.random.split(theirs_raw))
        assert_same(jr.uniform(raw, (4,)), jax.random.uniform(theirs_raw, (4,)))
        assert jr.key_impl(raw) == str(jax.random.key_impl(theirs_raw)) == impl


@pytest.mark.parametrize("impl", IMPLS)
def test_vmap_over_keys_matches_jax(impl):
    ours = jaxprc.vmap(lambda k: jr.normal(k, (2,)))(jr.split(jr.key(1, impl=impl), 3))
    theirs = jax.vmap(lambda k: jax.random.normal(k, (2,)))(jax.random.split(jax.random.key(1, impl=impl), 3))
    assert_same(ours, theirs)


def test_key_dtypes_and_impls_match_jax():
    for impl in ["threefry2x32", *IMPLS]:
        ours, theirs = jr.key(0, impl=impl), jax.random.key(0, impl=impl)
        assert str(ours.dtype) == str(theirs.dtype)
        assert ours.dtype.itemsize == theirs.dtype.itemsize
        assert jr.key_impl(ours) == str(jax.random.key_impl(theirs))


def test_user_defined_impl_matches_jax():
    """An implementation built from the rbg functions joins under its own name and tag."""
    def define(module):
        base = module.rbg_prng_impl
        return module.define_prng_impl(key_shape=base.key_shape, seed=base.seed, split=base.split,
                                       random_bits=base.random_bits, fold_in=base.fold_in, name="mine", tag="mn")
    from jax.extend import random as jax_extend_random
    ours, theirs = jr.key(5, impl=define(jr)), jax.random.key(5, impl=define(jax_extend_random))
    assert str(ours.dtype) == str(theirs.dtype) == "key<mn>"
    assert_same(jr.uniform(jr.split(ours)[0], (3,)), jax.random.uniform(jax.random.split(theirs)[0], (3,)))


# The gamma family (Marsaglia-Tsang rejection loops, one split key per element) on rbg keys; the
# draws are shared out between the two implementations (each compiles rejection loops on both sides).
GAMMA_DRAWS = {
    "rbg": {
        "gamma": lambda r, k: r.gamma(k, np.array([0.5, 1.5, 3.0], np.float32)),
        "beta": lambda r, k: r.beta(k, 2.0, 0.5, (3,)),
        "grad": lambda r, k: (jax if r is jax.random else jaxprc).grad(lambda a: r.gamma(k, a, (3,)).sum())(1.3),
    },
    "unsafe_rbg": {
        "loggamma": lambda r, k: r.loggamma(k, 0.1, (3,)),
        "dirichlet": lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 0.5]), (2,)),
        "vmapped": lambda r, k: (jax if r is jax.random else jaxprc).vmap(lambda k: r.gamma(k, 1.5, (2,)))(r.split(k, 3)),
    },
}


@pytest.mark.parametrize("impl", IMPLS)
def test_gamma_family_matches_jax(impl):
    for name, draw in GAMMA_DRAWS[impl].items():
        assert_same(draw(jr, jr.key(3, impl=impl)), draw(jax.random, jax.random.key(3, impl=impl)))
    # JAX's poisson draws from threefry keys only
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32 RNG"):
        jr.poisson(jr.key(3, impl=impl), 3.0, (2,))
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32 RNG"):
        jax.random.poisson(jax.random.key(3, impl=impl), 3.0, (2,))


def test_key_arrays_move_as_arrays():
    def moves(r):
        k = r.split(r.key(0), 6).reshape(2, 3)
        return [r.key_data(x) for x in (k.T, k.transpose(1, 0), k.ravel(), k.reshape(3, -1), k.flatten(),
                                        k.at[0, 1].set(r.key(9)), k.at[1].get(),
                                        k.at[:, -1].set(r.split(r.key(2), 2)))]
    for ours, theirs in zip(moves(jr), moves(jax.random)):
        assert_same(ours, theirs)
    for r in (jr, jax.random):
        with pytest.raises(TypeError):
            r.split(r.key(0), 6).reshape(2, 3).transpose(0, 0)
        with pytest.raises(TypeError):
            r.split(r.key(0), 2).at[0].set(np.zeros(2, np.uint32))
