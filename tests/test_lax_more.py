"""The rest of jax.lax (top_k, reduce, associative_scan, reduce_precision, mulhi, barriers, XLA's
generators, scatter_apply/sub, split/stack/tile, ...) and the top-level utilities: values
against numpy, derivatives against finite differences and transposition identities, vmap against
loops, jit against eager, and the text round trip."""
import warnings

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from roundtrip import assert_round_trip

RNG = np.random.default_rng(3)
F32 = np.float32


def fd_grad(f, x, eps=1e-3):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f((x + e).astype(F32)) - f((x - e).astype(F32))) / (2 * eps)
    return g


# ------------------------------------------------------------------- top_k

def test_top_k_values_ties_nan_axis():
    x = np.array([1.0, np.nan, 3.0, -np.inf, 3.0, -0.0, 0.0], F32)
    v, i = lax.top_k(x, 5)
    np.testing.assert_array_equal(np.asarray(i), [1, 2, 4, 0, 6])    # NaN first, ties in index order
    assert np.isnan(v[0]) and list(np.asarray(v[1:])) == [3, 3, 1, 0]
    m = RNG.normal(size=(4, 6)).astype(F32)
    for axis in (0, 1, -1):
        v, i = jx.jit(lambda a, axis=axis: lax.top_k(a, 3, axis=axis))(m)
        want_i = np.moveaxis(np.argsort(-np.moveaxis(m, axis, -1), axis=-1, kind="stable")[..., :3], -1, axis)
        np.testing.assert_array_equal(i, want_i)
        np.testing.assert_array_equal(v, np.take_along_axis(m, want_i, axis))
    v, i = lax.top_k(np.array([3, 1, 2], np.int32), 0)
    assert v.shape == (0,) and i.dtype == np.int32
    with pytest.raises(ValueError, match="nonnegative"):
        lax.top_k(x, -1)
    with pytest.raises(TypeError, match="no larger than"):
        lax.top_k(x, 8)
    with pytest.raises(TypeError, match="complex"):
        lax.top_k(np.ones(3, np.complex64), 1)


def test_top_k_grad_vmap_and_round_trip():
    m = RNG.normal(size=(3, 5)).astype(F32)
    w = RNG.normal(size=(3, 2)).astype(F32)
    f = lambda a: jnp.sum(lax.top_k(a, 2)[0] * w)      # noqa: E731
    np.testing.assert_allclose(jx.grad(f)(m), fd_grad(lambda a: float(f(a)), m), atol=2e-2)
    batched = jx.vmap(lambda a: lax.top_k(a, 2, axis=0), in_axes=1)(m)
    for j in range(5):
        np.testing.assert_array_equal(batched[1][j], lax.top_k(m[:, j], 2)[1])
    assert_round_trip(jx.make_jaxpr(jx.grad(f))(m))
    v, i = lax.approx_max_k(m, 2)
    np.testing.assert_array_equal(i, lax.top_k(m, 2)[1])
    v, i = lax.approx_min_k(m, 2, reduction_dimension=0)
    np.testing.assert_array_equal(v, np.sort(m, axis=0)[:2])
    assert lax.approx_max_k(np.ones((2, 300), F32), 5, aggregate_to_topk=False)[0].shape == (2, 256)
    with pytest.raises(ValueError, match="floating"):
        lax.approx_max_k(np.ones(3, np.int32), 1)


# ------------------------------------------------------------------- reduce

def test_reduce_monoids_become_reduce_primitives():
    x = RNG.normal(size=(3, 4)).astype(F32)
    for comp, init, prim in [(lax.add, 0.0, "reduce_sum"), (lax.mul, 1.0, "reduce_prod"),
                             (lax.max, -np.inf, "reduce_max"), (lax.min, np.inf, "reduce_min")]:
        cj = jx.make_jaxpr(lambda a: lax.reduce(a, init, comp, (0,)))(x)
        assert [e.primitive.name for e in cj.eqns] == [prim]
    cj = jx.make_jaxpr(lambda a: lax.reduce(a, 1.0, lax.add, (0,)))(x)      # not the identity
    assert [e.primitive.name for e in cj.eqns] == ["reduce"]
    np.testing.assert_allclose(lax.reduce(x, 1.0, lax.add, (0,)), x.sum(0) + 1, rtol=1e-5, atol=1e-6)


