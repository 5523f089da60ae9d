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
          lambda q, k, v: jaxprc.nn.dot_product_attention(q, k, v, **kw), Q, KK, V,
          grad="bias" in kw and "mask" in kw)     # gradients once: the masked, biased case


def test_dot_product_attention_rank3_residual_bf16():
    check(lambda q, k, v: jax.nn.dot_product_attention(q[0], k[0], v[0], is_causal=True, return_residual=True),
          lambda q, k, v: jaxprc.nn.dot_product_attention(q[0], k[0], v[0], is_causal=True, return_residual=True),
          Q, KK, V, grad=False)
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


# ------------------------------------------------------------------- jax.lax

TK = np.array([[1.0, 3.0, -0.0, 0.0, 3.0, -np.inf], [2.0, -1.0, 5.0, 5.0, 0.5, 4.0]], np.float32)
SEQ = RNG.normal(size=(9, 2)).astype(np.float32)
AA = RNG.uniform(0.5, 1.0, size=(2, 7)).astype(np.float32)


def _both(name):
    return (lambda *a, **k: getattr(jlax, name)(*a, **k)), (lambda *a, **k: getattr(xlax, name)(*a, **k))


@pytest.mark.parametrize("case", ["top_k", "top_k_axis0", "top_k_int", "approx_max_k", "approx_min_k"])
def test_top_k_family(case):
    f = {"top_k": lambda L, x: L.top_k(x, 3), "top_k_axis0": lambda L, x: L.top_k(x, 1, axis=0),
         "top_k_int": lambda L, x: L.top_k(x.astype(np.int32), 2),
         "approx_max_k": lambda L, x: L.approx_max_k(x, 2),
         "approx_min_k": lambda L, x: L.approx_min_k(x, 2, reduction_dimension=0)}[case]
    check(lambda x: f(jlax, x), lambda x: f(xlax, x), TK if case != "approx_min_k" else TK[:, :5],
          grad=case != "top_k_int")


def test_associative_scan_and_reduce():
    check(lambda x: jlax.associative_scan(jnp.add, x), lambda x: xlax.associative_scan(xnp.add, x), SEQ,
          tol=1e-5)
    check(lambda x: jlax.associative_scan(jnp.multiply, x, reverse=True, axis=1),
          lambda x: xlax.associative_scan(xnp.multiply, x, reverse=True, axis=1), AA)
    rec = lambda L: lambda a, b: L.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b), axis=1)  # noqa
    check(rec(jlax), rec(xlax), AA, AA * 2 - 1)

    def argmax_pair(L):
        def comb(a, b):
            take = L.gt(b[0], a[0])
            return L.select(take, b[0], a[0]), L.select(take, b[1], a[1])
        return lambda x: L.reduce((x, L.broadcasted_iota(np.int32, x.shape, 1)), (np.float32(-np.inf), np.int32(0)),
                                  comb, (1,))
    check(argmax_pair(jlax), argmax_pair(xlax), TK, grad=False)
    poly = lambda L: lambda x: L.reduce(x, np.float32(0), lambda u, v: u + v + u * v, (0,))  # noqa: E731
    check(poly(jlax), poly(xlax), AA - 0.5)
    check(lambda x: jlax.reduce(x, 0.0, jlax.add, (0, 1)), lambda x: xlax.reduce(x, 0.0, xlax.add, (0, 1)), AA)


def test_number_formats_and_barrier():
    x = np.array([1.0001, 65520.0, 1e-8, -3.3, np.nan, np.inf], np.float32)
    check(lambda v: jlax.reduce_precision(v, 5, 10), lambda v: xlax.reduce_precision(v, 5, 10), x)
    check(lambda v: jlax.reduce_precision(v * 3, 8, 2), lambda v: xlax.reduce_precision(v * 3, 8, 2), AA)
    for dtype in (np.int32, np.uint32, np.int8, np.uint16):
        info = np.iinfo(dtype)
        a = RNG.integers(info.min, info.max, 12, endpoint=True).astype(dtype)
        b = RNG.integers(info.min, info.max, 12, endpoint=True).astype(dtype)
        check(jlax.mulhi, xlax.mulhi, a, b, grad=False)
    check(lambda v: jlax.optimization_barrier((jnp.sin(v), v * 2)),
          lambda v: xlax.optimization_barrier((xnp.sin(v), v * 2)), AA)


