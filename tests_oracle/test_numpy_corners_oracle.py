"""Argument checks of jax.numpy / scipy corners against JAX: the same outcome (value, or exception
class) for ``vectorize``'s signature and ``excluded`` validation, ``eigh_tridiagonal``'s dtypes,
reducers' ``initial``/``where``, ``argmin`` over empty axes, fft/linalg argument errors."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp
import jaxprc.scipy.linalg

CALLS = {
    "vectorize_negative_excluded": lambda np_, sp: np_.vectorize(lambda a, b: a, excluded={-1}),
    "vectorize_float_excluded": lambda np_, sp: np_.vectorize(lambda a, b: a, excluded={1.5}),
    "vectorize_output_count": lambda np_, sp: np_.vectorize(lambda a: (a, a), signature="(n)->()")(np_.ones((2, 3))),
    "vectorize_output_rank": lambda np_, sp: np_.vectorize(lambda a: a, signature="(n)->()")(np_.ones((2, 3))),
    "vectorize_core_sizes": lambda np_, sp: np_.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(
        np_.ones((2, 3)), np_.ones(4)),
    "vectorize_keyword_excluded": lambda np_, sp: np_.vectorize(lambda a, b: a * b, excluded={"b"})(
        np_.arange(3.0), b=2.0),
    "eigh_tridiagonal_f16": lambda np_, sp: sp.linalg.eigh_tridiagonal(
        np_.ones(3, np_.float16), np_.ones(2, np_.float16), eigvals_only=True),
    "eigh_tridiagonal_int": lambda np_, sp: sp.linalg.eigh_tridiagonal(
        np_.ones(3, np_.int32), np_.ones(2, np_.int32), eigvals_only=True),
    "eigh_tridiagonal_mixed": lambda np_, sp: sp.linalg.eigh_tridiagonal(
        np_.ones(3), np_.ones(2, np_.complex64), eigvals_only=True),
    "eigh_tridiagonal_complex": lambda np_, sp: sp.linalg.eigh_tridiagonal(
        np_.array([1.0, 2.0, 3.0], np_.complex64), np_.array([1j, 1.0 + 1j], np_.complex64), eigvals_only=True),
    "eigh_tridiagonal_real": lambda np_, sp: sp.linalg.eigh_tridiagonal(
        np_.array([1.0, 2.0, 3.0]), np_.array([0.5, -1.0]), eigvals_only=True),
    "max_where_without_initial": lambda np_, sp: np_.max(np_.arange(6.0).reshape(2, 3), where=np_.ones(3, bool)),
    "max_initial_array": lambda np_, sp: np_.max(np_.ones(3), initial=np_.ones(2)),
    "sum_where_shape": lambda np_, sp: np_.sum(np_.ones((2, 3)), where=np_.ones(4, bool)),
    "sum_repeated_axis": lambda np_, sp: np_.sum(np_.ones((2, 3)), axis=(0, 0)),
    "argmin_empty_axis": lambda np_, sp: np_.argmin(np_.zeros((0, 3)), axis=0),
    "argmin_nonempty_axis": lambda np_, sp: np_.argmin(np_.zeros((0, 3)), axis=1),
    "ifft2_one_axis": lambda np_, sp: np_.fft.ifft2(np_.ones((2, 3)), axes=(0,)),
    "fft_n_zero": lambda np_, sp: np_.fft.fft(np_.ones(3), n=0),
    "companion_short": lambda np_, sp: sp.linalg.companion(np_.ones(1)),
    "convolution_matrix_mode": lambda np_, sp: sp.linalg.convolution_matrix(np_.ones(3), 2, mode="bad"),
    "matrix_rank_1d": lambda np_, sp: np_.linalg.matrix_rank(np_.ones(3)),
    "pinv_rtol_and_rcond": lambda np_, sp: np_.linalg.pinv(np_.ones((2, 2)), rcond=0.1, rtol=0.1),
}


def _outcome(f):
    try:
        out = f()
    except Exception as e:       # noqa: BLE001
        return type(e).__name__
    return out if callable(out) and not hasattr(out, "shape") else np.asarray(out)


@pytest.mark.parametrize("name", list(CALLS))
def test_corner_matches_jax(name):
    theirs = _outcome(lambda: CALLS[name](jnp, jax.scipy))
    ours = _outcome(lambda: CALLS[name](xnp, jaxprc.scipy))
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"jax computes, jaxprc raises {ours}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    elif isinstance(theirs, str):
        assert ours == theirs
    else:                      # a vectorized function: both made one
        assert callable(ours)
