"""The rest of jax.numpy (issue 18) against jax.numpy: values, dtypes and weak types, eagerly and
under jit, gradients where JAX defines them, and the edges (empty arrays, NaN, ties, infinities).

Each case is ``(name, fn, *args)``; ``fn(np_module, *args)`` returns an array or a tuple, compared
under jit (and a sample eagerly). Cases whose result size depends on the data run eagerly only
(``EAGER_ONLY``), as in JAX.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

RNG = np.random.default_rng(18)
G = RNG.normal(size=(3, 4)).astype(np.float32)
G3 = RNG.normal(size=(2, 3, 4)).astype(np.float32)
V = RNG.normal(size=(9,)).astype(np.float32)
TIES = np.array([3., 1., 2., 3., 1., 5., 2., 2.], np.float32)
NANS = np.array([[1., np.nan, 2., -0., 0.], [np.nan, np.nan, np.nan, np.nan, np.nan],
                 [np.inf, -np.inf, 4., 4., np.nan]], np.float32)
EDGE = np.array([0., -0., 1., 3., -5.5, 1e-40, np.inf, -np.inf, np.nan, 3e38, 1e-45], np.float32)
NORMAL = EDGE[np.abs(EDGE) != np.float32(1e-40)][:-1]   # frexp of subnormals: JAX's is wrong, numpy's exact
I = np.array([[12, 0, -18, 7], [18, 0, 12, 0], [5, -5, 9, 6]], np.int32)
IV = np.array([3, 1, 2, 3, 1, 5, 2, 2], np.int32)
IW = np.array([2, 7, 5, 5, 0], np.int32)
E = np.zeros((0,), np.float32)
F16 = (RNG.normal(size=(7,)) * 10).astype(np.float16)
BF16 = RNG.normal(size=(6,)).astype(ml_dtypes.bfloat16)
U8 = np.array([[2, 7, 255], [0, 128, 1]], np.uint8)
XP = np.array([0., 1., 2., 2., 4.], np.float32)
FP = np.array([1., 3., 0., 5., -1.], np.float32)
XI = np.array([-1., 0., 0.5, 2., 3., 4., 5., np.nan], np.float32)
P = np.array([1., -2., 0.5, 3.], np.float32)

CASES = [
    # elementwise additions
    ("frexp", lambda m, x: m.frexp(x), NORMAL), ("frexp_f16", lambda m, x: m.frexp(x), F16),
    ("ldexp", lambda m, x: m.ldexp(x, np.int32(3)), EDGE),
    ("ldexp_range", lambda m, e: m.ldexp(np.float32(0.75), e), np.array([-150, -130, 0, 127, 128, -1000, 1000], np.int32)),
    ("ldexp_weak", lambda m: m.ldexp(1.5, 2)),
    ("spacing", lambda m, x: m.spacing(x), EDGE), ("spacing_f16", lambda m, x: m.spacing(x), F16),
    ("modf", lambda m, x: m.modf(x), EDGE), ("fabs_int", lambda m, x: m.fabs(x), I),
    ("gcd_lcm", lambda m, x: (m.gcd(x[0], x[1]), m.lcm(x[0], x[2]), m.gcd(x, 6)), I),
    ("i0", lambda m, x: m.i0(x * 4), G), ("i0_big", lambda m, x: m.i0(x), np.array([-30., -8., 0., 8.5, 40.], np.float32)),
    ("angle", lambda m, x: (m.angle(x + 1j * x[::-1]), m.angle(x, deg=True), m.angle(2.0)), G),
    ("complex_preds", lambda m, x: (m.iscomplex(x), m.isreal(x + 0j), m.sort_complex(x)), G),
    ("aliases", lambda m, x: (m.pow(x, 2), m.bitwise_invert(x), m.bitwise_left_shift(x, 1),
                              m.bitwise_right_shift(x, 2)), I),
    # order statistics
    ("quantile_methods", lambda m, x: tuple(m.quantile(x, np.float32(0.3), axis=1, method=k)
                                            for k in ("linear", "lower", "higher", "midpoint", "nearest",
                                                      "inverted_cdf")), G),
    ("quantile_vec_axes", lambda m, x: m.quantile(x, np.array([0., .25, 1.], np.float32), axis=(0, 2),
                                                  keepdims=True), G3),
    ("quantile_weights", lambda m, x, w: m.quantile(x, 0.4, axis=1, method="inverted_cdf", weights=w), G,
     np.array([1., 0., 2., .5], np.float32)),
    ("median_ties", lambda m, x: (m.median(x), m.median(x[:-1]), m.percentile(x, 50.)), TIES),
    ("median_nan", lambda m, x: (m.median(x, axis=1), m.nanmedian(x, axis=1), m.nanmedian(x, axis=0),
                                 m.nanquantile(x, 0.75, axis=1, method="nearest"),
                                 m.nanpercentile(x, np.array([10., 90.], np.float32), axis=1)), NANS),
    ("median_int", lambda m, x: (m.median(x, axis=0), m.percentile(x, 25, axis=1)), I),
    ("median_f16", lambda m, x: (m.median(x), m.quantile(x, 0.3)), F16),
    ("nan_reductions", lambda m, x: (m.nanvar(x, axis=1), m.nanstd(x, axis=1, ddof=1), m.nanargmax(x, axis=1),
                                     m.nanargmin(x, axis=1), m.nancumsum(x, axis=1), m.nancumprod(x)), NANS),
    ("nan_reductions_int", lambda m, x: (m.nanvar(x), m.nanargmax(x, axis=0), m.nancumsum(x, axis=1)), I),
    # summaries
    ("average", lambda m, x, w: (m.average(x, axis=1, weights=w), m.average(x, axis=0, returned=True),
                                 m.average(x, axis=1, weights=w, returned=True, keepdims=True)), G,
     np.array([1., 2., 0.5, 0.], np.float32)),
    ("average_int", lambda m, x: m.average(x), I),
    ("cov", lambda m, x: (m.cov(x), m.cov(x, rowvar=False, bias=True), m.cov(x[0], x[1], ddof=0),
                          m.cov(x, fweights=np.array([1, 2, 1, 3]), aweights=np.array([.5, 1., 2., 1.],
                                                                                      np.float32))), G),
    ("corrcoef", lambda m, x: (m.corrcoef(x), m.corrcoef(x[0], x[2]), m.corrcoef(x, rowvar=False)), G),
    ("cov_int", lambda m, x: m.cov(x), I),
    ("histogram", lambda m, x: (m.histogram(x, 4), m.histogram(x, np.array([-1., 0., .5, 2.], np.float32)),
                                m.histogram(x, 3, range=(-1., 1.), weights=m.abs(x), density=True),
                                m.histogram_bin_edges(x, 5)), V),
    ("histogram_const", lambda m, x: m.histogram(x * 0 + 1., 3), V),
    ("histogram2d", lambda m, x, y: m.histogram2d(x, y, bins=(3, 2)), V, V[::-1] * 2),
    ("histogramdd", lambda m, x: m.histogramdd(x, bins=[2, 3, 2], density=True), G3.reshape(8, 3)),
    ("bincount_length", lambda m, x: (m.bincount(x, length=4), m.bincount(x, weights=x * 0.5, length=7)),
     np.array([-1, 0, 3, 1, 1, 5, 9], np.int32)),
    ("digitize", lambda m, x: (m.digitize(x, np.array([-1., 0., 1.], np.float32)),
                               m.digitize(x, np.array([1., 0., -1.], np.float32), right=True),
                               m.digitize(x, np.zeros(0, np.float32))), V),
    # set operations with size (under jit too)
    ("unique_size", lambda m, x: (m.unique(x, True, True, True, size=6), m.unique(x, size=2, fill_value=-1.),
                                  m.unique(x, size=7, fill_value=0.)), TIES),
    ("unique_nan_size", lambda m, x: (m.unique(x, return_counts=True, size=6),
                                      m.unique(x, return_counts=True, equal_nan=False, size=8)),
     np.array([1., np.nan, 2., np.nan, 1., -0., 0.], np.float32)),
    ("unique_axis_size", lambda m, x: m.unique(x, True, True, True, axis=0, size=3),
     np.array([[1, 2], [3, 4], [1, 2], [0, 9]], np.int32)),
    ("unique_all_size", lambda m, x: tuple(m.unique_all(x, size=5)) + tuple(m.unique_counts(x, size=5)) +
     tuple(m.unique_inverse(x, size=5)) + (m.unique_values(x, size=5),), IV),
    ("setops_size", lambda m, x, y: (m.union1d(x, y, size=8), m.setdiff1d(x, y, size=4),
                                     m.setdiff1d(x, y, size=4, fill_value=-9), m.setxor1d(x, y, size=6),
                                     m.intersect1d(x, y, return_indices=True, size=3),
                                     m.intersect1d(x, y, size=3, fill_value=-1)), IV, IW),
    ("isin", lambda m, x, y: (m.isin(x, y), m.isin(x.reshape(2, 4), y, invert=True), m.isin(x, y[:0])), IV, IW),
    # editing
    ("insert_delete", lambda m, x: (m.insert(x, 1, 9., axis=1), m.insert(x, np.array([0, 2, 2]), np.array(
        [7., 8., 9.], np.float32), axis=1), m.delete(x, 1, axis=1), m.delete(x, np.array([0, 2]), axis=1),
        m.delete(x, np.array([0, 2]), axis=1, assume_unique_indices=True), m.append(x, x[:1], axis=0)), G),
    ("compress_extract", lambda m, x: (m.compress(np.array([True, False, True]), x, axis=0, size=3,
                                                  fill_value=-1), m.extract(x > 0, x, size=5)), G),
    ("put_place", lambda m, x: (m.place(x, x > 0, np.array([1., 2.], np.float32), inplace=False),
                                m.put(x, np.array([0, 5, 20]), np.array([-1., -2.], np.float32), inplace=False),
                                m.put(x, np.array([0, 5, 20]), 3., mode="wrap", inplace=False),
                                m.put_along_axis(x, np.array([[0], [1], [3]]), 99., axis=1, inplace=False),
                                m.fill_diagonal(x, 7., inplace=False)), G),
    ("shapes", lambda m, x: (m.resize(x, (5, 5)), m.rot90(x), m.rot90(x, 3, axes=(1, 0)), m.rollaxis(x, 1),
                             m.diagflat(x[:2, :2], -1), m.vander(x[0], 3), m.vander(x[0], increasing=True),
                             m.block([[x, x], [x, x]]), m.choose(np.array([0, 1, 2, 1]), list(x), mode="wrap"),
                             m.dsplit(x.reshape(3, 2, 2), 2)), G),
    ("cross", lambda m, x: (m.cross(x[:, :3], x[:, 1:]), m.cross(x[:, :2], x[:, 1:3]), m.cross(x[:, :2], x[:, 1:])), G),
    ("ediff1d", lambda m, x: m.ediff1d(x, to_begin=np.array([-5.], np.float32), to_end=9.), G),
    ("partition", lambda m, x: (m.partition(x, 3), m.argpartition(x, 3), m.partition(x, 0), m.argpartition(x, -1)),
     TIES),
    ("lexsort", lambda m, a, b: (m.lexsort((a, b)), m.lexsort((b, a), axis=0)), IV, TIES),
    ("packbits", lambda m, x: (m.packbits(x > 0), m.packbits(x > 0, axis=1, bitorder="little"),
                               m.unpackbits(m.packbits(x > 0)), m.unpackbits(U8, axis=0),
                               m.unpackbits(U8, count=11, bitorder="little")), G),
    ("matvec", lambda m, x: (m.matvec(x, x[0]), m.vecmat(x[:, 0], x), m.convolve(x[0], x[1, :3]),
                             m.convolve(x[0], x[1, :3], mode="same"), m.correlate(x[0], x[1, :2]),
                             m.correlate(x[0, :2], x[1], mode="full"), m.array_equiv(x[0], x)), G),
    ("ravel_unravel", lambda m, i, j: (m.ravel_multi_index((i, j), (3, 4), mode="clip"),
                                       m.ravel_multi_index((i, j), (3, 4), mode="wrap", order="F"),
                                       *m.unravel_index(i * 5 - 3, (3, 4))), IW, IV[:5]),
    # numerics
    ("interp", lambda m, x: (m.interp(x, XP, FP), m.interp(x, XP, FP, left=-9., right="extrapolate"),
                             m.interp(x, np.array([0., 1., 2.5], np.float32), np.array([1., 3., 0.], np.float32),
                                      period=3.)), XI),
    ("gradient", lambda m, x: (*m.gradient(x), m.gradient(x, 2., axis=1),
                               m.gradient(x[0], np.array([0., 1., 3., 4.], np.float32))), G),
    ("trapezoid", lambda m, x: (m.trapezoid(x), m.trapezoid(x, np.array([0., 1., 3., 4.], np.float32)),
                                m.trapezoid(x, dx=0.5, axis=0)), G),
    ("unwrap", lambda m, x: (m.unwrap(x * 4), m.unwrap(x * 4, discont=4., axis=0),
                             m.unwrap(np.array([0, 5, 11, 2, 9]), period=8)), G),
    ("spaces", lambda m: (m.logspace(0, 3, 4), m.logspace(0., 2., 5, base=2., endpoint=False),
                          m.geomspace(1, 1000, 4), m.geomspace(-1., -16., 5))),
    ("windows", lambda m: (m.bartlett(7), m.blackman(6), m.hamming(1), m.hanning(5), m.kaiser(8, 3.5),
                           m.kaiser(0, 1.))),
    # polynomials
    ("poly", lambda m, p: (m.poly(np.array([1., 2., -3.], np.float32)), m.polyval(p, np.array([0., 1., -2.5], np.float32)),
                           m.polyval(np.array([1, 2, 3]), 3), m.polyadd(p, p[:2]), m.polysub(p[:2], p),
                           m.polymul(p, p[:2]), *m.polydiv(p, p[:2]), m.polyder(p, 2), m.polyint(p, 2, k=np.array([1., 2.], np.float32))), P),
    ("polyfit", lambda m, x, y: (m.polyfit(x, y, 2), m.polyfit(x, y, 2, full=True), m.polyfit(x, y, 2, cov=True),
                                 m.polyfit(x, y, 2, w=x + 1), m.polyfit(x, m.stack([y, 2 * y], 1), 1, full=True)),
     np.linspace(0, 1, 7).astype(np.float32), np.linspace(0, 1, 7).astype(np.float32) ** 2 * 3 + np.sin(np.arange(7.)).astype(np.float32) * 0.1),
    ("roots", lambda m, p: (m.sort_complex(m.roots(p, strip_zeros=False)),
                            m.sort_complex(m.roots(m.concatenate([np.zeros(2, np.float32), p[:3], np.zeros(1, np.float32)]),
                                                   strip_zeros=False))), V[:6]),
    # functions of functions
    ("vectorize", lambda m, x: (m.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(x, x[0]),
                                m.vectorize(lambda a: (a.sum(), a * 2), signature="(n)->(),(n)")(x),
                                m.vectorize(lambda a, p: a ** p, excluded={1})(x, 2)), G),
    ("apply_along_axis", lambda m, x: (m.apply_along_axis(lambda v: v[::-1] * v.sum(), 0, x),
                                       m.apply_along_axis(lambda v: m.stack([v.min(), v.max()]), 1, x.reshape(3, 2, 2)),
                                       m.apply_over_axes(m.sum, x.reshape(3, 2, 2), [0, 2])), G),
    ("piecewise", lambda m, x: (m.piecewise(x, [x < -0.5, x > 0.5], [lambda v: -v, lambda v: v * 10, 7.]),
                                m.piecewise(x, [x < 0], [lambda v: v * v])), G),
    ("ufunc_methods", lambda m, x, i: (m.add.reduce(i, axis=1), m.multiply.reduce(x, axis=None, keepdims=True),
                                       m.maximum.reduce(x, axis=0), m.logical_and.reduce(x > -1, axis=1),
                                       m.bitwise_or.reduce(i, axis=0), m.subtract.reduce(x, axis=1),
                                       m.logaddexp.reduce(x, axis=1), m.add.accumulate(i, axis=1),
                                       m.maximum.accumulate(x), m.subtract.accumulate(x, axis=1),
                                       m.add.at(i[0], np.array([0, 0, 2]), 5, inplace=False),
                                       m.subtract.at(x[0], np.array([0, 0, 2]), np.array([1., 2., 3.], np.float32),
                                                     inplace=False),
                                       m.negative.at(x[0], np.array([1, 3]), inplace=False),
                                       m.add.outer(x[0], i[:, 0]), m.multiply.outer(i[0], i[:2]),
                                       m.subtract.reduceat(x, np.array([0, 3, 1]), axis=1)), G, I),
    ("frompyfunc", lambda m, x: (lambda h: (h.reduce(x, axis=0), h.accumulate(x, axis=1), h.outer(x[0], x[1]),
                                            h.at(x[0], np.array([1, 1]), 3., inplace=False)))(
        m.frompyfunc(lambda a, b: m.sqrt(a * a + b * b), 2, 1)), G),
    ("fromfunction", lambda m: m.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int)),
    ("bf16_median", lambda m, x: (m.median(x), m.nanvar(x), m.frexp(x)), BF16),
    ("edges", lambda m: (
        m.interp(np.array([-1., 0., 2.], np.float32), np.array([0.], np.float32), np.array([5.], np.float32)),
        m.interp(np.array([np.inf, -np.inf], np.float32), np.array([0., 1.], np.float32), np.array([5., 6.], np.float32)),
        m.cov(np.array([[1.], [2.]], np.float32)), m.corrcoef(np.array([1., 2., 4.], np.float32)),
        m.trapezoid(np.array([3.], np.float32)), m.gradient(np.array([1., 4.], np.float32)),
        m.average(np.array([1., 2.], np.float32), weights=np.zeros(2, np.float32)),
        m.spacing(np.array([np.inf, -np.inf, np.nan, 0.], np.float32)), m.frexp(np.array([1, 8, -3], np.int32)),
        m.ldexp(np.array([1, 8], np.int32), np.array([2, 3], np.int32)),
        m.i0(np.array([np.inf, -np.inf, np.nan], np.float32)),
        m.isin(np.array([np.nan, 1.], np.float32), np.array([np.nan, 1.], np.float32)),
        m.digitize(np.array([np.nan, np.inf, -np.inf], np.float32), np.array([0., 1.], np.float32)),
        m.angle(np.array([1, -1], np.int32)), m.nanargmax(np.array([np.nan, np.nan], np.float32)),
        m.unwrap(np.array([0, 7, 1], np.int32)), m.kaiser(4, 0.),
        m.cross(np.array([1., 2., 3.], np.float32), np.array([4., 5.], np.float32)),
        m.unpackbits(np.array([3], np.uint8), count=-2), m.histogram_bin_edges(np.array([1, 5], np.int32), 2),
        m.setdiff1d(np.array([1., 2.], np.float32), np.array([1.], np.float32), size=3),
        m.unique(np.array([np.inf, -np.inf, np.inf, 0.], np.float32), return_counts=True, size=4),
        m.bincount(np.zeros(0, np.int32), length=3), m.histogram(np.zeros(0, np.float32), 3, range=(0., 1.)))),
]

# Data-dependent result sizes: eager only (under jit they raise, tested below).
EAGER_ONLY = [
    ("index_tricks", lambda m: (m.r_[-1:5:1, 0, 0, np.array([1, 2, 3])], m.r_[-1.:1.:6j, 0],
                                m.r_["0,2,0", np.array([1, 2, 3]), np.array([4, 5, 6])],
                                m.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], m.mgrid[0:3, 0:2],
                                *m.ogrid[0:3, 0:2:0.5], *m.ix_(np.array([0, 1]), np.array([2, 3, 4])),
                                m.indices((2, 3)), *m.tril_indices(3, 1, 4), *m.triu_indices_from(G, 1),
                                *m.diag_indices(3, 3), *m.mask_indices(3, m.triu))),
    ("unique", lambda m, x: (m.unique(x), m.unique(x, return_index=True, return_inverse=True, return_counts=True)),
     TIES),
    ("unique_empty", lambda m, x: (m.unique(x), m.unique(x, size=2, fill_value=1.)), E),
    ("unique_2d", lambda m, x: (m.unique(x), m.unique(x, return_inverse=True)[1]), I),
    ("setops", lambda m, x, y: (m.union1d(x, y), m.setdiff1d(x, y), m.setxor1d(x, y),
                                m.intersect1d(x, y, return_indices=True),
                                m.intersect1d(np.unique(x), np.unique(y), assume_unique=True)), IV, IW),
    ("setops_empty", lambda m, x: (m.intersect1d(x, x), m.setxor1d(x, x), m.union1d(x, x)), E),
    ("bincount", lambda m, x: (m.bincount(x), m.bincount(x, minlength=9)), np.array([0, 3, 1, 1, 5], np.int32)),
    ("compress", lambda m, x: (m.compress(np.array([True, False, True]), x, axis=0), m.extract(x > 0, x)), G),
    ("roots_strip", lambda m, p: (m.sort_complex(m.roots(p)),
                                  m.sort_complex(m.roots(np.array([0., 0., 1., -3., 2., 0.], np.float32))),
                                  m.sort_complex(m.roots(np.array([1, 0, 1]))), m.roots(np.array([2.])),
                                  m.roots(np.zeros(3))), V[:5]),
    ("trim_zeros", lambda m, x: (m.trim_zeros(x), m.trim_zeros(x, "f"), m.trim_zeros(x * 0)),
     np.array([0., 0., 1., 2., 0., 3., 0.], np.float32)),
    ("nonzero_size", lambda m, x: (m.nonzero(x > 0, size=5, fill_value=-1), m.argwhere(x > 0, size=2),
                                   m.flatnonzero(x > 0, size=4)), G),
]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _weak(tree):
    return [bool(getattr(x, "weak_type", False)) for x in jax.tree_util.tree_leaves(tree)]


def _agree(ours, theirs, name):
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (name, ours.dtype, theirs.dtype, ours.shape,
                                                                       theirs.shape)
    if ours.dtype.kind in "fc" or ours.dtype == ml_dtypes.bfloat16:
        eps = float(ml_dtypes.finfo(ours.dtype).eps)
        np.testing.assert_allclose(ours.astype(np.complex128), theirs.astype(np.complex128), rtol=64 * eps,
                                   atol=64 * eps, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=name)


def _check(name, ours, theirs):
    o, t = jaxprc.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(o) == len(t), (name, len(o), len(t))
    for a, b in zip(o, t):
        _agree(np.asarray(a), np.asarray(b), name)
    assert [bool(getattr(a, "weak_type", False)) for a in o] == _weak(theirs), name


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("fn,args", [pytest.param(c[1], c[2:], id=c[0]) for c in CASES])
def test_jit_matches_jax(fn, args):
    _check("jit", jaxprc.jit(lambda *a: fn(xnp, *a))(*args), jax.jit(lambda *a: fn(jnp, *a))(*args))


# Eager evaluation compiles each primitive on its own: a sample of the cases, for speed.
EAGER_SAMPLE = ("frexp", "median_ties", "unique_size", "gcd_lcm", "vectorize", "ufunc_methods")


@pytest.mark.parametrize("fn,args", [pytest.param(c[1], c[2:], id=c[0]) for c in CASES if c[0] in EAGER_SAMPLE])
def test_eager_matches_jax(fn, args):
    _check("eager", fn(xnp, *args), fn(jnp, *args))


@pytest.mark.parametrize("fn,args", [pytest.param(c[1], c[2:], id=c[0]) for c in EAGER_ONLY])
def test_data_dependent_sizes_match_jax_eagerly(fn, args):
    _check("eager", fn(xnp, *args), fn(jnp, *args))


@pytest.mark.parametrize("fn", [lambda m, x: m.unique(x), lambda m, x: m.bincount(x.astype(int)),
                                lambda m, x: m.union1d(x, x), lambda m, x: m.compress(x > 0, x),
                                lambda m, x: m.nonzero(x)])
def test_data_dependent_sizes_need_size_under_jit(fn):
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda x: fn(jnp, x))(TIES)
    with pytest.raises(jaxprc.ConcretizationTypeError):
        jaxprc.jit(lambda x: fn(xnp, x))(TIES)


GRADS = [
    ("median", lambda m, x: m.median(x), TIES),
    ("median_axis", lambda m, x: m.median(x, axis=1).sum(), G),
    ("quantile", lambda m, x: m.quantile(x, np.array([0.1, 0.5, 0.9], np.float32), axis=0).sum(), G),
    ("percentile_nearest", lambda m, x: m.percentile(x, 30., method="nearest"), V),
    ("nanquantile", lambda m, x: m.nanquantile(x, 0.4), np.array([1., np.nan, 3., 2., np.nan], np.float32)),
    ("interp_x", lambda m, x: m.interp(x, XP, FP).sum(), XI[:-1]),
    ("interp_fp", lambda m, fp: m.interp(XI[:-1], XP, fp).sum(), FP),
    ("interp_xp", lambda m, xp: m.interp(np.array([0.5, 1.5, 3.], np.float32), xp, FP).sum(), XP),
    ("cov", lambda m, x: m.cov(x).sum(), G), ("corrcoef", lambda m, x: (m.corrcoef(x) ** 2).sum(), G),
    ("average", lambda m, x: m.average(x, axis=1, weights=np.array([1., 2., 0.5, 1.], np.float32)).sum(), G),
    ("nanvar", lambda m, x: m.nanstd(x).sum(), np.array([1., np.nan, 3., 2.], np.float32)),
    ("frexp_ldexp", lambda m, x: (m.frexp(x)[0] + m.ldexp(x, np.int32(3))).sum(), G),
    ("i0", lambda m, x: m.i0(x * 3).sum(), G),
    ("trapezoid", lambda m, x: m.trapezoid(x, dx=0.3), V), ("gradient", lambda m, x: (m.gradient(x) ** 2).sum(), V),
    ("polyval", lambda m, p: m.polyval(p, np.float32(1.5)), P),
    ("polyfit", lambda m, y: m.polyfit(np.linspace(0, 1, 9).astype(np.float32), y, 2).sum(), V),
    ("vectorize", lambda m, x: m.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(x, x[0]).sum(), G),
    ("piecewise", lambda m, x: m.piecewise(x, [x < 0], [lambda v: v * v, lambda v: 3 * v]).sum(), G),
    ("partition", lambda m, x: (m.partition(x, 4) * np.arange(9, dtype=np.float32)).sum(), V),
    ("sort_complex_angle", lambda m, x: m.angle(x + 2j).sum(), V),
    ("unwrap", lambda m, x: m.unwrap(x * 4).sum(), V),
]


@pytest.mark.parametrize("fn,x", [pytest.param(c[1], c[2], id=c[0]) for c in GRADS])
def test_gradients_match_jax(fn, x):
    theirs = jax.grad(lambda v: fn(jnp, v))(x)
    ours = jaxprc.grad(lambda v: fn(xnp, v))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-5, atol=2e-5)


@pytest.mark.x64
def test_x64_values_and_dtypes():
    x = RNG.normal(size=(9,))
    for fn in (lambda m, v: m.median(v), lambda m, v: m.quantile(v, 0.3), lambda m, v: m.frexp(v),
               lambda m, v: m.ldexp(v, 1000), lambda m, v: m.spacing(v), lambda m, v: m.i0(v * 10),
               lambda m, v: m.interp(v, np.sort(v), v ** 2), lambda m, v: m.histogram(v, 4),
               lambda m, v: m.unique((v * 2).round(), size=5), lambda m, v: m.cov(v.reshape(3, 3))):
        _check("x64", fn(xnp, x), fn(jnp, x))


# Names of jax.numpy that jaxprc.numpy leaves out, each with its reason. Any other missing name
# fails the test, so a new JAX name (or a removed jaxprc one) is noticed.
MISSING_ON_PURPOSE = {
    "fft": "the FFT family is its own issue (jaxprc.numpy.fft)",
    **{name: "a dtype jaxprc's IR does not hold yet (ml_dtypes' narrow floats and ints)" for name in (
        "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
        "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2",
        "int4", "uint1", "uint2", "uint4")},
}


def test_jax_numpy_public_names_are_covered():
    missing = {n for n in dir(jnp) if not n.startswith("_") and not hasattr(xnp, n)}
    assert missing - set(MISSING_ON_PURPOSE) == set(), "new gaps in jaxprc.numpy"
    public = {n for n in dir(jnp) if not n.startswith("_")}
    assert len(public - missing) / len(public) >= 0.95
