"""The strict modes (``numpy_rank_promotion('raise')`` and ``numpy_dtype_promotion('strict')``)
against JAX: library functions whose implementations promote internally run as in JAX, with JAX's
values, and the user's own implicit promotions raise where JAX's do (issue 37)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

F32 = np.arange(1., 7., dtype=np.float32).reshape(2, 3)
F16 = F32.astype(np.float16)
I32 = F32.astype(np.int32)
C64 = (F32 + 1j).astype(np.complex64)
MASK = F32 > 2
EYE = np.eye(3, dtype=np.float32)

CASES = {
    "average_weights": lambda lib, np_: np_.average(F32, axis=1, weights=np.array([1., 2., 3.], np.float32)),
    "det_grad": lambda lib, np_: lib.grad(np_.linalg.det)(EYE + 0.1),
    "det_grad_1x1": lambda lib, np_: lib.grad(np_.linalg.det)(np.ones((1, 1), np.float32)),
    "var_complex": lambda lib, np_: np_.var(C64),
    "abs_complex": lambda lib, np_: np_.abs(C64),
    "mean_bool": lambda lib, np_: np_.mean(MASK),
    "std_f16": lambda lib, np_: np_.std(F16),
    "cov": lambda lib, np_: np_.cov(F32),
    "corrcoef": lambda lib, np_: np_.corrcoef(F32),
    "median": lambda lib, np_: np_.median(F32, axis=0),
    "interp": lambda lib, np_: np_.interp(np.float32(2.5), np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32)),
    "attention_mask": lambda lib, np_: lib.nn.dot_product_attention(
        *(np.ones((1, 2, 1, 4), np.float32),) * 3, mask=np.ones((1, 1, 2, 2), bool)),
    "logsumexp_b": lambda lib, np_: lib.scipy.special.logsumexp(F32, b=F32),
    "vmap_divide": lambda lib, np_: lib.vmap(lambda x: x / x.sum())(F32),
    "inverse_grad": lambda lib, np_: lib.grad(lambda a: np_.linalg.inv(a).sum())(EYE * 2),
    "eigh_grad": lambda lib, np_: lib.grad(lambda a: np_.linalg.eigh(a)[0].sum())(EYE),
    "svd_grad": lambda lib, np_: lib.grad(lambda a: np_.linalg.svd(a)[1].sum())(EYE * 2),
    "qr_grad": lambda lib, np_: lib.grad(lambda a: np_.linalg.qr(a)[1].sum())(EYE * 2 + 0.1),
    "pinv": lambda lib, np_: np_.linalg.pinv(F32),
    "polyval": lambda lib, np_: np_.polyval(np.array([1., 2.], np.float32), F32),
    "vander": lambda lib, np_: np_.vander(F32[0]),
    "histogram": lambda lib, np_: np_.histogram(F32, bins=3),
    "hypot_grad": lambda lib, np_: lib.grad(lambda x: np_.hypot(x, 1.).sum())(F32),
    "random_uniform_f16": lambda lib, np_: lib.random.uniform(lib.random.key(0), (3,), np_.float16),
    "random_choice": lambda lib, np_: lib.random.choice(lib.random.key(0), 5, (3,)),
    # the user's own promotions
    "user_call": lambda lib, np_: np_.add(F32, F16),
    "user_operator": lambda lib, np_: np_.asarray(F32) * np_.asarray(F16),
    "user_ranks": lambda lib, np_: np_.add(F32, F32[0]),
    "user_jit": lambda lib, np_: lib.jit(lambda x, y: x * y)(F32, F16),
    "user_bool_int": lambda lib, np_: np_.add(MASK, I32),
    "user_bool_f16": lambda lib, np_: np_.multiply(MASK, F16),
    "user_complex_float": lambda lib, np_: np_.multiply(C64, F32),
    "user_vecdot_ranks": lambda lib, np_: np_.vecdot(F32[None], F32[0]),
}


def _strict(lib, name):
    lib.config.update("jax_numpy_rank_promotion", "raise")
    lib.config.update("jax_numpy_dtype_promotion", "strict")
    try:
        return CASES[name](lib, jnp if lib is jax else xnp), None
    except (ValueError, TypeError) as e:
        return None, e
    finally:
        lib.config.update("jax_numpy_rank_promotion", "allow")
        lib.config.update("jax_numpy_dtype_promotion", "standard")


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_modes_match_jax(name):
    (want, want_error), (got, got_error) = _strict(jax, name), _strict(jaxprc, name)
    assert type(got_error).__name__ == type(want_error).__name__, (got_error, want_error)
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)


@pytest.mark.x64
def test_strict_modes_under_x64_match_jax():
    for name in ("det_grad", "mean_bool", "average_weights", "user_call"):
        (want, want_error), (got, got_error) = _strict(jax, name), _strict(jaxprc, name)
        assert type(got_error).__name__ == type(want_error).__name__, (name, got_error, want_error)
        for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)
    lhs, rhs = F32, F32.astype(np.float64)
    for lib, np_ in ((jax, jnp), (jaxprc, xnp)):
        with lib.numpy_dtype_promotion("strict"), pytest.raises(lib.dtypes.TypePromotionError):
            np_.multiply(lhs, rhs)
