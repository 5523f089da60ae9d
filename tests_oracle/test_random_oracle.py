"""jaxprc.random against jax.random: bit-equal keys and samples for a table of seeds, shapes, dtypes.

Floats are compared through their bit patterns, so -0.0, NaN payloads and
the last ulp all count.
"""
import contextlib

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.random as jr

SEEDS = [0, 1, 42, 2**31 + 7]
BF16 = ml_dtypes.bfloat16


@contextlib.contextmanager
def x64(enabled: bool):
    """Both libraries in the same x64 mode for part of a test."""
    old_jax, old_ours = jax.config.jax_enable_x64, jaxprc.config.jax_enable_x64
    jax.config.update("jax_enable_x64", enabled)
    jaxprc.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old_jax)
        jaxprc.config.update("jax_enable_x64", old_ours)


def assert_bits_equal(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    if ours.dtype.kind in "fcV" or ours.dtype == BF16:
        ours, theirs = (np.ascontiguousarray(x).view(np.uint8) for x in (ours, theirs))
    np.testing.assert_array_equal(ours, theirs)


# name -> sampler(random_module, numpy_module, key); both modules share jax.random's signatures.
SAMPLERS = {
    "bits_2x5": lambda r, n, k: r.bits(k, (2, 5)),
    "bits_u8": lambda r, n, k: r.bits(k, (7,), np.uint8),
    "bits_u16": lambda r, n, k: r.bits(k, (3,), np.uint16),
    "uniform_scalar": lambda r, n, k: r.uniform(k),
    "uniform_3": lambda r, n, k: r.uniform(k, (3,)),
    "uniform_range": lambda r, n, k: r.uniform(k, (2, 5), minval=-2.0, maxval=3.5),
    "uniform_array_bounds": lambda r, n, k: r.uniform(k, (2, 3), minval=n.array([0., 1., -5.]),
                                                       maxval=n.array([1., 10., -4.])),
    "uniform_f16": lambda r, n, k: r.uniform(k, (5,), np.float16),
    "uniform_bf16": lambda r, n, k: r.uniform(k, (5,), BF16),
    "normal_scalar": lambda r, n, k: r.normal(k),
    "normal_3": lambda r, n, k: r.normal(k, (3,)),
    "normal_2x5": lambda r, n, k: r.normal(k, (2, 5)),
    "normal_f16": lambda r, n, k: r.normal(k, (4,), np.float16),
    "normal_bf16": lambda r, n, k: r.normal(k, (4,), BF16),
    "normal_c64": lambda r, n, k: r.normal(k, (3,), np.complex64),
    "bernoulli": lambda r, n, k: r.bernoulli(k, 0.3, (9,)),
    "bernoulli_p_array": lambda r, n, k: r.bernoulli(k, n.array([0.1, 0.5, 0.9])),
    "bernoulli_high": lambda r, n, k: r.bernoulli(k, 0.25, (2, 3), mode="high"),
    "randint": lambda r, n, k: r.randint(k, (6,), 0, 10),
    "randint_neg": lambda r, n, k: r.randint(k, (2, 3), -1000, 7),
    "randint_full_range": lambda r, n, k: r.randint(k, (4,), -2**31, 2**31 - 1),
    "randint_empty_range": lambda r, n, k: r.randint(k, (3,), 5, 2),
    "randint_uint8_256": lambda r, n, k: r.randint(k, (5,), 0, 256, np.uint8),
    "randint_int8": lambda r, n, k: r.randint(k, (5,), -100, 100, np.int8),
    "randint_array_bounds": lambda r, n, k: r.randint(k, (2, 3), n.array([0, 10, 100]), 1000),
    "permutation_int": lambda r, n, k: r.permutation(k, 10),
    "permutation_rows": lambda r, n, k: r.permutation(k, n.arange(12.).reshape(4, 3)),
    "permutation_independent": lambda r, n, k: r.permutation(k, n.arange(12).reshape(3, 4), axis=1,
                                                             independent=True),
    "choice_int": lambda r, n, k: r.choice(k, 5, (3,)),
    "choice_array_axis1": lambda r, n, k: r.choice(k, n.arange(12.).reshape(3, 4), (2,), axis=1),
    "choice_no_replace": lambda r, n, k: r.choice(k, 8, (5,), replace=False),
    "choice_p": lambda r, n, k: r.choice(k, 4, (6,), p=n.array([0.125, 0.25, 0.5, 0.125])),
    "choice_p_no_replace": lambda r, n, k: r.choice(k, 4, (3,), replace=False,
                                                    p=n.array([0.125, 0.25, 0.5, 0.125])),
    "categorical": lambda r, n, k: r.categorical(k, n.array([[0., 1., 2., -1.], [3., 0., 0., 1.]])),
    "categorical_axis0": lambda r, n, k: r.categorical(k, n.array([[0., 1., 2.], [3., 0., -1.]]), axis=0),
    "categorical_shape": lambda r, n, k: r.categorical(k, n.array([0.5, 1., 2.]), shape=(2, 4)),
    "categorical_no_replace": lambda r, n, k: r.categorical(k, n.array([[0., 1., 2., 0.5], [1., 1., 0., 2.]]),
                                                            shape=(3, 2), replace=False),
    "truncated_normal": lambda r, n, k: r.truncated_normal(k, -1.0, 2.0, (2, 4)),
    "truncated_normal_arrays": lambda r, n, k: r.truncated_normal(k, n.array([-3., 0.]), n.array([-2., 0.5])),
    "gumbel": lambda r, n, k: r.gumbel(k, (2, 3)),
    "gumbel_high": lambda r, n, k: r.gumbel(k, (4,), mode="high"),
    "gumbel_f16": lambda r, n, k: r.gumbel(k, (3,), np.float16),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler_matches_jax(name):
    sample = SAMPLERS[name]
    with x64(False):
        for seed in SEEDS:
            ours = sample(jr, jaxprc.numpy, jr.key(seed))
            theirs = sample(jax.random, jjnp, jax.random.key(seed))
            assert_bits_equal(ours, theirs)
        # raw keys give the same values as typed ones
        assert_bits_equal(sample(jr, jaxprc.numpy, jr.PRNGKey(3)),
                          sample(jax.random, jjnp, jax.random.PRNGKey(3)))


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler_under_jit_of_vmap_over_keys_matches_jax(name):
    sample = SAMPLERS[name]
    with x64(False):
        ours = jaxprc.jit(jaxprc.vmap(lambda k: sample(jr, jaxprc.numpy, k)))(jr.split(jr.key(7), 3))
        theirs = jax.jit(jax.vmap(lambda k: sample(jax.random, jjnp, k)))(jax.random.split(jax.random.key(7), 3))
        assert_bits_equal(ours, theirs)


def test_normal_of_key_0_is_jax_s():
    with x64(False):
        ours = jr.normal(jr.key(0), (3,))
        theirs = jax.random.normal(jax.random.key(0), (3,))
        assert_bits_equal(ours, theirs)


@pytest.mark.parametrize("seed", [0, 1, 42, -1, 2**31, 2**32 + 5, -2**40, 2**63 - 1])
def test_seeds(seed):
    with x64(False):
        assert_bits_equal(jr.PRNGKey(seed), jax.random.PRNGKey(seed))
        assert_bits_equal(jr.key_data(jr.key(seed)), jax.random.key_data(jax.random.key(seed)))
    with x64(True):
        assert_bits_equal(jr.PRNGKey(seed), jax.random.PRNGKey(seed))


@pytest.mark.parametrize("seed", [np.int8(-3), np.uint8(200), np.int32(-7), np.uint32(2**32 - 2)])
def test_numpy_seeds(seed):
    with x64(False):
        assert_bits_equal(jr.PRNGKey(seed), jax.random.PRNGKey(seed))


def test_split_and_fold_in_key_data():
    with x64(False):
        for seed in SEEDS:
            k, jk = jr.key(seed), jax.random.key(seed)
            for num in (2, 3, (2, 3)):
                assert_bits_equal(jr.key_data(jr.split(k, num)), jax.random.key_data(jax.random.split(jk, num)))
            for data in (0, 1, 7, 2**31 + 1):
                assert_bits_equal(jr.key_data(jr.fold_in(k, data)),
                                  jax.random.key_data(jax.random.fold_in(jk, data)))
            # chains: split of a split, fold_in of a subkey
            a, b = jr.split(k)
            ja, jb = jax.random.split(jk)
            assert_bits_equal(jr.key_data(jr.split(b, 4)), jax.random.key_data(jax.random.split(jb, 4)))
            assert_bits_equal(jr.key_data(jr.fold_in(a, 5)), jax.random.key_data(jax.random.fold_in(ja, 5)))
            assert_bits_equal(jr.fold_in(jr.PRNGKey(seed), 9), jax.random.fold_in(jax.random.PRNGKey(seed), 9))


X64_SAMPLERS = {
    "bits_u64": lambda r, n, k: r.bits(k, (5,)),
    "uniform_f64": lambda r, n, k: r.uniform(k, (2, 3)),
    "uniform_f32": lambda r, n, k: r.uniform(k, (3,), np.float32, minval=0.1, maxval=0.7),
    "normal_f64": lambda r, n, k: r.normal(k, (4,)),
    "normal_c128": lambda r, n, k: r.normal(k, (2,), np.complex128),
    "randint_i64": lambda r, n, k: r.randint(k, (5,), -2**40, 2**40),
    "randint_i32": lambda r, n, k: r.randint(k, (5,), 0, 10, np.int32),
    "truncated_normal_f64": lambda r, n, k: r.truncated_normal(k, -0.5, 1.5, (3,)),
    "gumbel_f64": lambda r, n, k: r.gumbel(k, (3,)),
    "categorical_f64": lambda r, n, k: r.categorical(k, n.array([0.1, 2., -1.]), shape=(4,)),
    "permutation": lambda r, n, k: r.permutation(k, 6),
    "choice": lambda r, n, k: r.choice(k, 7, (4,)),
}


@pytest.mark.parametrize("name", list(X64_SAMPLERS))
def test_sampler_matches_jax_x64(name):
    sample = X64_SAMPLERS[name]
    with x64(True):
        for seed in (0, 2**40 + 3):
            assert_bits_equal(sample(jr, jaxprc.numpy, jr.key(seed)),
                              sample(jax.random, jjnp, jax.random.key(seed)))


def test_under_jit_and_vmap():
    with x64(False):
        f = lambda r, k: (r.normal(k, (3,)), r.uniform(r.fold_in(k, 3), (2,)), r.randint(k, (2,), 0, 9))
        for seed in (0, 5):
            ours = jaxprc.jit(lambda k: f(jr, k))(jr.key(seed))
            theirs = jax.jit(lambda k: f(jax.random, k))(jax.random.key(seed))
            for o, t in zip(ours, theirs):
                assert_bits_equal(o, t)
        keys, jkeys = jr.split(jr.key(1), 4), jax.random.split(jax.random.key(1), 4)
        ours = jaxprc.vmap(lambda k: f(jr, k))(keys)
        theirs = jax.vmap(lambda k: f(jax.random, k))(jkeys)
        for o, t in zip(ours, theirs):
            assert_bits_equal(o, t)
        # vmap over seeds and over fold_in data
        assert_bits_equal(jaxprc.vmap(jr.PRNGKey)(jaxprc.numpy.arange(3)), jax.vmap(jax.random.PRNGKey)(jjnp.arange(3)))
        assert_bits_equal(jr.key_data(jaxprc.vmap(lambda d: jr.fold_in(jr.key(2), d))(jaxprc.numpy.arange(3))),
                          jax.random.key_data(jax.vmap(lambda d: jax.random.fold_in(jax.random.key(2), d))(jjnp.arange(3))))


def test_grad_of_sampler_matches_jax():
    with x64(False):
        def f(r, lo, scale):
            k = r.key(3)
            return (r.uniform(k, (4,), minval=lo, maxval=2.0).sum() * scale
                    + (scale * r.normal(r.fold_in(k, 1), (3,))).sum())
        ours = jaxprc.grad(lambda lo, s: f(jr, lo, s), argnums=(0, 1))(0.5, 1.5)
        theirs = jax.grad(lambda lo, s: f(jax.random, lo, s), argnums=(0, 1))(0.5, 1.5)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)