def test_reduce_variadic_python_reducer():
    x = RNG.normal(size=(3, 5)).astype(F32)
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), (3, 5))

    def argmax_pair(a, b):
        take_b = lax.gt(b[0], a[0])
        return lax.select(take_b, b[0], a[0]), lax.select(take_b, b[1], a[1])

    f = jx.jit(lambda v, i: lax.reduce((v, i), (np.float32(-np.inf), np.int32(0)), argmax_pair, (1,)))
    vals, where = f(x, idx)
    np.testing.assert_array_equal(where, np.argmax(x, 1))
    np.testing.assert_array_equal(vals, x.max(1))
    cj = jx.make_jaxpr(f)(x, idx)
    assert_round_trip(cj)
    ys = jx.vmap(lambda v, i: f(v, i)[1])(np.stack([x, -x]), np.stack([idx, idx]))
    np.testing.assert_array_equal(ys, [np.argmax(x, 1), np.argmax(-x, 1)])
    with pytest.raises(ValueError, match="same pytree structure"):
        lax.reduce((x, x), 0.0, argmax_pair, (0,))


def test_reduce_generic_grad_against_finite_differences():
    # an associative, commutative reducer with identity 0 that is no monoid primitive: (1+u)(1+v)-1
    x = (RNG.random((2, 3)) * 0.5).astype(F32)
    f = lambda a: jnp.sum(lax.reduce(a, np.float32(0.0), lambda u, v: u + v + u * v, (0, 1)))  # noqa: E731
    np.testing.assert_allclose(f(x), np.prod(1 + x.astype(np.float64)) - 1, rtol=1e-5)
    np.testing.assert_allclose(jx.grad(f)(x), fd_grad(lambda a: float(f(a)), x), rtol=1e-2, atol=1e-3)
    assert_round_trip(jx.make_jaxpr(jx.grad(f))(x))
    assert float(lax.reduce(np.zeros((0, 2), F32), np.float32(5.0), lambda u, v: u * v, (0, 1))) == 5.0


# ------------------------------------------------------------- associative_scan

@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
def test_associative_scan_prefix_sums_and_reverse(n):
    x = RNG.normal(size=(n, 3)).astype(F32)
    np.testing.assert_allclose(lax.associative_scan(jnp.add, x), np.cumsum(x, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lax.associative_scan(jnp.maximum, x, reverse=True),
                               np.maximum.accumulate(x[::-1], 0)[::-1])


def test_associative_scan_pytree_axis_grad():
    a = RNG.uniform(0.5, 1.0, size=(2, 7)).astype(F32)
    b = RNG.normal(size=(2, 7)).astype(F32)

    def linear_recurrence(a, b):          # h_t = a_t h_{t-1} + b_t
        return lax.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b), axis=1)[1]
    h, want = np.zeros(2), []
    for t in range(7):
        h = a[:, t] * h + b[:, t]
        want.append(h)
    np.testing.assert_allclose(linear_recurrence(a, b), np.stack(want, 1), rtol=1e-5, atol=1e-6)
    g = jx.grad(lambda b: jnp.sum(linear_recurrence(a, b)))(b)
    np.testing.assert_allclose(g, fd_grad(lambda v: float(jnp.sum(linear_recurrence(a, v))), b), atol=2e-2)
    assert np.asarray(lax.associative_scan(jnp.logical_or, np.array([0, 1, 0, 0], bool))).tolist() == \
        [False, True, True, True]
    with pytest.raises(TypeError, match="callable"):
        lax.associative_scan(3, a)


# --------------------------------------------------- number formats, barrier, rng

