"""jaxprc.random and jaxprc.tree without JAX: known answers, shapes, statistics, transformations.

Oracles: the Threefry-2x32 known-answer vectors of Random123 (the cipher's
reference), a few values recorded from jax.random (the bit-exact tables
against JAX itself are in tests_oracle/test_random_oracle.py), distribution
statistics, and algebraic identities (jit/vmap agree with eager; derivatives
of uniform w.r.t. its bounds are 1-u and u).
"""
import math

import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
import jaxprc.random as jr
import jaxprc.tree as jt

N = 10_000


@pytest.fixture(scope="module")
def key():
    return jr.key(0)


def bits_of(x):
    x = np.asarray(x)
    return np.ascontiguousarray(x).view(np.uint8)


# ------------------------------------------------------------ known answers

def test_threefry_known_answers():
    # Random123's known-answer tests for threefry2x32 with 20 rounds.
    k1 = np.array([0, 0xFFFFFFFF, 0x13198A2E], np.uint32)
    k2 = np.array([0, 0xFFFFFFFF, 0x03707344], np.uint32)
    x1 = np.array([0, 0xFFFFFFFF, 0x243F6A88], np.uint32)
    x2 = np.array([0, 0xFFFFFFFF, 0x85A308D3], np.uint32)
    y1, y2 = jaxprc.jit(jr.threefry2x32)(k1, k2, x1, x2)
    np.testing.assert_array_equal(np.asarray(y1), np.array([0x6B200159, 0x1CB996FC, 0xC4923A9C], np.uint32))
    np.testing.assert_array_equal(np.asarray(y2), np.array([0x99BA4EFE, 0xBB002BE7, 0x483DF7A0], np.uint32))


def test_values_recorded_from_jax(key):
    np.testing.assert_array_equal(np.asarray(jr.PRNGKey(42)), np.array([0, 42], np.uint32))
    np.testing.assert_array_equal(np.asarray(jr.PRNGKey(-1)), np.array([0, 2**32 - 1], np.uint32))
    np.testing.assert_array_equal(np.asarray(jr.split(jr.PRNGKey(0))),
                                  np.array([[1797259609, 2579123966], [928981903, 3453687069]], np.uint32))
    np.testing.assert_array_equal(np.asarray(jr.fold_in(jr.PRNGKey(0), 7)),
                                  np.array([2716826189, 292468403], np.uint32))
    expected = np.array([1.6226422, 2.0252647, -0.43359444], np.float32)
    np.testing.assert_array_equal(bits_of(jr.normal(key, (3,))), bits_of(expected))


# ------------------------------------------------------------ keys

def test_typed_keys(key):
    assert key.shape == () and key.ndim == 0 and str(key.dtype) == "key<fry>"
    data = jr.key_data(key)
    assert data.shape == (2,) and data.dtype == np.uint32
    keys = jr.split(key, 3)
    assert isinstance(keys, jr.PRNGKeyArray) and keys.shape == (3,) and len(keys) == 3
    a, b, c = keys
    np.testing.assert_array_equal(np.asarray(jr.key_data(b)), np.asarray(jr.key_data(keys)[1]))
    np.testing.assert_array_equal(np.asarray(jr.key_data(keys[1:])), np.asarray(jr.key_data(keys))[1:])
    rewrapped = jr.wrap_key_data(jr.key_data(keys))
    assert bool(jnp.all(rewrapped == keys))
    assert jr.split(key, (2, 3)).shape == (2, 3)
    assert "key<fry>" in repr(key)


def test_raw_and_typed_keys_agree(key):
    raw = jr.PRNGKey(0)
    np.testing.assert_array_equal(np.asarray(jr.key_data(key)), np.asarray(raw))
    np.testing.assert_array_equal(np.asarray(jr.split(raw)), np.asarray(jr.key_data(jr.split(key))))
    np.testing.assert_array_equal(np.asarray(jr.normal(raw, (3,))), np.asarray(jr.normal(key, (3,))))
    assert not isinstance(jr.split(raw), jr.PRNGKeyArray)


def test_split_and_fold_in_give_distinct_keys(key):
    data = np.asarray(jr.key_data(jr.split(key, 8)))
    everything = np.concatenate([data, np.asarray(jr.key_data(key))[None]])
    assert len({tuple(row) for row in everything}) == len(everything)
    folded = np.stack([np.asarray(jr.key_data(jr.fold_in(key, i))) for i in range(3)])
    assert len({tuple(row) for row in folded}) == 3
    # partitionable threefry: both hash the counter (0, i) under the key, so they coincide (as in JAX)
    np.testing.assert_array_equal(folded, data[:3])
    # streams from different subkeys are unrelated
    a, b = jr.split(key)
    ua, ub = np.asarray(jr.uniform(a, (3,))), np.asarray(jr.uniform(b, (3,)))
    assert not np.any(ua == ub)


def test_determinism(key):
    np.testing.assert_array_equal(np.asarray(jr.uniform(key, (3,))), np.asarray(jr.uniform(jr.key(0), (3,))))
    assert not np.array_equal(np.asarray(jr.uniform(key, (3,))), np.asarray(jr.uniform(jr.key(1), (3,))))


