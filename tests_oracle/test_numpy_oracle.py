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


@pytest.mark.parametrize("fn,args", [pytest.param(c[1], c[2:], id=c[0]) for c in CASES])
def test_eager_and_jit_match_jax(fn, args):
    theirs = _leaves(jax.jit(lambda *a: fn(JAX, *a))(*args))
    eager = jaxprc.tree_util.tree_leaves(fn(OURS, *map(xnp.asarray, args)))
    jitted = jaxprc.tree_util.tree_leaves(jaxprc.jit(lambda *a: fn(OURS, *a))(*args))
    assert len(eager) == len(theirs) == len(jitted)
    for e, j, t in zip(eager, jitted, theirs):
        _agree(np.asarray(e), t)
        _agree(np.asarray(j), t)
