"""Values of jaxprc.numpy / jaxprc.nn against jax.numpy / jax.nn on the same inputs.

Both run through XLA, so results agree to a few ulps; the cases favour edges
where numpy is no oracle: NaN and infinities, float16/bfloat16 accumulation,
integer division and remainders of negative numbers, out-of-bounds indices,
weakly typed scalars.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.nn as jxnn
import jaxprc.numpy as xnp

RNG = np.random.default_rng(7)
F = np.array([[0.0, -0.0, 1.5, -2.5, np.inf], [-np.inf, np.nan, 3.25, -7.0, 0.5]], np.float32)
G = RNG.normal(size=(3, 4)).astype(np.float32)
H = RNG.normal(size=(4, 2)).astype(np.float32)
I = np.array([[7, -7, 0, 3], [-3, 5, -8, 1], [2, -1, 9, -6]], np.int32)
J = np.array([[2, 3, -2, -3], [1, -5, 3, 2], [4, 2, -7, 3]], np.int32)
U = np.array([0, 1, 200, 255], np.uint8)
F16 = (RNG.normal(size=(64,)) * 100).astype(np.float16)
BF16 = RNG.normal(size=(8, 3)).astype(ml_dtypes.bfloat16)
IDX = np.array([0, -1, 2, 5], np.int32)


class NS:
    def __init__(self, np_mod, nn_mod):
        self.np, self.nn = np_mod, nn_mod


JAX, OURS = NS(jnp, jax.nn), NS(xnp, jxnn)

CASES = [
    ("add_weak", lambda m, x: x + 1.5, F), ("sub_int", lambda m, x: 3 - x, I),
    ("divide_int", lambda m, x, y: m.np.divide(x, y), I, J),
    ("floor_divide_int", lambda m, x, y: m.np.floor_divide(x, y), I, J),
    ("floor_divide_float", lambda m, x: m.np.floor_divide(x, -1.5), G * 5),
    ("remainder_int", lambda m, x, y: m.np.remainder(x, y), I, J),
    ("remainder_float", lambda m, x: m.np.remainder(x, 1.25), G * 5),
    ("fmod", lambda m, x, y: m.np.fmod(x, y), I, J),
    ("power_int", lambda m, x: m.np.power(x, 3), I), ("power_int_array", lambda m, x, y: m.np.power(x, m.np.abs(y)), I, J),
    ("power_float", lambda m, x: m.np.power(m.np.abs(x), 0.5), G), ("square_u8", lambda m, x: m.np.square(x), U),
    ("round_half_even", lambda m, x: m.np.round(x), np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], np.float32)),
    ("round_decimals", lambda m, x: m.np.round(x, 2), G), ("sign_f", lambda m, x: m.np.sign(x), F),
    ("abs_i", lambda m, x: m.np.abs(x), I), ("maximum_nan", lambda m, x: m.np.maximum(x, 0.0), F),
    ("minimum_int", lambda m, x, y: m.np.minimum(x, y), I, J), ("isnan", lambda m, x: m.np.isnan(x), F),
    ("isinf", lambda m, x: m.np.isinf(x), F), ("isfinite", lambda m, x: m.np.isfinite(x), F),
    ("logaddexp_inf", lambda m, x: m.np.logaddexp(x, x), F), ("arctan2", lambda m, x: m.np.arctan2(x, 1.0), F),
    ("exp_f16", lambda m, x: m.np.exp(x / 100), F16), ("sin_bf16", lambda m, x: m.np.sin(x), BF16),
    ("right_shift_u8", lambda m, x: x >> 3, U), ("right_shift_neg", lambda m, x: x >> 1, I),
    ("invert_u8", lambda m, x: ~x, U), ("bitwise_mix", lambda m, x: (x & 5) | 8, I),
    ("where", lambda m, x: m.np.where(x > 0, x, -x), G), ("clip", lambda m, x: m.np.clip(x, -1, 2), F),
    ("sum_f16", lambda m, x: m.np.sum(x), F16), ("mean_f16", lambda m, x: m.np.mean(x), F16),
    ("sum_bf16_axis", lambda m, x: m.np.sum(x, 0), BF16), ("mean_int", lambda m, x: m.np.mean(x, axis=1), I),
    ("sum_u8", lambda m, x: m.np.sum(x), U), ("prod_int", lambda m, x: m.np.prod(x, axis=0), I),
    ("max_nan", lambda m, x: m.np.max(x, axis=1), F), ("min_nan", lambda m, x: m.np.min(x), F),
    ("argmax_nan", lambda m, x: m.np.argmax(x, axis=1), F), ("argmin", lambda m, x: m.np.argmin(x, axis=0), G),
    ("var", lambda m, x: m.np.var(x, axis=0), G), ("std_ddof", lambda m, x: m.np.std(x, ddof=1), G),
    ("var_int", lambda m, x: m.np.var(x), I), ("cumsum", lambda m, x: m.np.cumsum(x, axis=1), G),
    ("cumsum_bool", lambda m, x: m.np.cumsum(x > 0), I), ("cumprod_int", lambda m, x: m.np.cumprod(x, axis=0), I),
    ("all_any", lambda m, x: (m.np.all(x > -9, axis=0), m.np.any(x > 8, axis=1)), I),
    ("sort_nan", lambda m, x: m.np.sort(x, axis=1), F), ("argsort", lambda m, x: m.np.argsort(x, axis=0), G),
    ("argsort_ties", lambda m, x: m.np.argsort(x), np.array([2, 1, 2, 1, 0, 2], np.int32)),
    ("dot", lambda m, x, y: m.np.dot(x, y), G, H), ("matmul_int", lambda m, x: x @ x.T, I),
    ("einsum", lambda m, x, y: m.np.einsum("ij,jk->ki", x, y), G, H),
    ("einsum_trace", lambda m, x: m.np.einsum("ii->", x[:, :3]), G),
    ("tensordot", lambda m, x, y: m.np.tensordot(x, y, 1), G, H), ("outer", lambda m, x: m.np.outer(x[0], x[1]), G),
    ("linspace", lambda m: m.np.linspace(-1.0, 3.0, 7)), ("linspace_int", lambda m: m.np.linspace(0, 10, 4, dtype=m.np.int32)),
    ("arange_float", lambda m: m.np.arange(0.0, 1.0, 0.1)), ("eye_k", lambda m: m.np.eye(3, 5, k=-1)),
    ("take_fill", lambda m, x, i: m.np.take(x, i, axis=1), G, IDX),
    ("take_clip", lambda m, x, i: m.np.take(x, i, axis=1, mode="clip"), G, IDX),
    ("take_int_fill", lambda m, x, i: m.np.take(x, i), I, IDX * 5),
    ("getitem_oob_array", lambda m, x, i: x[i], G, np.array([0, 3, -1, 2], np.int32)),
    ("getitem_basic", lambda m, x: x[1:, ::-2], G), ("getitem_none", lambda m, x: x[None, -1, ..., None], G),
    ("getitem_mixed", lambda m, x, i: x[i, 1:3], G, np.array([2, 0], np.int32)),
    ("at_set_oob", lambda m, x: x.at[m.np.array([0, 9])].set(-1.0), G[0]),
    ("at_add_dup", lambda m, x: x.at[m.np.array([1, 1, 2])].add(1.0), G[0]),
    ("at_mul", lambda m, x: x.at[:, 1].multiply(3), I),
    ("take_along_axis", lambda m, x: m.np.take_along_axis(x, m.np.argsort(x, axis=1), axis=1), G),
    ("take_along_axis_clip", lambda m, x, i: m.np.take_along_axis(x, i, axis=1, mode="clip"), G,
     np.array([[0, -1, 9, -9]] * 3, np.int32)),
    ("searchsorted_nan", lambda m, a, v: (m.np.searchsorted(a, v), m.np.searchsorted(a, v, side="right")),
     np.array([-1.0, 0.0, 1.0, np.nan], np.float32), np.array([np.nan, -0.0, np.inf, 0.5], np.float32)),
    ("var_no_dof", lambda m, x: (m.np.var(x[0, :3], ddof=3), m.np.std(x, axis=0, ddof=5)), G),
    ("linspace_retstep", lambda m: (m.np.linspace(2.0, 3.0, 5, retstep=True), m.np.linspace(2.0, 3.0, 1, retstep=True))),
    ("diag_trace", lambda m, x: (m.np.diag(x, 1), m.np.trace(x)), G), ("triu_tril", lambda m, x: (m.np.triu(x, -1), m.np.tril(x)), G),
    ("pad_reflect", lambda m, x: m.np.pad(x, 2, mode="reflect"), G), ("roll", lambda m, x: m.np.roll(x, -3), G),
    ("tile_repeat", lambda m, x: (m.np.tile(x, 2), m.np.repeat(x, 2, axis=0)), G),
    ("norm", lambda m, x: m.np.linalg.norm(x), G), ("norm_inf", lambda m, x: m.np.linalg.norm(x, ord=np.inf, axis=1), G),
    ("norm_matrix1", lambda m, x: m.np.linalg.norm(x, ord=1), G), ("norm_zero", lambda m, x: m.np.linalg.norm(x * 0), G),
    ("relu", lambda m, x: m.nn.relu(x), F), ("sigmoid", lambda m, x: m.nn.sigmoid(x), F),
    ("softplus", lambda m, x: m.nn.softplus(x), F), ("gelu", lambda m, x: m.nn.gelu(x), G),
    ("gelu_exact", lambda m, x: m.nn.gelu(x, approximate=False), G),
    ("log_softmax", lambda m, x: m.nn.log_softmax(x), G), ("softmax", lambda m, x: m.nn.softmax(x, axis=0), G),
    ("softmax_inf", lambda m, x: m.nn.softmax(x), np.array([[-np.inf, 0.0, 1.0], [-np.inf, -np.inf, 2.0]], np.float32)),
    ("logsumexp", lambda m, x: m.nn.logsumexp(x, axis=1), G),
    ("logsumexp_neginf", lambda m, x: m.nn.logsumexp(x), np.array([-np.inf, -np.inf], np.float32)),
    ("logsumexp_b", lambda m, x: m.nn.logsumexp(x, b=0.5), G), ("one_hot", lambda m, x: m.nn.one_hot(x, 4), IDX),
    ("one_hot_axis", lambda m, x: m.nn.one_hot(x, 3, axis=0, dtype=m.np.int8), I % 4),
    # The rest of the numpy surface, a few functions per case (each case compiles on both sides).
    ("creation", lambda m: (m.np.array([1, 2.5]), m.np.asarray([[1, 2], [3, 4]], m.np.int8), m.np.zeros((2, 3)),
                            m.np.ones(3, m.np.int32), m.np.full((2, 2), 7.5), m.np.arange(5), m.np.eye(3))),
    ("like", lambda m, x: (m.np.zeros_like(x), m.np.ones_like(x, dtype=m.np.int32), m.np.full_like(x, 2.5),
                           m.np.asarray(x), m.np.array(x, dtype=m.np.float16)), G),
    ("math", lambda m, x: tuple(getattr(m.np, f)(x) for f in (
        "sqrt", "log", "log1p", "expm1", "exp", "exp2", "log2", "log10", "cos", "tan", "tanh", "sinh", "cosh",
        "arcsin", "arccos", "arctan", "arcsinh", "floor", "ceil", "trunc", "square", "reciprocal", "cbrt",
        "negative", "positive", "signbit", "deg2rad")), F),
    ("comparisons", lambda m, x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y, m.np.equal(x, 1.5),
                                     m.np.less_equal(2, y), m.np.logical_and(x > 0, y > 0)), F, F[:, ::-1]),
    ("reductions_keepdims", lambda m, x: (m.np.sum(x, axis=0, keepdims=True), m.np.mean(x, keepdims=True),
                                          m.np.max(x, axis=1, keepdims=True), m.np.min(x, axis=0),
                                          m.np.prod(x, axis=1), m.np.argmax(x), m.np.cumprod(x, axis=0)), G),
    ("matmul_inner", lambda m, x, y: (m.np.matmul(x, y), m.np.matmul(x[0], y), m.np.matmul(x, y[:, 0]),
                                      m.np.matmul(x[None], y[None]), m.np.inner(x, x)), G, H),
    ("reshape_family", lambda m, x: (m.np.reshape(x, (2, -1)), m.np.ravel(x), m.np.transpose(x),
                                     m.np.swapaxes(x[None], 0, 2), m.np.moveaxis(x[None], 0, -1),
                                     m.np.squeeze(x[:, None]), m.np.expand_dims(x, (0, 2))), G),
    ("join_split", lambda m, x: (m.np.concatenate([x, x[:1]]), m.np.stack([x, -x], axis=1), m.np.hstack([x, x]),
                                 m.np.vstack([x, x[0]]), *m.np.split(x, 2, axis=1), *m.np.split(x, [1], axis=0)), G),
    ("broadcast_flip_pad", lambda m, x: (m.np.broadcast_to(x[0], (2, 4)), m.np.flip(x, 0), m.np.flip(x),
                                         m.np.pad(x, ((1, 0), (0, 2)), constant_values=-1.0),
                                         m.np.pad(x, 1, mode="edge"), m.np.roll(x, 1, axis=0)), G),
    ("ndim_shape_size", lambda m, x: m.np.full((m.np.ndim(x), m.np.size(x)), m.np.shape(x)[1], m.np.float32), G),
    ("dtype_objects", lambda m, x: (m.np.float32(3), m.np.int32(x), m.np.uint8(7), x.astype(m.np.bfloat16),
                                    m.np.float16(x), m.np.zeros(2, m.np.bool_)), G * 4),
    ("methods", lambda m, x: (x.T, x.reshape(4, 3), x.sum(0), x.mean(), x.max(1), x.min(), x.var(), x.std(0),
                              x.squeeze(), x.ravel(), x.transpose(1, 0), x.at[1, 2].get(), x.at[0].min(0.0),
                              x.at[:, 1].max(0.5), len(x) * x[-1], list(x)[1]), G),
    # static out-of-bounds indices clamp (JAX's gather), where numpy would raise
    ("index_oob_static", lambda m, x: (x[5], x[-9], x[1, 7], x[-4, -5]), G),
    ("roll_array_shift", lambda m, x, s: (m.np.roll(x, s[0]), m.np.roll(x, s[:2], axis=(0, 1))), G, J[0]),
    ("roll_array_shift_jit", lambda m, x, s: jax.jit(lambda x, s: m.np.roll(x, s, axis=1))(x, s[1])
     if m is JAX else jaxprc.jit(lambda x, s: m.np.roll(x, s, axis=1))(x, s[1]), G, J[0]),
    # .at[] updates honour mode="clip" (clamped, negatives counted from the end first); the
    # default drops out-of-bounds updates
    ("at_updates_clip", lambda m, x, i: (x.at[0, i].add(1.0, mode="clip"), x.at[i].set(-1.0, mode="clip"),
                                         x.at[1, i].max(9.0, mode="clip"), x.at[i, 2].mul(2.0),
                                         x.at[-7].add(5.0, mode="clip"), x.at[0, i].get(mode="clip")), G, IDX * 2),
    ("diff_prepend_append", lambda m, x: (m.np.diff(x, prepend=0.5), m.np.diff(x, axis=0, append=x[:1]),
                                          m.np.diff(x, n=2, prepend=-1.0, append=2.0)), G),
]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _agree(ours, theirs):
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours.dtype, theirs.dtype, ours.shape, theirs.shape)
    if ours.dtype.kind == "f" or ours.dtype == ml_dtypes.bfloat16:
        eps = float(ml_dtypes.finfo(ours.dtype).eps)
        np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=8 * eps,
                                   atol=8 * eps, equal_nan=True)
    else:
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("fn,args", [pytest.param(c[1], c[2:], id=c[0]) for c in CASES])
def test_eager_and_jit_match_jax(fn, args):
    theirs = _leaves(jax.jit(lambda *a: fn(JAX, *a))(*args))
    eager = jaxprc.tree_util.tree_leaves(fn(OURS, *map(xnp.asarray, args)))
    jitted = jaxprc.tree_util.tree_leaves(jaxprc.jit(lambda *a: fn(OURS, *a))(*args))
    assert len(eager) == len(theirs) == len(jitted)
    for e, j, t in zip(eager, jitted, theirs):
        _agree(np.asarray(e), t)
        _agree(np.asarray(j), t)