def test_key_errors(key):
    with pytest.raises(ValueError, match="single key"):
        jr.normal(jr.split(key), (2,))
    with pytest.raises(TypeError, match="PRNG key"):
        jr.normal(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="scalar seed"):
        jr.key(np.arange(2))
    with pytest.raises(ValueError, match="float dtype"):
        jr.uniform(key, (2,), np.int32)


# ------------------------------------------------------------ shapes and dtypes

SHAPES_AND_DTYPES = [
    (lambda k: jr.bits(k, (2, 3)), (2, 3), np.uint32),
    (lambda k: jr.bits(k, (4,), np.uint8), (4,), np.uint8),
    (lambda k: jr.uniform(k, (2, 3)), (2, 3), np.float32),
    (lambda k: jr.uniform(k, (4,), jnp.bfloat16), (4,), ml_dtypes.bfloat16),
    (lambda k: jr.normal(k), (), np.float32),
    (lambda k: jr.normal(k, (4,), np.float16), (4,), np.float16),
    (lambda k: jr.bernoulli(k, 0.5, (2, 3)), (2, 3), np.bool_),
    (lambda k: jr.bernoulli(k, np.array([0.1, 0.9], np.float32)), (2,), np.bool_),
    (lambda k: jr.randint(k, (2, 3), 0, 5), (2, 3), np.int32),
    (lambda k: jr.randint(k, (4,), 0, 256, np.uint8), (4,), np.uint8),
    (lambda k: jr.categorical(k, np.zeros((2, 5), np.float32)), (2,), np.int32),
    (lambda k: jr.categorical(k, np.zeros((2, 5), np.float32), axis=0, shape=(3, 5)), (3, 5), np.int32),
    (lambda k: jr.permutation(k, 5), (5,), np.int32),
    (lambda k: jr.choice(k, 5, (2, 2)), (2, 2), np.int32),
    (lambda k: jr.choice(k, np.arange(6.0, dtype=np.float32).reshape(2, 3), (4,), axis=1), (2, 4), np.float32),
    (lambda k: jr.truncated_normal(k, -1.0, 1.0, (3,)), (3,), np.float32),
    (lambda k: jr.truncated_normal(k, np.zeros(2, np.float32), 1.0), (2,), np.float32),
    (lambda k: jr.gumbel(k, (2, 2)), (2, 2), np.float32),
]


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("case", range(len(SHAPES_AND_DTYPES)))
def test_shapes_and_dtypes(key, case):
    sample, shape, dtype = SHAPES_AND_DTYPES[case]
    out = sample(key)
    assert out.shape == shape and out.dtype == np.dtype(dtype), (out.shape, out.dtype)


# ------------------------------------------------------------ statistics

def test_normal_statistics(key):
    x = np.asarray(jr.normal(key, (N,)), np.float64)
    assert abs(x.mean()) < 4 / math.sqrt(N)
    assert abs(x.std() - 1) < 0.03
    assert abs(np.mean(np.abs(x) < 1) - 0.6827) < 0.02


def test_uniform_statistics(key):
    u = np.asarray(jr.uniform(key, (N,), minval=-1.0, maxval=3.0), np.float64)
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(u.mean() - 1.0) < 0.05 and abs(u.var() - 16 / 12) < 0.05