def test_reduce_precision_mulhi():
    x = np.array([1.0001, 65520.0, 1e-8, -3.3, np.nan], F32)
    y = lax.reduce_precision(x, 5, 10)
    np.testing.assert_array_equal(y[:4], [1.0, np.inf, 0.0, np.float32(np.float16(-3.3))])
    assert np.isnan(y[4])
    assert lax.reduce_precision(2.0, 8, 7).aval.weak_type
    # linear: its tangent and cotangent are rounded alike
    assert float(jx.grad(lambda v: lax.reduce_precision(v * 3.0, 5, 2))(1.1)) == 3.0
    with pytest.raises(ValueError, match="exponent_bits must be positive"):
        lax.reduce_precision(x, 0, 3)
    a = RNG.integers(-2**31, 2**31, 20, dtype=np.int64).astype(np.int32)
    b = RNG.integers(-2**31, 2**31, 20, dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(lax.mulhi(a, b), (a.astype(np.int64) * b) >> 32)
    np.testing.assert_array_equal(jx.vmap(lax.mulhi)(a, b), (a.astype(np.int64) * b) >> 32)
    with pytest.raises(TypeError, match="integer"):
        lax.mulhi(np.ones(2, F32), np.ones(2, F32))


def test_optimization_barrier():
    f = lambda x: lax.optimization_barrier((jnp.sin(x), {"a": x * 2}))      # noqa: E731
    out = jx.jit(f)(1.0)
    assert np.isclose(out[0], np.sin(1.0)) and out[1]["a"] == 2.0
    assert np.isclose(jx.grad(lambda x: f(x)[0] + f(x)[1]["a"])(1.0), np.cos(1.0) + 2)
    assert "stablehlo.optimization_barrier" in jx.jit(lambda x: lax.optimization_barrier(jnp.sin(x))).lower(
        1.0).as_text()
    assert_round_trip(jx.make_jaxpr(jx.grad(lambda x: f(x)[0]))(1.0))
    assert lax.optimization_barrier(()) == ()


def test_rng_bit_generator_and_uniform():
    key = np.array([1, 2, 3, 4], np.uint32)
    k1, bits = lax.rng_bit_generator(key, (3,))
    k2, bits2 = jx.jit(lambda k: lax.rng_bit_generator(k, (3,)))(key)
    np.testing.assert_array_equal(bits, bits2)
    np.testing.assert_array_equal(k1, k2)
    assert lax.rng_bit_generator(key, (2, 3), np.uint8, lax.RandomAlgorithm.RNG_THREE_FRY)[1].dtype == np.uint8
    keys = np.stack([key, key + 1])
    # JAX 0.10's batching: the first key draws for the whole batch, and alone advances
    nk, b = jx.vmap(lambda k: lax.rng_bit_generator(k, (3,)))(keys)
    first_key, first_bits = lax.rng_bit_generator(key, (2, 3))
    np.testing.assert_array_equal(b, first_bits)
    np.testing.assert_array_equal(nk, np.stack([first_key, key + 1]))
    with pytest.raises(TypeError, match="unsupported dtype"):
        lax.rng_bit_generator(key, (3,), np.int32)
    u = lax.rng_uniform(2.0, 3.0, (500,))
    assert u.shape == (500,) and 2 <= float(u.min()) and float(u.max()) < 3
    assert jx.vmap(lambda lo: lax.rng_uniform(lo, lo + 1.0, (4,)))(np.array([0.0, 10.0], F32)).shape == (2, 4)


# ------------------------------------------------------------- conveniences

def test_split_stack_unstack_tile_index_take():
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    parts = lax.split(x, (1, 3), axis=2)
    np.testing.assert_array_equal(parts[1], x[:, :, 1:])
    with pytest.raises(ValueError, match="sum to the size"):
        lax.split(x, (1, 1), axis=2)
    np.testing.assert_array_equal(lax.stack([x, x + 1], axis=-1), np.stack([x, x + 1], -1))
    np.testing.assert_array_equal(lax.unstack(x, axis=1)[2], x[:, 2])
    np.testing.assert_array_equal(lax.tile(x, (2, 1, 3)), np.tile(x, (2, 1, 3)))
    np.testing.assert_array_equal(lax.tile(x, (0, 1, 1)), np.tile(x, (0, 1, 1)))
    i, j = np.array([0, -1, 1]), np.array([3, 0, -2])
    np.testing.assert_array_equal(lax.index_take(x, (i, j), (0, 2)), x[i, :, j])
    assert lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    np.testing.assert_array_equal(lax.broadcast_like(np.arange(4), x), np.broadcast_to(np.arange(4), x.shape))
    np.testing.assert_array_equal(lax.batch_matmul(x, np.swapaxes(x, 1, 2)), x @ np.swapaxes(x, 1, 2))
    assert float(lax.reciprocal(4.0)) == 0.25 and lax.empty((2,), np.int32).shape == (2,)
    assert lax.dtype(1.0) == np.float32 and lax.dtype(np.int8(1)) == np.int8


def test_binary_broadcasting_conj_mul_out_dtype():
    a, b = np.arange(3, dtype=F32)[:, None], np.arange(4, dtype=F32)[None]
    np.testing.assert_array_equal(lax.add(a, b), a + b)
    np.testing.assert_array_equal(jx.jit(lax.mul)(a, b), a * b)
    g = jx.grad(lambda u: jnp.sum(lax.mul(u, b)))(a)
    np.testing.assert_array_equal(g, np.full((3, 1), b.sum()))
    with pytest.raises(TypeError):
        lax.add(np.ones(3, F32), np.ones((1, 4), F32))          # ranks still must agree
    c = lax.conj(np.array([1.0, -2.0], F32))
    assert c.dtype == np.complex64
    assert lax.mul(np.array([100], np.int8), np.array([100], np.int8), out_dtype=np.int32).tolist() == [10000]


def test_scatter_sub_and_apply():
    x = np.arange(5, dtype=F32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),
                                     scatter_indices_batching_dims=())
    idx = np.array([[1], [3], [3], [7]])
    np.testing.assert_array_equal(lax.scatter_sub(x, idx, np.ones(4, F32), dn), [0, 0, 2, 1, 4])
    np.testing.assert_array_equal(lax.scatter_apply(x, idx, lambda v: v * 2 + 1, dn, update_shape=(4,)),
                                  [0, 3, 2, 15, 4])          # applied once per hit, as XLA does
    f = lambda v: lax.scatter_apply(v, idx[:2], jnp.sin, dn, update_shape=(2,), unique_indices=True)  # noqa
    np.testing.assert_allclose(jx.grad(lambda v: jnp.sum(f(v)))(x), [1, np.cos(1), 1, np.cos(3), 1], rtol=1e-6)