@pytest.mark.parametrize("alg,dtype", [(0, np.uint8), (1, np.uint32), (2, np.uint16)])
def test_rng_bit_generator_bits(alg, dtype):
    key = np.array([7, 0, 3, 11], np.uint32)
    check(lambda k: jlax.rng_bit_generator(k, (3, 4), dtype, jlax.RandomAlgorithm(alg)),
          lambda k: xlax.rng_bit_generator(k, (3, 4), dtype, xlax.RandomAlgorithm(alg)), key, grad=False)


def test_lax_conveniences():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    check(lambda v: jlax.split(v, (1, 3), axis=2), lambda v: xlax.split(v, (1, 3), axis=2), x)
    check(lambda v: jlax.stack([v, v * 2], axis=1), lambda v: xlax.stack([v, v * 2], axis=1), x)
    check(lambda v: jlax.unstack(v, axis=2), lambda v: xlax.unstack(v, axis=2), x)
    check(lambda v: jlax.tile(v, (2, 1, 3)), lambda v: xlax.tile(v, (2, 1, 3)), x)
    check(lambda v: jlax.broadcast_like(v[0, 0], v), lambda v: xlax.broadcast_like(v[0, 0], v), x)
    check(lambda v: jlax.batch_matmul(v, jnp.swapaxes(v, 1, 2), precision="highest"),
          lambda v: xlax.batch_matmul(v, xnp.swapaxes(v, 1, 2), precision="highest"), x)
    check(jlax.reciprocal, xlax.reciprocal, x)
    check(lambda: jlax.reciprocal(4.0), lambda: xlax.reciprocal(4.0), grad=False)
    idx = (np.array([0, -1, 1]), np.array([3, 0, -2]))
    check(lambda v: jlax.index_take(v, idx, (0, 2)), lambda v: xlax.index_take(v, idx, (0, 2)), x)
    assert jlax.broadcast_shapes((2, 1), (3,), (1, 1, 1)) == xlax.broadcast_shapes((2, 1), (3,), (1, 1, 1))


def test_binary_op_broadcasting_conj_out_dtype():
    a, b = SEQ[:3, :1], SEQ[:1, :].T.reshape(1, 2)
    check(jlax.add, xlax.add, a, b)
    check(jlax.mul, xlax.mul, a, b)
    check(lambda v: jlax.real(jlax.conj(v)) * 2, lambda v: xlax.real(xlax.conj(v)) * 2, AA)
    check(lambda v: jlax.conj(v), lambda v: xlax.conj(v), AA, grad=False)
    i8 = np.array([100, -100, 7], np.int8)
    check(lambda u: jlax.mul(u, u, out_dtype=np.int32), lambda u: xlax.mul(u, u, out_dtype=np.int32), i8,
          grad=False)


def test_scatter_sub_apply_ragged_dot():
    dn = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
              operand_batching_dims=(), scatter_indices_batching_dims=())
    idx = np.array([[1], [3], [3], [7]])
    x = np.arange(5, dtype=np.float32)
    check(lambda v, u: jlax.scatter_sub(v, idx, u, jlax.ScatterDimensionNumbers(**dn)),
          lambda v, u: xlax.scatter_sub(v, idx, u, xlax.ScatterDimensionNumbers(**dn)), x, np.ones(4, np.float32))
    check(lambda v: jlax.scatter_apply(v, idx, lambda t: t * 2 + 1, jlax.ScatterDimensionNumbers(**dn),
                                       update_shape=(4,)),
          lambda v: xlax.scatter_apply(v, idx, lambda t: t * 2 + 1, xlax.ScatterDimensionNumbers(**dn),
                                       update_shape=(4,)), x, grad=False)
    lhs = RNG.normal(size=(7, 3)).astype(np.float32)
    rhs = RNG.normal(size=(3, 3, 2)).astype(np.float32)
    gs = np.array([2, 0, 4], np.int32)
    check(lambda l, r: jlax.ragged_dot(l, r, gs), lambda l, r: xlax.ragged_dot(l, r, gs), lhs, rhs)
    l2, r2 = RNG.normal(size=(2, 6)).astype(np.float32), RNG.normal(size=(6, 3)).astype(np.float32)
    dn2 = ((([1], [0]), ([], [])), [1], [])
    check(lambda l, r: jlax.ragged_dot_general(l, r, np.array([1, 3, 1], np.int32),
                                               jlax.RaggedDotDimensionNumbers(*dn2)),
          lambda l, r: xlax.ragged_dot_general(l, r, np.array([1, 3, 1], np.int32),
                                               xlax.RaggedDotDimensionNumbers(*dn2)), l2, r2,
          grad=False)       # JAX has no gradient in the ragged-contracting mode


