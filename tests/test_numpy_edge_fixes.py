"""Regression tests for jax.numpy functions that differed from JAX at the edges (issue 18's edge
sweep, tests_oracle/test_edge_sweep.py compares them with JAX itself). Here: against numpy and
the mathematics, small shapes, a few compilations."""
import bisect

import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp


# ------------------------------------------------------------------ linspace and its users
def test_linspace_is_start_times_one_minus_t_plus_stop_times_t():
    # JAX's formula (so that the samples agree with JAX bit for bit), the endpoint exactly stop.
    start, stop = np.float32(-0.3), np.float32(0.7)
    out = np.asarray(jaxprc.jit(lambda a, b: jnp.linspace(a, b, 7))(start, stop))
    t = (np.arange(6, dtype=np.float32) / np.float32(6)).astype(np.float32)
    expected = np.append(start * (np.float32(1) - t) + stop * t, stop)
    np.testing.assert_allclose(out, expected, rtol=0, atol=np.spacing(np.float32(1)))
    assert out[0] == start and out[-1] == stop and out.dtype == np.float32
    np.testing.assert_allclose(jnp.linspace(0., 1., 5, endpoint=False), np.linspace(0, 1, 5, endpoint=False))


def test_linspace_degenerate_counts_and_axis():
    out, step = jnp.linspace(2., 5., 1, retstep=True)
    assert out.tolist() == [2.] and np.isnan(step) and step.shape == ()
    out, step = jnp.linspace(2., 5., 1, endpoint=False, retstep=True)
    assert out.tolist() == [2.] and float(step) == 3.
    out, step = jnp.linspace(np.zeros(2), np.ones(2), 0, retstep=True)
    assert out.shape == (0, 2) and np.isnan(step)
    out = jnp.linspace(np.zeros(2), np.array([1., 2.]), 3, axis=-1)
    np.testing.assert_allclose(out, np.linspace(np.zeros(2), np.array([1., 2.]), 3, axis=-1))
    assert jnp.linspace(0, 10, 4, dtype=np.int32).tolist() == [0, 3, 6, 10]
    assert jnp.linspace(np.float16(0), np.float16(1), 3).dtype == np.float16


def test_logspace_geomspace_and_histogram_edges_follow_linspace():
    np.testing.assert_allclose(jnp.logspace(0., 2., 5), np.logspace(0, 2, 5), rtol=1e-6)
    np.testing.assert_allclose(jnp.geomspace(-1., -1000., 4), np.geomspace(-1, -1000, 4), rtol=1e-6)
    a = np.array([0.1, -0.3, 0.5, 0.2], np.float32)
    np.testing.assert_array_equal(jnp.histogram_bin_edges(a, 4), jnp.linspace(a.min(), a.max(), 5))
    counts, edges = jnp.histogram(a, 4)
    np.testing.assert_array_equal(counts, np.histogram(a, 4)[0])


# ------------------------------------------------------------------ searchsorted
SORTED = np.array([1., 2., 2., 3., np.nan], np.float32)
QUERIES = np.array([0., 1., 2., 2.5, 3., 4., np.nan, -0.], np.float32)


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "compare_all", "sort"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_methods_agree_with_numpy_on_sorted_input(method, side):
    out = jnp.searchsorted(SORTED, QUERIES, side=side, method=method)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.searchsorted(SORTED, QUERIES, side=side))


def _bisect_reference(a, v, side):
    """JAX's 'scan' method: a plain binary search, which on unsorted input answers as bisect."""
    return [(bisect.bisect_left if side == "left" else bisect.bisect_right)(list(a), x) for x in v]


def test_searchsorted_binary_search_on_unsorted_edges():
    # Low-precision linspace edges need not be monotonic: the default method is a binary search
    # (as JAX's), whose answer differs from a count of the smaller elements.
    edges = np.array([88, 88, 88.5, 88, 89, 88.5, 88.5, 89, 89, 89, 89], np.float32)
    v = np.array([88.5, 88., 89., 87.], np.float32)
    for side in ("left", "right"):
        np.testing.assert_array_equal(jaxprc.jit(lambda v: jnp.searchsorted(edges, v, side=side))(v),
                                      _bisect_reference(edges, v, side))