# --------------------------------------------------------------- top level

def test_top_level_queries_and_transfers():
    assert jx.__version__ and jx.device_count() == jx.local_device_count() == len(jx.local_devices())
    assert jx.process_index() == 0 and jx.process_count() == 1 and jx.process_indices() == [0]
    assert jx.typeof(1.0).weak_type and jx.typeof(jnp.ones(2)).shape == (2,)
    out = jx.device_get({"a": jnp.ones(2), "b": 3})
    assert type(out["a"]) is np.ndarray and out["b"] == 3
    keep = jnp.arange(7.0)
    assert any(a is keep for a in jx.live_arrays())
    f = jx.jit(lambda v: v + 1)
    f(1.0)
    jx.clear_caches()
    assert f._cache_size() == 0 and f(1.0) == 2.0
    assert "jaxlib" in jx.print_environment_info(return_string=True)
    np.testing.assert_allclose(jx.jacobian(lambda v: v ** 2)(jnp.arange(3.0)), np.diag([0.0, 2.0, 4.0]))


def test_named_call_is_a_named_scope():
    # as JAX's: the name reaches the lowered ops' locations; nothing is staged, so Python values
    # (a function, an int used in Python control flow) pass through as they are
    g = jx.named_call(lambda v: jnp.sin(v) * 2, name="my_block")
    assert "my_block" in jx.jit(g).lower(1.0).as_text(debug_info=True)
    assert np.isclose(g(1.0), 2 * np.sin(1.0))
    h = jx.named_call(lambda f, n, v: f(v) if n > 0 else v)
    assert np.isclose(jx.jit(lambda v: h(jnp.cos, 1, v))(1.0), np.cos(1.0))


def test_debug_nans_infs_name_the_primitive():
    with jx.debug_nans():
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            jnp.log(-1.0)
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            jx.jit(lambda v: jnp.sin(v) * 0 + jnp.log(v))(-1.0)
        assert float(jx.jit(jnp.log)(2.0)) == pytest.approx(np.log(2.0))
    with jx.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"\(inf\) encountered in log"):
            jnp.log(0.0)
    assert np.isnan(jnp.log(-1.0))          # off again outside the block


def test_debug_nans_rerun_keeps_donated_arguments_and_enters_checkpoints():
    with jx.debug_nans():
        # the op-by-op rerun of a call that donated its argument still has it
        donating = jx.jit(lambda v: jnp.log(v - 5.), donate_argnums=0)
        with pytest.raises(FloatingPointError, match=r"\(nan\) encountered in log"):
            donating(jnp.ones(3))
        # a checkpoint is evaluated op by op, as in JAX: the error names the primitive inside
        with pytest.raises(FloatingPointError, match=r"\(nan\) encountered in log"):
            jx.jit(jx.checkpoint(lambda v: jnp.sin(v) + jnp.log(v)))(-1.)
        with pytest.raises(FloatingPointError, match=r"\(nan\) encountered in scan"):
            jx.lax.scan(lambda c, v: (c + jnp.log(v), None), 0., jnp.array([1., -1.]))
        assert float(jx.jit(jx.checkpoint(jnp.log))(2.)) == pytest.approx(np.log(2.))


