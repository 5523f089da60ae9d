"""The rest of jax.numpy (issue 18) against numpy: values under jit, vmap against a loop,
eager against jit, the static-size mechanism of data-dependent results, and user errors.

Comparisons run jitted (one XLA compilation per case; eager evaluation compiles each
primitive separately and is sampled only).
"""
import warnings

import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp

RNG = np.random.default_rng(1818)
G = RNG.normal(size=(3, 4)).astype(np.float32)
V = RNG.normal(size=(9,)).astype(np.float32)
TIES = np.array([3., 1., 2., 3., 1., 5., 2., 2.], np.float32)
NANS = np.array([[1., np.nan, 2., -0., 0.], [np.inf, -np.inf, 4., 4., np.nan]], np.float32)
IV = np.array([3, 1, 2, 3, 1, 5, 2, 2], np.int32)
IW = np.array([2, 7, 5, 5, 0], np.int32)
SUB = np.array([0., -0., 1., 3., -5.5, 1e-40, -1e-42, 1e-45, np.inf, np.nan, 3e38], np.float32)


def close(ours, expected, rtol=2e-5, atol=2e-5):
    ours, expected = np.asarray(ours), np.asarray(expected)
    assert ours.shape == expected.shape, (ours.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(ours.astype(np.complex128), expected.astype(np.complex128), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(ours, expected)


def tuples(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


# (name, jaxprc function of the arguments, numpy function of the arguments, arguments)
CASES = [
    ("quantile", lambda x: jnp.quantile(x, np.array([0.1, 0.4, 1.]), axis=1, method="nearest"),
     lambda x: np.quantile(x, [0.1, 0.4, 1.], axis=1, method="nearest"), G),
    ("median_nan", lambda x: (jnp.median(x, axis=1), jnp.nanmedian(x, axis=1), jnp.nanpercentile(x, 30., axis=1)),
     lambda x: (np.median(x, axis=1), np.nanmedian(x, axis=1), np.nanpercentile(x, 30., axis=1)), NANS),
    ("nan_reductions", lambda x: (jnp.nanvar(x, axis=1), jnp.nanstd(x, ddof=1), jnp.nancumsum(x, axis=1),
                                  jnp.nancumprod(x)),
     lambda x: (np.nanvar(x, axis=1), np.nanstd(x, ddof=1), np.nancumsum(x, axis=1), np.nancumprod(x)), NANS),
    ("cov_corrcoef", lambda x: (jnp.cov(x), jnp.corrcoef(x, rowvar=False), jnp.average(x, 1, np.arange(4.) + 1)),
     lambda x: (np.cov(x), np.corrcoef(x, rowvar=False), np.average(x, 1, np.arange(4.) + 1)), G),
    ("histogram", lambda x: (*jnp.histogram(x, 4), jnp.histogram(x, np.array([-1., 0., 2.]), density=True)[0],
                             jnp.digitize(x, np.array([-1., 0., 1.]))),
     lambda x: (*np.histogram(x, 4), np.histogram(x, [-1., 0., 2.], density=True)[0],
                np.digitize(x, [-1., 0., 1.])), V),
    ("bincount", lambda x: jnp.bincount(x, length=6), lambda x: np.bincount(x, minlength=6), IV),
    ("unique_size", lambda x: jnp.unique(x, return_index=True, return_inverse=True, return_counts=True, size=4),
     lambda x: np.unique(x, return_index=True, return_inverse=True, return_counts=True), IV),
    ("setops_size", lambda x, y: (jnp.intersect1d(x, y, size=2), jnp.setdiff1d(x, y, size=2),
                                  jnp.union1d(x, y, size=6), jnp.setxor1d(x, y, size=4), jnp.isin(x, y)),
     lambda x, y: (np.intersect1d(x, y), np.setdiff1d(x, y), np.union1d(x, y), np.setxor1d(x, y), np.isin(x, y)),
     IV, IW),
    # frexp reads subnormals exactly (from the bits), though XLA flushes them in float arithmetic
    ("frexp_exact", lambda x: (*jnp.frexp(x), jnp.spacing(x[2:5]), *jnp.modf(x[:5])),
     lambda x: (*np.frexp(x), np.spacing(x[2:5]), *np.modf(x[:5])), SUB),
    ("ldexp", lambda x, e: jnp.ldexp(x, e), lambda x, e: np.ldexp(x, e), np.array([1.5, -3., 0., np.inf, 7e-30], np.float32),
     np.array([2, -140, 1000, 3, 200], np.int32)),
    # |iinfo.min| is exact in the unsigned loop (JAX's signed loop never ends on it)
    ("gcd_int_min", lambda x, y: (jnp.gcd(x, y), jnp.lcm(x[1:], y[1:])), lambda x, y: (np.gcd(x, y), np.lcm(x[1:], y[1:])),
     np.array([-2 ** 31, 12, -8], np.int32), np.array([6, -18, 0], np.int32)),
    ("gcd_lcm_i0", lambda x, y: (jnp.gcd(x, y), jnp.lcm(x, y), jnp.i0(x.astype(np.float32) / 2)),
     lambda x, y: (np.gcd(x, y), np.lcm(x, y), np.i0(x / 2).astype(np.float32)), IV[:5] * 6, IW * 4),
    ("editing", lambda x: (jnp.insert(x, np.array([1, 1, 3]), -1., axis=1), jnp.delete(x, [0, 2], axis=1),
                           jnp.rot90(x, 3), jnp.resize(x, (2, 7)), jnp.vander(x[0], 3), jnp.cross(x[:, :3], x[:, 1:]),
                           jnp.packbits(x > 0, axis=1), jnp.lexsort((x[0], x[1] > 0))),
     lambda x: (np.insert(x, [1, 1, 3], -1., axis=1), np.delete(x, [0, 2], axis=1), np.rot90(x, 3),
                np.resize(x, (2, 7)), np.vander(x[0], 3), np.cross(x[:, :3], x[:, 1:]), np.packbits(x > 0, axis=1),
                np.lexsort((x[0], x[1] > 0))), G),
    ("numerics", lambda x: (jnp.interp(x, jnp.sort(x[:4]), x[4:8]), jnp.gradient(x), jnp.trapezoid(x),
                            jnp.unwrap(x * 5), jnp.convolve(x, x[:3]), jnp.correlate(x, x[:3], "same"),
                            jnp.polyval(x[:3], x), jnp.polyder(x[:4], 2), jnp.polymul(x[:3], x[3:5]),
                            jnp.polyfit(x, jnp.cos(x), 3), jnp.sort_complex(jnp.roots(x[:6], strip_zeros=False))),
     lambda x: (np.interp(x, np.sort(x[:4]), x[4:8]), np.gradient(x), np.trapezoid(x), np.unwrap(x * 5),
                np.convolve(x, x[:3]), np.correlate(x, x[:3], "same"), np.polyval(x[:3], x), np.polyder(x[:4], 2),
                np.polymul(x[:3], x[3:5]), np.polyfit(x, np.cos(x), 3), np.sort_complex(np.roots(x[:6]))), V),
    ("windows", lambda: (jnp.hanning(6), jnp.kaiser(7, 5.), jnp.bartlett(5), jnp.logspace(0, 2, 3), jnp.geomspace(2, 32, 5)),
     lambda: (np.hanning(6), np.kaiser(7, 5.), np.bartlett(5), np.logspace(0, 2, 3), np.geomspace(2, 32, 5))),
    ("functional", lambda x: (jnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(x, x[0]),
                              jnp.apply_along_axis(lambda v: v.max() - v, 1, x),
                              jnp.piecewise(x, [x < 0, x > 1], [lambda v: -v, 2., 0.5]),
                              jnp.add.reduce(x, axis=0), jnp.multiply.outer(x[0], x[1]),
                              jnp.frompyfunc(lambda a, b: a * b + 1, 2, 1).accumulate(x, axis=1)),
     lambda x: (np.einsum("ij,j->i", x, x[0]), np.apply_along_axis(lambda v: v.max() - v, 1, x),
                np.piecewise(x, [x < 0, x > 1], [lambda v: -v, 2., 0.5]), np.add.reduce(x, axis=0),
                np.multiply.outer(x[0], x[1]),
                np.frompyfunc(lambda a, b: a * b + 1, 2, 1).accumulate(x.astype(object), axis=1).astype(np.float32)),
     G),
]


@pytest.mark.parametrize("ours,theirs,args", [pytest.param(c[1], c[2], c[3:], id=c[0]) for c in CASES])
def test_jit_matches_numpy(ours, theirs, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = tuples(theirs(*args))
    got = tuples(jaxprc.jit(ours)(*args))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        close(g, e)


def test_eager_matches_jit():
    f = lambda x: (jnp.median(x), jnp.unique(x, size=3, fill_value=-1.), jnp.interp(0.5, x, x * 2))
    for e, j in zip(f(TIES), jaxprc.jit(f)(TIES)):
        close(e, j, rtol=0, atol=0)


def test_vmap_matches_loop():
    fns = [lambda r: jnp.median(r), lambda r: jnp.unique(r, size=4, fill_value=0.),
           lambda r: jnp.histogram(r, 3, range=(-1., 1.))[0], lambda r: jnp.interp(r, np.array([-1., 0., 2.]),
                                                                                  np.array([0., 1., 5.])),
           lambda r: jnp.setdiff1d(r, np.array([0.5]), size=4), lambda r: jnp.quantile(r, 0.3, method="lower"),
           lambda r: jnp.nonzero(r > 0, size=2)[0], lambda r: jnp.nanargmax(r)]
    rows = np.round(G * 2) / 2
    for f in fns:
        batched = jaxprc.vmap(f)(rows)
        for i, row in enumerate(rows):
            close(np.asarray(batched)[i], f(row), rtol=0, atol=0)


def test_median_gradient_is_finite_difference():
    x = np.array([3., 1., 2., 5.], np.float64)
    g = np.asarray(jaxprc.grad(lambda v: jnp.median(v))(x.astype(np.float32)))
    np.testing.assert_allclose(g, [0.5, 0., 0.5, 0.])     # the two middle values share the derivative


def test_interp_gradient_matches_slope():
    xp, fp = np.array([0., 1., 3.], np.float32), np.array([0., 2., 3.], np.float32)
    g = jaxprc.vmap(jaxprc.grad(lambda v: jnp.interp(v, xp, fp)))(np.array([0.5, 2., -1., 4.], np.float32))
    close(g, [2., 0.5, 0., 0.])


def test_size_makes_data_dependent_results_traceable():
    f = jaxprc.jit(lambda x: (jnp.unique(x, size=5), jnp.nonzero(x > 2, size=4, fill_value=-1)[0],
                              jnp.extract(x > 2, x, size=3), jnp.bincount(x.astype(int), length=6)))
    u, nz, ex, bc = f(TIES)
    close(u, [1., 2., 3., 5., 1.])
    close(nz, [0, 3, 5, -1])
    close(ex, [3., 3., 5.])
    close(bc, [0, 2, 3, 2, 0, 1])


@pytest.mark.parametrize("fn", [lambda x: jnp.unique(x), lambda x: jnp.bincount(x.astype(int)),
                                lambda x: jnp.setdiff1d(x, x), lambda x: jnp.trim_zeros(x),
                                lambda x: jnp.compress(x > 0, x)])
def test_data_dependent_sizes_without_size_raise_under_jit(fn):
    fn(TIES)      # fine eagerly
    with pytest.raises(jaxprc.ConcretizationTypeError):
        jaxprc.jit(fn)(TIES)


def test_user_errors_name_the_function():
    with pytest.raises(ValueError, match="method"):
        jnp.quantile(V, 0.5, method="bogus")
    with pytest.raises(ValueError, match="complex"):
        jnp.median(V + 1j)
    with pytest.raises(ValueError, match="must be integers"):
        jnp.gcd(V, V)
    with pytest.raises(ValueError, match="ldexp"):
        jnp.ldexp(V, V)
    with pytest.raises(ValueError, match="inplace"):
        jnp.put(V, np.array([0]), 1.)
    with pytest.raises(ValueError, match="signature"):
        jnp.vectorize(lambda a: a, signature="(n->()")(V)
    with pytest.raises(ValueError, match="weights should have the same shape"):
        jnp.histogram(V, weights=V[:3])
    with pytest.raises(TypeError, match="bincount"):
        jnp.bincount(V)


def test_ufunc_objects_and_names():
    assert isinstance(jnp.add, jnp.ufunc) and jnp.add.identity == 0 and jnp.add.nin == 2
    assert jnp.multiply(3, 4) == 12
    assert jnp.single == jnp.float32 and jnp.double == jnp.float64 and jnp.bool(1).dtype == np.bool_
    close(jnp.r_[1:3, np.array([7])], [1, 2, 7])
    close(jnp.c_[np.array([1, 2]), np.array([3, 4])], [[1, 3], [2, 4]])
    assert jnp.s_[1:2] == slice(1, 2) and jnp.index_exp[1] == (1,)
    close(jnp.mgrid[0:2, 0:3], np.mgrid[0:2, 0:3])
    close(jnp.fromfunction(lambda i, j: i * 3 + j, (2, 3), dtype=int), np.arange(6).reshape(2, 3))
    with pytest.raises(NotImplementedError):
        jnp.fromiter(iter([1, 2]), dtype=int)
