"""The strict modes (``numpy_rank_promotion('raise')``, ``numpy_dtype_promotion('strict')``) police
the user's implicit promotions only (issue 37): jaxprc's own implementations promote as they need
to, and give the same values as in the standard modes; the user's mixed ranks and dtypes still
raise, whether written as calls, operators, ufunc objects or inside transformed functions."""
import contextlib

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.dtypes import TypePromotionError

F32 = np.arange(1., 7., dtype=np.float32).reshape(2, 3)
F16 = F32.astype(np.float16)
I32 = F32.astype(np.int32)
C64 = (F32 + 1j).astype(np.complex64)
MASK = F32 > 2


@contextlib.contextmanager
def strict():
    with jx.numpy_rank_promotion("raise"), jx.numpy_dtype_promotion("strict"):
        yield


LIBRARY = {
    "average_weights_axis1": lambda: jnp.average(F32, axis=1, weights=np.array([1., 2., 3.], np.float32)),
    "average_weights_axis0": lambda: jnp.average(F32, axis=0, weights=np.array([1., 2.], np.float32)),
    "det_grad": lambda: jx.grad(jnp.linalg.det)(np.eye(4, dtype=np.float32) + 0.1),
    "slogdet_grad": lambda: jx.grad(lambda a: jnp.linalg.slogdet(a)[1])(np.eye(3, dtype=np.float32) * 2),
    "var_complex": lambda: jnp.var(C64),
    "norm_complex": lambda: jnp.linalg.norm(C64),
    "mean_bool": lambda: jnp.mean(MASK),
    "std_f16": lambda: jnp.std(F16),
    "cov": lambda: jnp.cov(F32),
    "percentile": lambda: jnp.percentile(F32, 50.),
    "attention_mask": lambda: jx.nn.dot_product_attention(*(np.ones((1, 2, 1, 4), np.float32),) * 3,
                                                          mask=np.ones((1, 1, 2, 2), bool)),
    "logsumexp_b": lambda: jx.scipy.special.logsumexp(F32, b=F32),
    "vmap_divide": lambda: jx.vmap(lambda x: x / x.sum())(F32),
    "inverse_grad": lambda: jx.grad(lambda a: jnp.linalg.inv(a).sum())(np.eye(2, dtype=np.float32) * 2),
    "svd_grad": lambda: jx.grad(lambda a: jnp.linalg.svd(a)[1].sum())(np.eye(2, dtype=np.float32) * 2),
    "random_uniform_f16": lambda: jx.random.uniform(jx.random.key(0), (3,), jnp.float16),
}


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_internals_do_not_trip_the_strict_modes(name):
    expected = LIBRARY[name]()
    with strict():
        got = LIBRARY[name]()
    for e, g in zip(jx.tree_util.tree_leaves(expected), jx.tree_util.tree_leaves(got)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_library_internals_under_x64():
    with jx.enable_x64(), strict():
        np.testing.assert_allclose(jx.grad(jnp.linalg.det)(np.eye(3, dtype=np.float32) + 0.1),
                                   np.linalg.inv(np.eye(3) + 0.1).T * np.linalg.det(np.eye(3) + 0.1), rtol=1e-5)
        assert jnp.mean(F32).dtype == np.float32


USER = {
    "call": (TypePromotionError, lambda: jnp.add(F32, F16)),
    "operator": (TypePromotionError, lambda: jnp.asarray(F32) * jnp.asarray(F16)),
    "bool_and_int": (TypePromotionError, lambda: jnp.add(MASK, I32)),
    "complex_and_float": (TypePromotionError, lambda: jnp.multiply(C64, F32)),
    "under_jit": (TypePromotionError, lambda: jx.jit(lambda x, y: x * y)(F32, F16)),
    "under_vmap": (ValueError, lambda: jx.vmap(lambda x: x + jnp.ones((2, 2)))(F32)),
    "ranks_call": (ValueError, lambda: jnp.add(F32, F32[0])),
    "ranks_operator": (ValueError, lambda: jnp.asarray(F32) + jnp.asarray(F32[0])),
    "user_function_given_to_the_library": (TypePromotionError,
                                           lambda: jnp.vectorize(lambda a, b: a * b)(F32, F16)),
    "vecdot_ranks": (ValueError, lambda: jnp.vecdot(F32[None], F32[0])),
}


@pytest.mark.parametrize("name", sorted(USER))
def test_the_users_promotions_still_raise(name):
    exc, fn = USER[name]
    with strict(), pytest.raises(exc, match="promotion"):
        fn()