def test_disable_jit_runs_op_by_op():
    seen = []
    f = jx.jit(lambda v: seen.append(type(v).__name__) or v * 2)
    with jx.disable_jit():
        assert f(1.5) == 3.0
    f(1.5)
    assert seen == ["float", "Tracer"]


def test_option_context_managers():
    with jx.enable_x64():
        assert jnp.ones(2).dtype == np.float64
    assert jnp.ones(2).dtype == np.float32
    with jx.numpy_dtype_promotion("strict"):
        assert (jnp.ones(2) + 1.0).dtype == np.float32          # weak scalars still promote
        with pytest.raises(jx.dtypes.TypePromotionError, match="strict"):
            jnp.ones(2) + jnp.ones(2, np.int32)
    with jx.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="rank_promotion='raise'"):
            jnp.ones((2, 3)) + jnp.ones(3)
    with jx.numpy_rank_promotion("warn"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jnp.ones((2, 3)) + jnp.ones(3)
        assert w
    with pytest.raises(ValueError):
        jx.numpy_rank_promotion("sometimes")
    with jx.default_matmul_precision("highest"):
        assert "HIGHEST" in str(jx.make_jaxpr(lambda a: a @ a)(jnp.ones((2, 2))))
    with jx.default_device(jx.devices()[0]):
        assert jnp.ones(1).shape == (1,)


def test_ragged_dot_modes_against_loops():
    lhs = RNG.normal(size=(7, 3)).astype(F32)
    rhs = RNG.normal(size=(3, 3, 2)).astype(F32)
    gs = np.array([2, 0, 4], np.int32)
    want = np.zeros((7, 2), F32)
    start = 0
    for g, n in enumerate(gs):
        want[start:start + n] = lhs[start:start + n] @ rhs[g]
        start += n
    np.testing.assert_allclose(jx.jit(lax.ragged_dot)(lhs, rhs, gs), want, rtol=1e-5, atol=1e-6)
    g = jx.grad(lambda r: jnp.sum(lax.ragged_dot(lhs, r, gs)))(rhs)
    np.testing.assert_allclose(g[1], 0)          # the empty group gets no gradient
    dn2 = lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])
    l2, r2 = RNG.normal(size=(2, 6)).astype(F32), RNG.normal(size=(6, 3)).astype(F32)
    out = lax.ragged_dot_general(l2, r2, np.array([1, 3, 1], np.int32), dn2)
    bounds = [(0, 1), (1, 4), (4, 5)]
    np.testing.assert_allclose(out, np.stack([l2[:, a:b] @ r2[a:b] for a, b in bounds]), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(lhs, rhs, gs, group_offset=np.zeros(1, np.int32))


def test_composite_platform_dependent_stage():
    f = lax.composite(lambda v, *, k: jnp.sin(v) * k, name="my.scaled_sin", version=3)
    assert np.isclose(jx.jit(lambda v: f(v, k=2.0))(1.0), 2 * np.sin(1.0))
    text = jx.jit(lambda v: f(v, k=2.0)).lower(1.0).as_text()
    assert 'stablehlo.composite "my.scaled_sin"' in text and "version = 3" in text
    assert_round_trip(jx.make_jaxpr(lambda v: f(v, k=2.0))(1.0))
    with pytest.raises(NotImplementedError, match="composite"):
        jx.grad(lambda v: f(v, k=2.0))(1.0)
    with pytest.raises(TypeError, match="static attribute"):
        f(1.0, k=np.ones(2))
    platform = {"cpu": "cpu", "gpu": "cuda"}[jx.default_backend()]
    out = lax.platform_dependent(2.0, default=lambda v: v, **{platform: lambda v: v * 10})
    assert float(out) == 20.0
    with pytest.raises(NotImplementedError, match="no branch"):
        lax.platform_dependent(2.0, tpu=lambda v: v)
    assert [e.primitive.name for e in jx.make_jaxpr(lambda v: lax.stage(np.float32(1)) + v)(1.0).eqns][0] == "copy"


def test_scaled_matmul_reference_semantics():
    a = RNG.normal(size=(2, 3, 8)).astype(F32)
    b = RNG.normal(size=(2, 4, 8)).astype(F32)
    sa = RNG.uniform(0.5, 2, size=(2, 3, 2)).astype(F32)
    sb = RNG.uniform(0.5, 2, size=(2, 4, 2)).astype(F32)
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 4, -1), b * np.repeat(sb, 4, -1))
    np.testing.assert_allclose(jx.nn.scaled_matmul(a, b, sa, sb), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="3-dimensional"):
        jx.nn.scaled_matmul(a[0], b, sa, sb)
    assert jx.nn.get_scaled_dot_general_config("mxfp8").block_size == 32
    out = jx.nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))))
    np.testing.assert_allclose(out, np.einsum("bmk,bnk->bmn", a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(NotImplementedError, match="float8"):
        jx.nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))),
                                 configs=[jx.nn.get_scaled_dot_general_config("mxfp8")] * 3)


