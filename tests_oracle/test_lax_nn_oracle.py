"""jaxprc's additions to lax, nn, ops, flatten_util and dtypes against JAX: values, dtypes and weak
types, gradients (under jit), on edges (kinks, infinities, masked rows, out-of-range ids)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import jaxprc
import jaxprc.numpy as xnp
from jaxprc import lax as xlax

RNG = np.random.default_rng(11)


def _leaves(x):
    return jax.tree_util.tree_leaves(x)


def check(jax_fn, our_fn, *args, grad=True, tol=1e-5, weak=True, jit=True):
    """Values, dtypes (and weak types) of both under jit (one compilation each, not one per op);
    gradients of the summed float outputs under jit."""
    a, b = (jax.jit(jax_fn)(*args), jaxprc.jit(our_fn)(*args)) if jit else (jax_fn(*args), our_fn(*args))
    for u, v in zip(_leaves(a), jaxprc.tree_util.tree_leaves(b), strict=True):
        u, v_np = np.asarray(u), np.asarray(v)
        assert u.dtype == v_np.dtype, (u.dtype, v_np.dtype)
        assert u.shape == v_np.shape, (u.shape, v_np.shape)
        if u.dtype == ml_dtypes.bfloat16:
            u, v_np = u.astype(np.float32), v_np.astype(np.float32)
        np.testing.assert_allclose(v_np, u, rtol=tol, atol=tol, equal_nan=True)
    if weak:
        wa = [getattr(x, "weak_type", False) for x in _leaves(a)]
        wb = [jaxprc.core.get_aval(x).weak_type for x in jaxprc.tree_util.tree_leaves(b)]
        assert wa == wb
    if grad:
        def total(lib_np, fn):
            return lambda *xs: sum(lib_np.sum(y.astype(np.float32)) for y in _tree_leaves_of(fn(*xs))
                                   if np.issubdtype(np.asarray(y).dtype if not hasattr(y, "aval") else y.dtype,
                                                    np.inexact) or str(y.dtype) == "bfloat16")
        argnums = tuple(i for i, x in enumerate(args) if np.issubdtype(np.asarray(x).dtype, np.floating))
        ga = jax.jit(jax.grad(total(jnp, jax_fn), argnums))(*args)
        gb = jaxprc.jit(jaxprc.grad(total(xnp, our_fn), argnums))(*args)
        for u, v in zip(ga, gb, strict=True):
            np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=10 * tol, atol=10 * tol, equal_nan=True)


def _tree_leaves_of(x):
    return jax.tree_util.tree_leaves(x) if not isinstance(x, (list, tuple)) else [
        y for z in x for y in _tree_leaves_of(z)]


# ------------------------------------------------------------------- jax.nn

X = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], np.float32)
M = RNG.normal(size=(3, 4)).astype(np.float32)
W = np.array([[1, 1, 0, 1], [0, 1, 1, 0], [1, 0, 1, 1]], bool)   # >= 2 per row: a well-posed variance


@pytest.mark.parametrize("name", ["mish", "squareplus", "sparse_plus", "sparse_sigmoid", "identity", "tanh"])
def test_nn_elementwise(name):
    check(getattr(jax.nn, name), getattr(jaxprc.nn, name), X)


def test_nn_log1mexp_glu_logmeanexp():
    check(jax.nn.log1mexp, jaxprc.nn.log1mexp, np.array([1e-3, 0.5, np.log(2), 1.0, 30.0], np.float32))
    check(jax.nn.glu, jaxprc.nn.glu, M)
    check(lambda x: jax.nn.glu(x, 0), lambda x: jaxprc.nn.glu(x, 0), M[:2])
    check(lambda x: jax.nn.logmeanexp(x, axis=1), lambda x: jaxprc.nn.logmeanexp(x, axis=1), M)
    check(lambda x: jax.nn.logmeanexp(x), lambda x: jaxprc.nn.logmeanexp(x), M)
    check(lambda x: jax.nn.logmeanexp(x, axis=1, where=W, keepdims=True),
          lambda x: jaxprc.nn.logmeanexp(x, axis=1, where=W, keepdims=True), M)


@pytest.mark.parametrize("kw", [{}, {"where": W}, {"axis": 0, "algorithm": "stable"}, {"axis": (0, 1)}])
def test_nn_standardize(kw):
    check(lambda x: jax.nn.standardize(x, **kw), lambda x: jaxprc.nn.standardize(x, **kw), M)


B, T, S, N, K, H = 2, 3, 4, 4, 2, 5
Q = RNG.normal(size=(B, T, N, H)).astype(np.float32)
KK = RNG.normal(size=(B, S, K, H)).astype(np.float32)
V = RNG.normal(size=(B, S, K, H)).astype(np.float32)
BIAS = RNG.normal(size=(B, N, T, S)).astype(np.float32)
MASK = RNG.random((B, 1, T, S)) > 0.3
MASK[0, 0, 1] = False                       # a fully masked row: the mean of the values, as in JAX


@pytest.mark.parametrize("kw", [
    {"bias": BIAS, "mask": MASK}, {"local_window_size": (2, 0), "is_causal": True, "bias": BIAS[:, :1]},
    {"query_seq_lengths": np.array([2, 3], np.int32), "key_value_seq_lengths": np.array([4, 1], np.int32),
     "local_window_size": 1, "scale": 0.3}])
def test_dot_product_attention(kw):
    check(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, **kw),
          lambda q, k, v: jaxprc.nn.dot_product_attention(q, k, v, **kw), Q, KK, V)


def test_dot_product_attention_rank3_residual_bf16():
    check(lambda q, k, v: jax.nn.dot_product_attention(q[0], k[0], v[0]),
          lambda q, k, v: jaxprc.nn.dot_product_attention(q[0], k[0], v[0]), Q, KK, V)
    check(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True),
          lambda q, k, v: jaxprc.nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True),
          Q, KK, V)
    bf = [x.astype(ml_dtypes.bfloat16) for x in (Q, KK, V)]
    check(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
          lambda q, k, v: jaxprc.nn.dot_product_attention(q, k, v, is_causal=True), *bf, grad=False, tol=2e-2)


# ----------------------------------------------------------- ops, flatten_util

@pytest.mark.parametrize("name", ["segment_sum", "segment_prod", "segment_max", "segment_min"])
@pytest.mark.parametrize("kw", [{"num_segments": 5}, {"num_segments": 5, "bucket_size": 3},
                                {"num_segments": 5, "mode": "clip"}])
def test_segment_ops(name, kw):
    data = RNG.normal(size=(7, 2)).astype(np.float32)
    ids = np.array([0, 2, 2, 0, 4, 9, -1], np.int32)
    if kw.get("mode") == "clip":
        ids = np.clip(ids, 0, 4)     # JAX's clip mode on out-of-range ids differs only in its cotangent
    check(lambda d: getattr(jax.ops, name)(d, ids, **kw), lambda d: getattr(jaxprc.ops, name)(d, ids, **kw),
          data, grad=name != "segment_prod")       # JAX has no gradient of scatter_mul with repeated ids


def test_segment_ops_int_and_inferred_count():
    data = np.array([3, -1, 4, 1, 5], np.int32)
    ids = np.array([1, 1, 3, 0, 3], np.int32)
    for name in ["segment_sum", "segment_prod", "segment_max", "segment_min"]:
        check(lambda d: getattr(jax.ops, name)(d, ids), lambda d: getattr(jaxprc.ops, name)(d, ids), data,
              grad=False, jit=False)


def test_ravel_pytree():
    from jax.flatten_util import ravel_pytree as jrp
    from jaxprc.flatten_util import ravel_pytree as xrp
    tree = {"w": M, "b": (np.arange(3, dtype=np.int32), np.float32(2.0)), "h": np.ones(2, np.float16)}
    fa, ua = jrp(tree)
    fb, ub = xrp(tree)
    check(lambda: fa, lambda: fb, grad=False)
    check(lambda: ua(fa), lambda: ub(fb), grad=False)
    check(lambda: jrp([])[0], lambda: xrp([])[0], grad=False)


def test_dtypes_names():
    for x in [np.bool_, np.int8, ml_dtypes.bfloat16, np.complex64, np.float64]:
        assert jax.dtypes.itemsize_bits(x) == jaxprc.dtypes.itemsize_bits(x)
    for x in [1, 1.0, True, 1j, np.int64(1), np.ones(2, np.float16)]:
        assert jax.dtypes.scalar_type_of(x) is jaxprc.dtypes.scalar_type_of(x)
        assert jlax.dtype(x) == xlax.dtype(x)