def test_searchsorted_sorter_empty_and_errors():
    a = np.array([5., 1., 3.], np.float32)
    np.testing.assert_array_equal(jnp.searchsorted(a, np.array([2., 4.]), sorter=np.argsort(a)),
                                  np.searchsorted(a, [2., 4.], sorter=np.argsort(a)))
    assert jnp.searchsorted(np.zeros(0, np.float32), np.ones(3)).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.searchsorted(np.ones((2, 2)), 1.)
    with pytest.raises(ValueError, match="side"):
        jnp.searchsorted(a, 1., side="middle")
    with pytest.raises(ValueError, match="method"):
        jnp.searchsorted(a, 1., method="bogus")


def test_histogram_bins_in_bfloat16():
    x = np.array([88.5, 1.0, -2.5], ml_dtypes.bfloat16)
    counts, edges = jaxprc.jit(jaxprc.vmap(jnp.histogram))(x)
    for i in range(3):
        expected = np.bincount(np.clip(np.array(_bisect_reference(edges[i], x[i:i + 1], "right")) - 1, 0, 9),
                               minlength=10)
        np.testing.assert_array_equal(counts[i].astype(np.float32), expected)


# ------------------------------------------------------------------ cov
def test_cov_without_observations_is_nan():
    assert np.isnan(jnp.cov(np.zeros(0, np.float32)))
    out = jnp.cov(np.zeros((2, 0), np.float32))
    assert out.shape == (2, 2) and np.isnan(out).all()
    empty = jnp.cov(np.zeros((0, 3), np.float16))
    assert empty.shape == (0, 0) and empty.dtype == np.float32


def test_cov_against_numpy():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(3, 5)).astype(np.float32)
    fw, aw = np.array([1, 2, 1, 3, 1]), np.array([0.5, 1., 2, 1, 1], np.float32)
    for args, kw in [((m, m[0]), {}), ((m[:1],), dict(rowvar=False, bias=True)), ((m,), dict(fweights=fw, aweights=aw)),
                     ((m,), dict(aweights=aw, ddof=2))]:
        np.testing.assert_allclose(jnp.cov(*args, **kw), np.cov(*args, **kw), rtol=1e-5, atol=1e-6)
    assert jnp.cov(m, dtype=np.float16).dtype == np.float16
    with pytest.raises(ValueError, match="dtype"):
        jnp.cov(m, dtype=np.int32)


# ------------------------------------------------------------------ quantiles
def test_quantile_rejects_integer_q_and_empty_axes():
    with pytest.raises(TypeError, match="q must be a floating-point"):
        jnp.quantile(np.arange(3.), 1)
    np.testing.assert_allclose(jnp.percentile(np.arange(3), 50), 1.)
    with pytest.raises(TypeError, match="empty axis"):
        jnp.median(np.zeros(0, np.float32))
    with pytest.raises(IndexError, match="empty axis"):
        jnp.nanmedian(np.zeros((0, 3), np.float32), axis=0)
    assert jnp.nanmedian(np.zeros((0, 0), np.float32), axis=0).shape == (0,)
    assert jnp.median(np.zeros((3, 0), np.float32), axis=0).shape == (0,)


# ------------------------------------------------------------------ power
def test_pow_is_power_and_negative_integer_exponents_truncate():
    assert jnp.pow is jnp.power
    base = np.array([2, 1, -1, -1, 0, 3, -2, 3], np.int32)
    exp = np.array([-100, -3, -3, -2, -1, -1, -1, 4], np.int32)
    expected = [0, 1, -1, 1, 0, 0, 0, 81]
    assert jaxprc.jit(jnp.pow)(base, exp).tolist() == expected
    assert jnp.power(base.astype(np.int8), exp.astype(np.int8)).tolist() == expected


# ------------------------------------------------------------------ spacing
def test_spacing_is_piecewise_constant_so_its_derivative_is_zero():
    x = np.array([0., 1., -1., 1e-40, 3.4e38, np.inf], np.float32)
    d1 = jaxprc.jit(jaxprc.vmap(jaxprc.grad(jnp.spacing)))(x)
    d2 = jaxprc.jit(jaxprc.vmap(jaxprc.grad(jaxprc.grad(jnp.spacing))))(x)
    assert np.asarray(d1).tolist() == [0.] * 6 and np.asarray(d2).tolist() == [0.] * 6
    np.testing.assert_array_equal(jnp.spacing(x[:5]), np.spacing(x[:5]))