def test_discrete_samplers(key):
    k1, k2, k3, k4 = jr.split(key, 4)
    b = np.asarray(jr.bernoulli(k1, 0.3, (N,)))
    assert abs(b.mean() - 0.3) < 0.02
    r = np.asarray(jr.randint(k2, (N,), -3, 4))
    assert r.min() == -3 and r.max() == 3 and abs(r.mean()) < 0.1
    logits = np.log(np.array([0.2, 0.5, 0.3], np.float32))
    c = np.asarray(jr.categorical(k3, logits, shape=(N,)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / N, [0.2, 0.5, 0.3], atol=0.02)
    g = np.asarray(jr.gumbel(k4, (N,)), np.float64)
    assert abs(g.mean() - np.euler_gamma) < 0.05


def test_permutation_and_choice(key):
    p = np.asarray(jr.permutation(key, 5))
    assert sorted(p) == list(range(5))
    x = np.arange(12).reshape(4, 3)
    rows = np.asarray(jr.permutation(key, jnp.asarray(x)))
    assert sorted(map(tuple, rows)) == sorted(map(tuple, x))
    c = np.asarray(jr.choice(key, 8, (5,), replace=False))
    assert len(set(c.tolist())) == 5 and c.min() >= 0 and c.max() < 8
    pc = np.asarray(jr.choice(key, 4, (6,), p=np.array([0, 0.5, 0.5, 0], np.float32)))
    assert set(pc.tolist()) <= {1, 2}


def test_truncated_normal_bounds(key):
    t = np.asarray(jr.truncated_normal(key, -0.5, 0.25, (N,)))
    assert t.min() > -0.5 and t.max() < 0.25


# ------------------------------------------------------------ transformations

def test_jit_matches_eager(key):
    f = jaxprc.jit(lambda k: (jr.normal(k, (3,)), jr.randint(jr.fold_in(k, 2), (2, 3), 0, 5)))
    n, r = f(key)
    np.testing.assert_array_equal(np.asarray(n), np.asarray(jr.normal(key, (3,))))
    np.testing.assert_array_equal(np.asarray(r), np.asarray(jr.randint(jr.fold_in(key, 2), (2, 3), 0, 5)))
    # keys pass through jit as pytrees
    keys = jaxprc.jit(lambda k: jr.split(k, 3))(key)
    assert isinstance(keys, jr.PRNGKeyArray) and keys.shape == (3,)
    np.testing.assert_array_equal(np.asarray(jr.key_data(keys)), np.asarray(jr.key_data(jr.split(key, 3))))


def test_vmap_over_keys(key):
    keys = jr.split(key, 4)
    batched = np.asarray(jaxprc.vmap(lambda k: jr.normal(k, (3,)))(keys))
    looped = np.stack([np.asarray(jr.normal(k, (3,))) for k in keys])
    np.testing.assert_array_equal(batched, looped)
    raw = jr.key_data(keys)
    np.testing.assert_array_equal(np.asarray(jaxprc.vmap(lambda k: jr.normal(k, (3,)))(raw)), looped)
    subkeys = jaxprc.vmap(jr.split)(keys)
    assert subkeys.shape == (4, 2)
    np.testing.assert_array_equal(np.asarray(jr.key_data(subkeys[2])), np.asarray(jr.key_data(jr.split(keys[2]))))


def test_vmap_over_seeds_and_fold_in_data():
    seeds = jnp.arange(3)
    np.testing.assert_array_equal(np.asarray(jaxprc.vmap(jr.PRNGKey)(seeds)),
                                  np.stack([np.asarray(jr.PRNGKey(i)) for i in range(3)]))
    folded = jaxprc.vmap(lambda d: jr.fold_in(jr.PRNGKey(5), d))(seeds)
    np.testing.assert_array_equal(np.asarray(folded), np.stack([np.asarray(jr.fold_in(jr.PRNGKey(5), i))
                                                               for i in range(3)]))


def test_grad_through_samplers(key):
    u = np.asarray(jr.uniform(key, (5,)), np.float64)
    d_lo, d_hi = jaxprc.grad(lambda lo, hi: jr.uniform(key, (5,), minval=lo, maxval=hi).sum(),
                             argnums=(0, 1))(-1.0, 3.0)
    np.testing.assert_allclose(float(d_lo), np.sum(1 - u), rtol=1e-5)
    np.testing.assert_allclose(float(d_hi), np.sum(u), rtol=1e-5)
    z = np.asarray(jr.normal(key, (3,)), np.float64)
    d_scale = jaxprc.grad(lambda s: (s * jr.normal(key, (3,)) ** 2).sum())(2.0)
    np.testing.assert_allclose(float(d_scale), np.sum(z ** 2), rtol=1e-5)
    # under jit and vmap too
    per_bound = jaxprc.vmap(jaxprc.grad(lambda lo: jr.uniform(key, (5,), minval=lo, maxval=3.0).sum()))(
        jnp.array([-1.0, 0.0], dtype=np.float32))
    np.testing.assert_allclose(np.asarray(per_bound), [np.sum(1 - u)] * 2, rtol=1e-5)


def test_x64_dtypes(key):
    old = jaxprc.config.jax_enable_x64
    jaxprc.config.update("jax_enable_x64", True)
    try:
        assert jr.uniform(key, (2,)).dtype == np.float64
        assert jr.bits(key, (2,)).dtype == np.uint64
        assert jr.randint(key, (2,), 0, 2**40).dtype == np.int64
    finally:
        jaxprc.config.update("jax_enable_x64", old)


# ------------------------------------------------------------ jaxprc.tree

def test_tree_functions():
    tree = {"a": (1, 2), "b": [3, {"c": 4}]}
    leaves, treedef = jt.flatten(tree)
    assert leaves == [1, 2, 3, 4] and jt.leaves(tree) == leaves
    assert jt.structure(tree) == treedef and jt.unflatten(treedef, leaves) == tree
    assert jt.map(lambda x, y: x * y, tree, tree) == {"a": (1, 4), "b": [9, {"c": 16}]}
    assert jt.reduce(lambda a, b: a + b, tree) == 10 and jt.reduce(lambda a, b: a + b, tree, 5) == 15
    assert jt.all(tree) and not jt.all({"x": 0, "y": 1})
    paths = [jaxprc.tree_util.keystr(p) for p, _ in jt.leaves_with_path(tree)]
    assert paths == ["['a'][0]", "['a'][1]", "['b'][0]", "['b'][1]['c']"]
    assert jt.map_with_path(lambda p, x: len(p), tree) == {"a": (2, 2), "b": [2, {"c": 3}]}
    outer, inner = jt.structure([0, 0, 0]), jt.structure((0, 0))
    assert jt.transpose(outer, inner, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    assert jt.transpose(outer, None, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    assert jt.map(lambda x: x, None) is None
    # typed keys are pytrees of their key data
    assert len(jt.leaves(jr.key(1))) == 1
