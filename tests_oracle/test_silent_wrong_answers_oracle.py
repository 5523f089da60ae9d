"""The results jaxprc once computed wrongly without any error (issue 37) against JAX: values and
dtypes of ``.at[]`` updates with repeated indices, cumulative reductions into ``dtype=bool``,
``vecdot``/``matvec``/``vecmat`` with broadcasting, and derivatives of small determinants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

X = np.array([1., 2., 3., 4., 5.], np.float32)
REPEATED = np.array([0, 0, 2, 2, 2, -1, -1], np.int32)
VALUES = np.array([2., 3., 0.5, 2., 1.5, 2., 0.5], np.float32)
A = np.arange(8., dtype=np.float32).reshape(2, 2, 2)
B = np.arange(1., 5., dtype=np.float32).reshape(2, 2)
C = (np.arange(6) + 1j * np.arange(6)[::-1]).reshape(3, 2).astype(np.complex64)
COLUMN = np.array([[0.1], [0.1], [0.0]], np.float32)
SIGNED = np.array([0.5, -0.5, 0., 0.25], np.float32)
LO, HI = np.array([4., 1., 0., 2.], np.float32), np.array([0.5, 3., 2.5, 2.], np.float32)   # lo > hi, lo == hi


def _same(ours, theirs, rtol=1e-6):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-6)


CASES = [
    ("apply_exp", lambda lib, np_: np_.asarray(X).at[REPEATED].apply(np_.exp)),
    ("apply_clip", lambda lib, np_: np_.asarray(X).at[np.array([0, 7, 7])].apply(np_.exp, mode="clip")),
    ("apply_drop", lambda lib, np_: np_.asarray(X).at[np.array([0, 7, 7])].apply(np_.exp)),
    ("apply_window", lambda lib, np_: np_.asarray(A).at[1].apply(np_.sin)),
    ("apply_jit", lambda lib, np_: lib.jit(lambda x: x.at[REPEATED].apply(np_.sin))(X)),
    ("apply_vmap", lambda lib, np_: lib.vmap(lambda x: x.at[REPEATED].apply(np_.sin))(np.stack([X, X - 1]))),
    ("divide", lambda lib, np_: np_.asarray(X).at[REPEATED].divide(VALUES)),
    ("divide_int", lambda lib, np_: np_.arange(1, 6).at[np.array([0, 0, 2])].divide(2)),
    ("power", lambda lib, np_: np_.asarray(X).at[REPEATED].power(VALUES)),
    ("divide_grad", lambda lib, np_: lib.grad(lambda x: x.at[REPEATED].divide(VALUES).sum())(X)),
    ("power_grad", lambda lib, np_: lib.grad(lambda x: x.at[REPEATED].power(VALUES).sum())(X)),
    ("cumulative_sum_bool", lambda lib, np_: np_.cumulative_sum(COLUMN, axis=-1, dtype=np_.bool_)),
    ("cumulative_prod_bool", lambda lib, np_: np_.cumulative_prod(SIGNED, dtype=np_.bool_, include_initial=True)),
    ("cumsum_bool", lambda lib, np_: np_.cumsum(SIGNED, dtype=np_.bool_)),
    ("cumsum_int_bool", lambda lib, np_: np_.cumsum(np.array([2, -2, 0, 1]), dtype=np_.bool_)),
    ("cumprod_bool", lambda lib, np_: np_.cumprod(COLUMN, axis=0, dtype=np_.bool_)),
    ("nancumsum_bool", lambda lib, np_: np_.nancumsum(np.array([np.nan, 0.5, -0.5], np.float32), dtype=np_.bool_)),
    ("vecdot_axis0", lambda lib, np_: np_.vecdot(A, B, axis=0)),
    ("vecdot_axis1", lambda lib, np_: np_.linalg.vecdot(A, B, axis=1)),
    ("vecdot_complex", lambda lib, np_: np_.vecdot(C, C[::-1], axis=0)),
    ("vecdot_f16", lambda lib, np_: np_.vecdot(A.astype(np.float16), B.astype(np.float16),
                                               preferred_element_type=np.float32)),
    ("vecdot_grad", lambda lib, np_: lib.grad(lambda a: np_.vecdot(a, B, axis=0).sum())(A)),
    ("matvec", lambda lib, np_: np_.matvec(A, B)),
    ("vecmat", lambda lib, np_: np_.vecmat(B, A)),
    ("clamp_jvp_lo_above_hi", lambda lib, np_: lib.jvp(lib.lax.clamp, (LO, X[:4], HI), (X[:4], -X[:4], X[1:] * 2))),
    ("det_grad_1x1", lambda lib, np_: lib.grad(np_.linalg.det)(np.array([[3.]], np.float32))),
    ("det_grad_batched_1x1", lambda lib, np_: lib.grad(lambda a: np_.linalg.det(a).sum())(
        np.array([[[2.]], [[-5.]]], np.float32))),
    ("det_hessian_1x1", lambda lib, np_: lib.hessian(np_.linalg.det)(np.array([[3.]], np.float32))),
    ("det_grad_4x4", lambda lib, np_: lib.grad(np_.linalg.det)(
        np.array([[2., 1., 0., 1.], [1., 3., 1., 0.], [0., 1., 4., 1.], [1., 0., 1., 5.]], np.float32))),
    ("slogdet_grad_1x1", lambda lib, np_: lib.grad(lambda a: np_.linalg.slogdet(a)[1].sum())(
        np.array([[[2.]], [[-5.]]], np.float32))),
    # found by test_argument_sweep.py
    ("logaddexp_complex", lambda lib, np_: (np_.logaddexp(C, C[::-1] * 2), np_.logaddexp2(C * 3, C[::-1]))),
    ("logaddexp_complex_jvp", lambda lib, np_: lib.jvp(np_.logaddexp, (C, C[::-1]), (C, C))),
    ("nanmax_initial_all_nan", lambda lib, np_: (
        np_.nanmax(np.array([[np.nan, 1.], [np.nan, np.nan]], np.float32), axis=1, initial=0.),
        np_.nanmin(np.array([[np.nan, np.nan]], np.float32), axis=1, initial=-2.),
        np_.nanmax(np.zeros((0, 3), np.complex64), axis=0, initial=0))),
    ("mean_int_dtype_exact", lambda lib, np_: np_.mean(np.array([2**30 + 1, 2**30 + 4, -7], np.int32), dtype=np.int32)),
    ("var_complex_dtype", lambda lib, np_: (np_.var(C, dtype=np.complex64), np_.std(C.real, dtype=np.complex64),
                                            np_.var(np.array([1, 3, 0, 2], np.int32), dtype=np.int32))),
]


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0] for c in CASES])
def test_matches_jax(name, fn):
    ours, theirs = fn(jaxprc, xnp), fn(jax, jnp)
    for o, t in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        _same(o, t, rtol=1e-5)


def test_vecdot_shape_errors_match():
    for lib in (jnp, xnp):
        with pytest.raises(ValueError, match="axes must match"):
            lib.vecdot(A, np.ones((3, 2), np.float32), axis=0)


def test_split_rejects_negative_and_decreasing_indices_as_jax():
    # numpy counts negative indices from the end; JAX raises, and jaxprc once clipped them silently
    for indices in ([1, 1, -1], [2, 1], [5]):
        for lib in (jnp, xnp):
            with pytest.raises(ValueError, match="nonnegative"):
                lib.split(np.arange(3.), indices)
    assert [a.shape for a in xnp.split(np.arange(3.), [1, 3])] == [(1,), (2,), (0,)]


def test_pad_statistic_and_ramp_modes_match_jax():
    x = np.array([[4, -1, 7], [2, 5, -3]], np.int32)
    for kw in (dict(mode="maximum"), dict(mode="minimum", stat_length=1), dict(mode="mean"),
               dict(mode="median", stat_length=((1, 2), (2, 1))), dict(mode="linear_ramp", end_values=((1, -2), (3, 4)))):
        for arr in (x, x.astype(np.float32) / 3):
            _same(xnp.pad(arr, ((1, 2), (2, 0)), **kw), jnp.pad(arr, ((1, 2), (2, 0)), **kw))
    np.testing.assert_array_equal(xnp.pad(x, 1, mode="maximum"), np.pad(x, 1, mode="maximum"))