# ------------------------------------------------------------------ unravel_index
def test_unravel_index_is_divmod_arithmetic_with_clamping():
    # As JAX's: any real dtype, traced sizes, out-of-range indices clamped.
    idx = np.array([1, 3, 5, -1, -7, 100], np.int32)
    rows, cols = jnp.unravel_index(idx, (2, 3))
    assert rows.tolist() == [0, 1, 1, 1, 0, 1] and cols.tolist() == [1, 0, 2, 2, 0, 2]
    rows, cols = jnp.unravel_index(np.array([1.5, 4.]), (2, 3))
    assert rows.tolist() == [0., 1.] and cols.tolist() == [1.5, 1.]
    assert jnp.unravel_index(np.zeros(0, np.int32), (2, 3))[0].shape == (0,)
    out = jaxprc.jit(jaxprc.vmap(jnp.unravel_index))(np.arange(4, dtype=np.int32), np.array([2, 2, 3, 3], np.int32))
    assert np.asarray(out[0]).tolist() == [0, 1, 2, 2]
    with pytest.raises(ValueError, match="1D sequence"):
        jnp.unravel_index(1, ((2, 3),))


# ------------------------------------------------------------------ roll
def test_roll_by_traced_and_non_integer_shifts():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    roll = jaxprc.jit(lambda a, s: jnp.roll(a, s, (0, 1)))
    np.testing.assert_array_equal(roll(x, np.array([1, -3], np.int32)), np.roll(x, (1, -3), (0, 1)))
    np.testing.assert_array_equal(roll(x, (np.int32(2), np.int32(5))), np.roll(x, (2, 5), (0, 1)))
    np.testing.assert_array_equal(jnp.roll(x, np.array(2)), np.roll(x, 2))
    np.testing.assert_array_equal(jnp.roll(x, 1.7), np.roll(x, 1))        # truncated to int32, as JAX
    assert jnp.roll(np.zeros(0, np.float32), np.int32(3)).shape == (0,)
    # The shift is an index: no derivative flows to it; the array's cotangent is rolled back.
    da, ds = jaxprc.grad(lambda a, s: jnp.roll(a, s)[0, 0] * 3, (0, 1))(x, 2.)
    assert float(ds) == 0 and np.asarray(da).ravel().tolist() == np.roll(np.eye(1, 12, 0, np.float32) * 3, 10).ravel().tolist()
    with pytest.raises(ValueError, match="1D arrays"):
        jnp.roll(x, np.ones((2, 2), np.int32), (0, 1))


# ------------------------------------------------------------------ take
def test_take_modes_empty_indices_and_index_dtypes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, -1], [5, -9]], np.int32)
    np.testing.assert_array_equal(jnp.take(x, idx, 1, mode="wrap"), np.take(x, idx, 1, mode="wrap"))
    np.testing.assert_array_equal(jnp.take(x, np.array([[0, -1], [12, -13]]), None, None, "fill", fill_value=-1.),
                                  [[0, 11], [-1, -1]])
    # JAX's order of checks: an empty index array (of any dtype) gives an empty result first.
    assert jnp.take(x, np.zeros(0, np.float32)).shape == (0,)
    assert jnp.take(x, np.zeros((0, 2), np.int32), 1).shape == (3, 0, 2)
    assert jnp.take(np.zeros((2, 0)), np.zeros(0, np.int32), 1).shape == (2, 0)
    with pytest.raises(IndexError, match="empty axis"):
        jnp.take(np.zeros((2, 0)), np.int32(1), 1)
    with pytest.raises(ValueError, match="integer type"):
        jnp.take(x, np.float32(1))
    with pytest.raises(NotImplementedError, match="raise"):
        jnp.take(x, idx, mode="raise")
    with pytest.raises(ValueError, match="Invalid mode"):
        jnp.take(x, idx, mode="promise_in_bounds")
    with pytest.raises(TypeError, match="expected an array or a scalar"):   # as JAX: no lists
        jnp.take(x, [0, 1])


def test_a_list_as_the_whole_index_is_refused_as_in_jax():
    x = jnp.arange(5)
    for use in (lambda: x[[0, 3]], lambda: x.at[[1]].set(9), lambda: x.at[[1]].get()):
        with pytest.raises(TypeError, match="non-tuple sequence for multidimensional indexing"):
            use()
    np.testing.assert_array_equal(x[([0, 3],)], [0, 3])          # a list inside a tuple is an array
    np.testing.assert_array_equal(x[np.array([0, 3])], [0, 3])