def test_version_device_log_compiles(caplog):
    assert jx.version.__version__ == jx.__version__
    assert isinstance(jx.devices()[0], jx.Device)
    with jx.log_compiles(), caplog.at_level("WARNING", logger="jaxprc"):
        jx.jit(lambda v: v * 3 + 1)(np.float32(2))
    assert any("Compiling" in r.getMessage() for r in caplog.records)


def test_named_scope_reaches_ir_and_hlo_locations():
    def f(v):
        with jx.named_scope("outer"):
            y = jnp.sin(v)
            with jx.named_scope("inner"):
                z = y * 2
        return z + 1
    cj = jx.make_jaxpr(f)(1.0)
    assert [(e.primitive.name, e.source_info.scope) for e in cj.eqns] == [
        ("sin", "outer"), ("mul", "outer/inner"), ("add", "")]
    text = jx.jit(f).lower(1.0).as_text(debug_info=True)
    assert '"outer/sin"' in text and '"outer/inner/mul"' in text
    assert "outer" in jx.jit(f).lower(1.0).compile().as_text()       # XLA's op_name metadata
    with pytest.raises(TypeError, match="string"):
        with jx.named_scope(3):
            pass


def test_dot_algorithm_presets():
    a = RNG.normal(size=(4, 5)).astype(F32)
    b = RNG.normal(size=(5, 3)).astype(F32)
    P = lax.DotAlgorithmPreset
    np.testing.assert_allclose(jnp.dot(a, b, precision=P.F32_F32_F32), a @ b, rtol=1e-5, atol=1e-5)
    f16 = jnp.dot(a, b, precision=P.F16_F16_F16)             # operands and accumulation in float16
    assert f16.dtype == np.float32
    want = (a.astype(np.float16) @ b.astype(np.float16)).astype(F32)
    np.testing.assert_allclose(f16, want, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        jx.jit(lambda u, v: jnp.dot(u, v, precision=P.TF32_TF32_F32))(a, b)
    g = jx.make_jaxpr(jx.grad(lambda u: jnp.sum(jnp.dot(u, b, precision=P.BF16_BF16_F32_X3))))(a)
    assert "DotAlgorithmPreset.BF16_BF16_F32_X3" in str(g)          # kept through differentiation
    assert_round_trip(g)
    assert "algorithm" in jx.jit(lambda u: jnp.dot(u, b, precision=P.BF16_BF16_F32)).lower(a).as_text()
    vjp = jx.make_jaxpr(jx.grad(lambda u: jnp.sum(jnp.dot(u, b, precision=lax.Precision.HIGHEST))))(a)
    assert "Precision.HIGHEST" in str(vjp)


def test_scaled_dot_subchannel_scales():
    a = RNG.normal(size=(4, 64)).astype(F32)
    b = RNG.normal(size=(64, 8)).astype(F32)
    sa = RNG.uniform(1, 2, size=(4, 2)).astype(F32)
    sb = RNG.uniform(1, 2, size=(2, 8)).astype(F32)
    out = lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=sb, preferred_element_type=F32)
    want = (a * np.repeat(sa, 32, 1)) @ (b * np.repeat(sb, 32, 0))
    np.testing.assert_allclose(out, want, rtol=3e-2, atol=3e-1)          # bfloat16 operands
    assert lax.scaled_dot(a, b).dtype == jnp.bfloat16
    with pytest.raises(TypeError, match="1-rank"):
        lax.scaled_dot(a[0], b[:, 0])
