"""Regression tests for results jaxprc once computed wrongly without any error (issue 37), checked
against numpy and the mathematics: ``.at[]`` updates with repeated indices (numpy's ``ufunc.at``),
cumulative reductions into ``dtype=bool``, ``vecdot``'s per-operand axis, and the gradient of a
1 x 1 determinant. tests_oracle/test_silent_wrong_answers_oracle.py compares the same with JAX."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp

X = np.array([1., 2., 3., 4., 5.], np.float32)
REPEATED = np.array([0, 0, 2, 2, 2, -1, -1], np.int32)


def _ufunc_at(ufunc, x, idx, *values):
    out = x.copy()
    ufunc.at(out, idx, *values)
    return out


# ------------------------------------------------------------------ .at[] with repeated indices
def test_at_apply_applies_once_per_occurrence_of_an_index():
    expected = _ufunc_at(np.sin, X, REPEATED)
    np.testing.assert_allclose(jnp.asarray(X).at[REPEATED].apply(jnp.sin), expected, rtol=1e-6)
    jitted = jaxprc.jit(lambda x, i: x.at[i].apply(jnp.sin))(X, REPEATED)
    np.testing.assert_allclose(jitted, expected, rtol=1e-6)
    rows = np.stack([X, X + 1])
    batched = jaxprc.vmap(lambda x: x.at[REPEATED].apply(jnp.sin))(rows)
    np.testing.assert_allclose(batched, np.stack([_ufunc_at(np.sin, r, REPEATED) for r in rows]), rtol=1e-6)
    ints = np.arange(5, dtype=np.int32)
    assert jnp.asarray(ints).at[REPEATED].apply(lambda v: v * 2).tolist() == _ufunc_at(
        np.left_shift, ints, REPEATED, 1).tolist()


def test_at_apply_out_of_bounds_and_windows():
    oob = np.array([0, 7, 7], np.int32)
    assert np.asarray(jnp.asarray(X).at[oob].apply(jnp.negative)).tolist() == [-1., 2., 3., 4., 5.]
    clipped = jnp.asarray(X).at[oob].apply(jnp.negative, mode="clip")      # 7 -> 4, twice
    assert np.asarray(clipped).tolist() == [-1., 2., 3., 4., 5.]
    grid = np.arange(6., dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(jnp.asarray(grid).at[1].apply(jnp.exp), np.concatenate([grid[:1], np.exp(grid[1:])]),
                               rtol=1e-6)


@pytest.mark.parametrize("method, ufunc", [("divide", np.divide), ("power", np.power),
                                           ("multiply", np.multiply), ("add", np.add)])
def test_at_binary_updates_combine_every_occurrence(method, ufunc):
    values = np.array([2., 3., 0.5, 2., 1.5, 2., 0.5], np.float32)
    out = getattr(jnp.asarray(X).at[REPEATED], method)(values)
    np.testing.assert_allclose(out, _ufunc_at(ufunc, X, REPEATED, values), rtol=1e-6)


def test_at_divide_of_integers_is_a_true_division_per_occurrence():
    ints = np.array([1, 2, 3, 4, 5], np.int32)
    out = jnp.asarray(ints).at[np.array([0, 0, 2])].divide(2)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [0.25, 2., 1.5, 4., 5.])


def test_at_divide_gradient_divides_once_per_occurrence():
    grad = jaxprc.grad(lambda x: x.at[np.array([0, 0, 2])].divide(3.).sum())(X)
    np.testing.assert_allclose(grad, [1 / 9, 1., 1 / 3, 1., 1.], rtol=1e-6)


# ------------------------------------------------------------------ cumulative reductions into bool
COLUMN = np.array([[0.1], [0.1], [0.0]], np.float32)
SIGNED = np.array([0.5, -0.5, 0., 0.25], np.float32)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
def test_cumulative_into_bool_takes_truth_values_first(name):
    # numpy: the cast to bool comes first; a sum of bools is `or`, a product `and`.
    reference = getattr(np, name)
    for x, axis in ((COLUMN, -1), (COLUMN, 0), (SIGNED, 0), (SIGNED.astype(np.int32) * 2 - 1, 0)):
        out = getattr(jnp, name)(x, axis=axis, dtype=jnp.bool_)
        assert out.dtype == np.bool_
        assert np.asarray(out).tolist() == reference(x, axis=axis, dtype=np.bool_).tolist()


def test_cumulative_sum_and_prod_into_bool():
    out = jnp.cumulative_sum(COLUMN, axis=-1, dtype=jnp.bool_)
    assert np.asarray(out).tolist() == [[True], [True], [False]]
    out = jnp.cumulative_prod(SIGNED, dtype=jnp.bool_, include_initial=True)
    assert np.asarray(out).tolist() == [True, True, True, False, False]
    out = jnp.cumulative_sum(SIGNED, dtype=jnp.bool_, include_initial=True)
    assert np.asarray(out).tolist() == [False, True, True, True, True]


# ------------------------------------------------------------------ vecdot and friends
A = np.arange(8., dtype=np.float32).reshape(2, 2, 2)
B = np.arange(1., 5., dtype=np.float32).reshape(2, 2)
C = (np.arange(6) + 1j * np.arange(6)[::-1]).reshape(3, 2).astype(np.complex64)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_vecdot_contracts_axis_of_each_operand_then_broadcasts(axis):
    expected = np.vecdot(A, B, axis=axis)
    np.testing.assert_allclose(jnp.vecdot(A, B, axis=axis), expected)
    np.testing.assert_allclose(jnp.linalg.vecdot(A, B, axis=axis), expected)


def test_vecdot_conjugates_the_first_operand_and_keeps_precision():
    np.testing.assert_allclose(jnp.vecdot(C, C[::-1], axis=0), np.vecdot(C, C[::-1], axis=0), rtol=1e-6)
    half = jnp.vecdot(A.astype(np.float16), B.astype(np.float16), preferred_element_type=np.float32)
    assert half.dtype == np.float32
    with pytest.raises(ValueError, match="axes must match"):
        jnp.vecdot(A, np.ones((3, 2), np.float32), axis=0)


def test_matvec_and_vecmat_follow_numpy():
    np.testing.assert_allclose(jnp.matvec(A, B), np.matvec(A, B))
    np.testing.assert_allclose(jnp.matvec(A, B[0]), np.matvec(A, B[0]))
    np.testing.assert_allclose(jnp.vecmat(B, A), np.vecmat(B, A))
    np.testing.assert_allclose(jnp.vecmat(C, C.T), np.vecmat(C, C.T), rtol=1e-6)


# ------------------------------------------------------------------ det's gradient
@pytest.mark.parametrize("a", [np.array([[3.]]), np.array([[0.]]), np.array([[[2.]], [[-5.]]]),
                               np.array([[2., 1., 0., 1.], [1., 3., 1., 0.], [0., 1., 4., 1.], [1., 0., 1., 5.]])],
                         ids=["1x1", "1x1_singular", "batched_1x1", "4x4"])
def test_det_gradient_is_the_cofactor_matrix(a):
    a = a.astype(np.float32)
    grad = jaxprc.grad(lambda x: jnp.linalg.det(x).sum())(a)
    # d det / d a_ij is the (i, j) cofactor; for 1 x 1 matrices that is 1 whatever the entry.
    cofactors = np.ones_like(a) if a.shape[-1] == 1 else np.linalg.det(a)[..., None, None] * np.linalg.inv(a).swapaxes(-1, -2)
    np.testing.assert_allclose(grad, cofactors, rtol=1e-4)
    eps = 1e-3
    for index in np.ndindex(a.shape):
        step = np.zeros_like(a, dtype=np.float64)
        step[index] = eps
        fd = (np.linalg.det(a + step).sum() - np.linalg.det(a - step).sum()) / (2 * eps)
        assert abs(grad[index] - fd) < 1e-2 * max(1., abs(fd))


def test_det_and_slogdet_of_empty_matrices_have_zero_gradients():
    for shape in ((0, 0), (2, 0, 0)):
        a = np.zeros(shape, np.float32)
        assert jaxprc.grad(lambda x: jnp.linalg.det(x).sum())(a).shape == shape
        assert jaxprc.grad(lambda x: jnp.linalg.slogdet(x)[1].sum())(a).shape == shape
        assert jaxprc.jacfwd(jnp.linalg.det)(a).shape == shape[:-2] + shape
    np.testing.assert_allclose(jaxprc.grad(lambda x: jnp.linalg.slogdet(x)[1].sum())(np.array([[[2.]], [[-5.]]], np.float32)),
                               [[[0.5]], [[-0.2]]], rtol=1e-6)


def test_at_apply_forward_derivative_matches_finite_differences():
    # (JAX raises NotImplementedError here; jaxprc's loop of selects has a jvp.)
    f = lambda x: x.at[REPEATED].apply(jnp.sin)
    tangent = np.array([1., -1., 0.5, 2., 1.], np.float32)
    _, jvp = jaxprc.jvp(f, (X,), (tangent,))
    x64 = X.astype(np.float64)
    fd = (_ufunc_at(np.sin, x64 + 1e-6 * tangent, REPEATED) - _ufunc_at(np.sin, x64 - 1e-6 * tangent, REPEATED)) / 2e-6
    np.testing.assert_allclose(jvp, fd, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ reducers' argument checks (JAX's)
@pytest.mark.parametrize("call", [lambda x: jnp.sum(x, where=np.ones(3, np.int32)),
                                  lambda x: jnp.prod(x, where=np.ones(3, np.float32)),
                                  lambda x: jnp.mean(x, where=np.ones(3, np.int32)),
                                  lambda x: jnp.var(x, where=np.ones(3, np.int32)),
                                  lambda x: jnp.all(x, where=np.ones(3, np.int32)),
                                  lambda x: jnp.max(x, initial=np.ones(2, np.float32)),
                                  lambda x: jnp.sum(x, initial=np.ones(1, np.float32))])
def test_reducers_need_a_boolean_where_and_a_scalar_initial(call):
    with pytest.raises(ValueError, match="where must be None or a boolean array|initial value must be a scalar"):
        call(np.arange(6., dtype=np.float32).reshape(2, 3))
    assert float(jnp.sum(np.arange(6., dtype=np.float32), initial=np.float32(1.), where=np.arange(6) > 2)) == 13.