def test_composite_platform_dependent():
    fj = jlax.composite(lambda v, *, k: jnp.sin(v) * k, name="my.sin")
    fx = xlax.composite(lambda v, *, k: xnp.sin(v) * k, name="my.sin")
    check(lambda v: fj(v, k=2.0), lambda v: fx(v, k=2.0), AA, grad=False)
    check(lambda v: jlax.platform_dependent(v, cpu=lambda t: t * 10, default=lambda t: t),
          lambda v: xlax.platform_dependent(v, cpu=lambda t: t * 10, default=lambda t: t), AA)


@pytest.mark.parametrize("preset", ["DEFAULT", "F16_F16_F16", "F32_F32_F32", "BF16_BF16_F32", "BF16_BF16_F32_X3",
                                    "BF16_BF16_F32_X6"])
def test_dot_algorithm_presets(preset):
    a, b = M, M.T * 3
    check(lambda u, v: jnp.dot(u, v, precision=getattr(jlax.DotAlgorithmPreset, preset)),
          lambda u, v: xnp.dot(u, v, precision=getattr(xlax.DotAlgorithmPreset, preset)), a, b, tol=1e-6)
    bf = a.astype(ml_dtypes.bfloat16)
    check(lambda u: jnp.dot(u, u.T, precision=jlax.DotAlgorithmPreset.BF16_BF16_F32),
          lambda u: xnp.dot(u, u.T, precision=xlax.DotAlgorithmPreset.BF16_BF16_F32), bf, grad=False)


@pytest.mark.x64
def test_x64_lax_additions():
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        a = RNG.integers(info.min, info.max, 16, endpoint=True, dtype=dtype)
        b = RNG.integers(info.min, info.max, 16, endpoint=True, dtype=dtype)
        check(jlax.mulhi, xlax.mulhi, a, b, grad=False)
    x = RNG.normal(size=(3, 5)) * 1e3
    check(lambda v: jlax.reduce_precision(v, 8, 23), lambda v: xlax.reduce_precision(v, 8, 23), x)
    check(lambda v: jlax.top_k(v, 2), lambda v: xlax.top_k(v, 2), x)
    check(lambda k: jlax.rng_bit_generator(k, (5,), np.uint64), lambda k: xlax.rng_bit_generator(k, (5,), np.uint64),
          np.array([1, 2, 3, 4], np.uint32), grad=False)
    check(lambda v: jax.nn.standardize(v), lambda v: jaxprc.nn.standardize(v), x, tol=1e-12)


def test_scaled_dot():
    a = RNG.normal(size=(2, 4, 64)).astype(np.float32)
    b = RNG.normal(size=(2, 64, 8)).astype(np.float32)
    sa = RNG.uniform(1, 2, size=(2, 4, 2)).astype(np.float32)
    sb = RNG.uniform(1, 2, size=(2, 2, 8)).astype(np.float32)
    check(lambda u, v, s, t: jlax.scaled_dot(u, v, lhs_scale=s, rhs_scale=t),
          lambda u, v, s, t: xlax.scaled_dot(u, v, lhs_scale=s, rhs_scale=t), a, b, sa, sb, grad=False)
    check(lambda u, v: jlax.scaled_dot(u, v, preferred_element_type=np.float32),
          lambda u, v: xlax.scaled_dot(u, v, preferred_element_type=np.float32), a, b, grad=False)
