"""jaxprc.numpy (with linalg, fft) against jax.numpy over the documented keyword options, on generic
random inputs (non-symmetric, non-square, negative, integer, bool, complex, half precision).

A table of (name, call, args, kwargs): each case compares values, dtypes, weak types and shapes,
eagerly and under jit (array arguments traced, options static). Large option grids are sampled
deterministically with a fixed seed. Differentiable cases also compare a gradient.
"""
import itertools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4)).astype(np.float32)
V = _rng.standard_normal((4,)).astype(np.float32)
I = _rng.integers(-5, 5, (3, 4)).astype(np.int32)
BO = _rng.random((3, 4)) > 0.5
C = (_rng.standard_normal((3, 4)) + 1j * _rng.standard_normal((3, 4))).astype(np.complex64)
H = A.astype(np.float16)
S = _rng.standard_normal((4, 4)).astype(np.float32)           # square, not symmetric
ST = np.stack([S, 2 * S.T])


def _grid(grid, k, seed):
    """At most ``k`` option dicts from the product of ``grid`` (``...`` leaves an option out)."""
    keys = list(grid)
    combos = list(itertools.product(*(grid[key] for key in keys)))
    if len(combos) > k:
        combos = random.Random(seed).sample(combos, k)
    return [{key: v for key, v in zip(keys, vals) if v is not ...} for vals in combos]


CASES = []


def case(name, args, kwargs=None, grad=False, call=None):
    CASES.append((name, call, args, kwargs or {}, grad))


def fn(name):
    return lambda m: getattr(m, name) if "." not in name else getattr(getattr(m, name.split(".")[0]), name.split(".")[1])


# Reductions: axis (None, negative, tuple), keepdims, dtype, where, initial, promote_integers, ddof.
for i, n in enumerate(["sum", "prod", "max", "min", "mean", "var", "std", "nansum", "nanmean", "nanvar",
                       "nanmax", "argmax", "nanargmin", "ptp", "count_nonzero", "cumsum", "median", "any"]):
    grid = {"axis": [None, 0, -1, (0, 1)], "keepdims": [..., True]}
    if n in ("sum", "prod", "mean", "nansum", "cumsum"):
        grid["dtype"] = [..., jnp.float32, jnp.int32]
    if n in ("var", "std", "nanvar"):
        grid["ddof"] = [..., 1, 3]
    if n in ("sum", "prod", "max", "min", "mean", "var", "nansum", "nanmax", "any"):
        grid["where"] = [..., BO]
    if n in ("sum", "prod", "max", "min", "nanmax"):
        grid["initial"] = [..., 2]
    if n in ("sum", "prod"):
        grid["promote_integers"] = [..., False]
    if n in ("argmax", "nanargmin", "cumsum"):
        grid.pop("keepdims") if n == "cumsum" else None
        grid["axis"] = [None, 0, -1]
    xs = (A, I, BO, C, H) if n in ("sum", "prod") else (A, I, BO)
    for j, kw in enumerate(_grid(grid, 2, i)):
        x = xs[(i + j) % len(xs)]
        case(n, (x,), kw, grad=x is A and n in ("sum", "prod", "mean", "var", "max"))
case("sum", (BO,), {"promote_integers": False})      # regression: bool sums are integers
case("prod", (BO,), {"promote_integers": False, "axis": 0})

# Indexing with every mode and out-of-range / negative indices.
IDX = np.array([-5, -1, 0, 2, 7], np.int32)
for mode in ["clip", "wrap", "fill"]:
    for ax in [None, 0, -1]:
        case("take", (A, IDX), {"mode": mode, "axis": ax}, grad=True)
    case("choose", (np.array([0, 5, -2, 1]), [V, 2 * V, 3 * V]), {"mode": mode} if mode != "fill" else {})
for ax in [0, -1]:
    case("take_along_axis", (A, np.argsort(A, axis=ax)), {"axis": ax}, grad=True)
for mode in ["wrap", "clip"]:
    case("ravel_multi_index", ((np.array([0, 2, 5]), np.array([1, -1, 3])), (3, 4)), {"mode": mode})
for order in ["C", "F"]:                        # regression: order='F'
    case("reshape", (A, (2, 6)), {"order": order}, grad=True)
    case("ravel", (I,), {"order": order})

# Sorting and searching.
for j, kw in enumerate(_grid({"axis": [None, 0, -1], "descending": [False, True], "stable": [True]}, 3, 1)):
    case("sort", ((A, I, BO)[j],), kw)
    case("argsort", ((A, I, BO)[j],), kw)
for side in ["left", "right"]:
    case("searchsorted", (np.sort(V), A), {"side": side})
    case("searchsorted", (V, A), {"side": side, "sorter": np.argsort(V)})
    for method in ["scan", "compare_all"]:
        case("searchsorted", (np.array([1, 2, 2, 3, 5], np.int32), np.array([0, 2, 3, 6], np.int32)),
             {"side": side, "method": method})
    case("digitize", (A, np.array([1., 0., -1.])), {"right": side == "right"})

# Set operations.
U = np.array([[1, 2, 1, 0], [1, 2, 1, 0], [3, 3, 3, 3]], np.int32)
NANS = np.array([1., np.nan, np.nan, 2., 1.], np.float32)
for kw in _grid({"return_index": [False, True], "return_inverse": [False, True], "return_counts": [False, True],
                 "axis": [None, 0], "equal_nan": [False, True]}, 2, 2):
    case("unique", (U,), kw)
    case("unique", (NANS,), kw)
    case("unique", (np.array([3, 1, 1, 2], np.int32),), dict(kw, size=6, fill_value=-7))
A1, A2 = np.array([3, 1, 1, 2, 5], np.int32), np.array([2, 2, 5, 7], np.int32)
for f in ["union1d", "setdiff1d", "setxor1d", "intersect1d"]:
    case(f, (A1, A2))
    case(f, (A1, A2), {"size": 8, "fill_value": -1})
case("intersect1d", (A1, A2), {"return_indices": True})
case("isin", (I, np.array([1, 2, -3])), {"invert": True})

# Histograms and counting.
for kw in _grid({"bins": [3, np.array([-1., 0., .5, 2.])], "range": [..., (-1., 1.)], "density": [..., True],
                 "weights": [..., np.abs(A)]}, 6, 3):
    case("histogram", (A,), kw)
case("histogram2d", (V, V[::-1]), {"bins": [2, 3], "density": True, "weights": np.abs(V)})  # regression
case("histogramdd", (A[:, :2],), {"bins": 3, "weights": np.abs(A[:, 0])})                   # regression
case("bincount", (np.array([0, 1, 1, 5, 2]),), {"weights": np.arange(5.), "minlength": 8, "length": 9})
case("bincount", (np.array([0, 1, 1, 5, -2]),), {"length": 4})

# Differences, gradients, convolutions, interpolation.
for n, ax in [(0, 0), (0, -1), (1, -1), (2, 0), (5, -1)]:
    case("diff", (A,), {"n": n, "axis": ax}, grad=n in (0, 1))
    case("diff", (A,), {"n": n, "axis": ax, "prepend": 1., "append": V[:3, None] if ax == -1 else V[None]})  # regression n=0
case("ediff1d", (A,), {"to_end": np.array([1., 2.]), "to_begin": -1})
for eo in [1, 2]:      # JAX rejects edge_order=2: jaxprc must raise too
    case("gradient", (A,), {"edge_order": eo})
    case("gradient", (A, 2.0), {"edge_order": eo, "axis": 1})
    case("gradient", (V, np.array([0., 1., 3., 3.5])), {"edge_order": eo})
for mode in ["full", "same", "valid"]:
    case("convolve", (V, A[0, :3]), {"mode": mode}, grad=True)
    case("correlate", (A[0, :2], V), {"mode": mode})
    case("correlate", (C[0], C[1, :3]), {"mode": mode})
case("interp", (A, np.sort(V), 2 * V), {"left": -9., "right": 9.}, grad=True)
case("interp", (A, np.array([0., 1., 2., 3.]), 2 * V), {"period": 2.})

# Quantiles with every method; statistics with weights.
for i, meth in enumerate(["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
                          "hazen"]):   # hazen: JAX rejects it, so must jaxprc
    q = np.array([0., .3, 1.], np.float32)
    case("quantile", (A, q), {"method": meth, "axis": 1})
    case("nanquantile", (np.where(A > 1, np.nan, A), q), {"method": meth, "axis": 0, "keepdims": True})
for b in [False, True]:
    case("cov", (A,), {"rowvar": b, "bias": b})
    case("corrcoef", (C,), {"rowvar": b})
case("cov", (A,), {"ddof": 2, "fweights": np.array([1, 2, 1, 1]), "aweights": np.array([.5, 1, 2, 1])})
for ax, ret in [(None, False), (0, True), (-1, True)]:
    case("average", (A,), {"axis": ax, "returned": ret})
    case("average", (I,), {"axis": ax, "returned": ret})
case("average", (A,), {"axis": 1, "weights": np.abs(V), "keepdims": True}, grad=True)

# Shapes, triangles, padding.
for k in [-1, 2, 5]:
    case("tril", (A,), {"k": k})
    case("diag", (A,), {"k": k})
    case("trace", (I,), {"offset": k, "dtype": jnp.float32})
    case("rot90", (A,), {"k": k, "axes": (1, 0)})
    case("roll", (A, (k, 1)), {"axis": (1, 1)})
    case("tril_indices", (3, k, 4))
for mode in ["constant", "edge", "reflect", "symmetric", "wrap"]:   # jaxprc lacks the statistic/ramp modes
    case("pad", (A, ((1, 2), (3, 0))), {"mode": mode}, grad=mode == "reflect")
    case("pad", (V, 6), {"mode": mode})
for ax in [None, 1]:
    case("insert", (A, [0, -1, 2], 9.), {"axis": ax})
    case("delete", (A, slice(0, 3, 2)), {"axis": ax})
    case("repeat", (A, 2), {"axis": ax, "total_repeat_length": 7})      # regression: was ignored
    case("repeat", (A, np.array([2, 0, 1])), {"axis": 0, "total_repeat_length": 5})
    case("cumulative_sum", (I,), {"axis": 0 if ax is None else ax, "include_initial": True})
for dec in [-1, 0, 2]:
    case("round", (I * 37,), {"decimals": dec})
    case("round", (C * 100,), {"decimals": dec})
for x in (A, I, BO, H):
    case("clip", (x,), {"min": 2, "max": -1})
case("nan_to_num", (C,), {"nan": 1., "posinf": 2., "neginf": -3.})
X1 = np.array([1., np.nan, np.inf, 1e-9], np.float32)
X2 = np.array([1.0001, np.nan, np.inf, 0.], np.float32)
for en in [False, True]:
    case("isclose", (X1, X2), {"equal_nan": en, "rtol": 1e-3, "atol": 1e-8})
    case("array_equal", (X1, X1), {"equal_nan": en})

# linalg: every documented option, on non-symmetric / non-square / complex / batched inputs.
SPD = S @ S.T + np.eye(4, dtype=np.float32)
CS = (S + 1j * S.T).astype(np.complex64)
for kw in _grid({"ord": [None, 1, 2, -1, -2, np.inf, -np.inf, "fro", "nuc"], "axis": [None, (0, 1), (1, 0)],
                 "keepdims": [False, True]}, 6, 4):
    case("linalg.norm", (A,), kw, grad=kw["ord"] in (None, "fro", 1))
for kw in _grid({"ord": [None, 0, 1, 3, -1, np.inf, -np.inf], "axis": [None, 0, -1], "keepdims": [False, True]},
                4, 5):
    case("linalg.norm", (V if kw["axis"] is None else C,), kw)
for uplo, sym in itertools.product(["L", "U"], [False, True]):
    case("linalg.eigvalsh", (S,), {"UPLO": uplo})
    case("linalg.eigh", (CS,), {"UPLO": uplo, "symmetrize_input": sym}, call=lambda m: lambda a, **k: m.linalg.eigh(a, **k)[0])
case("linalg.cholesky", (SPD,), {"upper": True})
for kw in _grid({"full_matrices": [False, True], "compute_uv": [False, True]}, 4, 6):
    for x in (A, A.T, C):
        case("linalg.svd", (x,), dict(kw, compute_uv=False) if kw["compute_uv"] else kw,
             call=None if not kw["compute_uv"] else lambda m: lambda a, **k: m.linalg.svd(a, **k))
for mode in ["reduced", "r"]:
    case("linalg.qr", (A.T,), {"mode": mode}, call=lambda m: lambda a, **k: m.abs(m.linalg.qr(a, **k)[-1] if k["mode"] != "r" else m.linalg.qr(a, **k)))
for x in (A, S, C):
    case("linalg.pinv", (x,), {"rtol": .5})
    case("linalg.matrix_rank", (x,), {"tol": 1.0})
case("linalg.pinv", (SPD,), {"hermitian": True})
case("linalg.lstsq", (A, V[:3]), {"rcond": .5})
case("linalg.lstsq", (A.T, V), {"rcond": None})
for meth in ["lu", "qr"]:
    case("linalg.slogdet", (ST,), {"method": meth})
for n in [0, 3, -2]:
    case("linalg.matrix_power", (S,), {"n": n})
case("linalg.solve", (ST, np.stack([V, V])), grad=True)
case("linalg.vecdot", (C, C), {"axis": 0})
case("linalg.trace", (ST,), {"offset": 1, "dtype": jnp.int32})
case("linalg.diagonal", (ST,), {"offset": -5})
for p in [None, -2, np.inf]:
    case("linalg.cond", (S,), {"p": p})

# fft: n larger/smaller than the axis, negative axes, every norm; s/axes for the n-d transforms.
for i, f in enumerate(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]):
    for j, kw in enumerate(_grid({"n": [..., 2, 7], "axis": [0, -1], "norm": [..., "ortho", "forward"]}, 2, 10 + i)):
        x = (A, C, I)[j] if f not in ("rfft", "ihfft") else (A, I, A)[j]
        case("fft." + f, (x,), kw, grad=x is A and f in ("fft", "rfft"))
for i, f in enumerate(["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]):
    for kw in _grid({"s": [..., (2, 5)], "axes": [..., (1, 0), (-1, -2)], "norm": [..., "ortho", "forward"]},
                    1, 20 + i):
        case("fft." + f, (A if f.startswith("r") else C,), kw)
for f in ["fftfreq", "rfftfreq"]:
    case("fft." + f, (5,), {"d": .5})
case("fft.fftshift", (A,), {"axes": -1})


def _leaves(x):
    return jax.tree_util.tree_leaves(x) if not isinstance(x, (tuple, list)) else [
        leaf for item in x for leaf in _leaves(item)]


def _compare(got, want, where):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), where
    for g, w in zip(got, want):
        gn, wn = np.asarray(g), np.asarray(w)
        assert gn.shape == wn.shape and gn.dtype == wn.dtype, (where, gn.shape, gn.dtype, wn.shape, wn.dtype)
        assert getattr(g, "weak_type", False) == getattr(w, "weak_type", False), (where, "weak type")
        tol = 2e-2 if gn.dtype in (np.float16, jnp.bfloat16) else 2e-4
        if gn.dtype.kind in "fc":
            np.testing.assert_allclose(gn.astype(np.complex128), wn.astype(np.complex128), rtol=tol, atol=tol,
                                       equal_nan=True, err_msg=str(where))
        else:
            np.testing.assert_array_equal(gn, wn, err_msg=str(where))


def _split(args):
    """Array arguments are traced under jit; everything else stays static."""
    pos = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    def rebuild(traced):
        out = list(args)
        for i, t in zip(pos, traced):
            out[i] = t
        return out
    return [args[i] for i in pos], rebuild


_DATA_DEPENDENT_SHAPE = {"unique", "union1d", "setdiff1d", "setxor1d", "intersect1d"}


@pytest.mark.sample(3)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("index,name,call,args,kwargs,grad", [(i,) + c for i, c in enumerate(CASES)],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_option(index, name, call, args, kwargs, grad):
    get = call or (lambda m: fn(name)(m))
    try:
        want = get(jnp)(*args, **kwargs)
    except (ValueError, TypeError, NotImplementedError):     # an option JAX rejects: jaxprc must too
        with pytest.raises(Exception):
            get(xnp)(*args, **kwargs)
        return
    got = get(xnp)(*args, **kwargs)
    _compare(got, want, (name, kwargs, "eager"))
    if index % 3 == 0 and (name not in _DATA_DEPENDENT_SHAPE or "size" in kwargs):   # jit: a third of the cases
        traced, rebuild = _split(args)
        got_jit = jaxprc.jit(lambda *t: get(xnp)(*rebuild(t), **kwargs))(*traced)
        _compare(got_jit, want, (name, kwargs, "jit"))
    if grad and np.asarray(_leaves(want)[0]).dtype.kind == "f":     # integer dtype= options: no gradient
        def loss(m):
            return lambda x: m.sum(m.real(get(m)(x, *args[1:], **kwargs)) ** 2)
        _compare(jaxprc.grad(loss(xnp))(args[0]), jax.grad(loss(jnp))(args[0]), (name, kwargs, "grad"))


def test_var_integer_dtype_as_jax():
    """jnp.var(a, dtype=int32) computes the mean and the squares in integers, then promotes the
    result with NaN (float32, weak): jaxprc follows JAX's integer arithmetic, value and type."""
    a = np.arange(12., dtype=np.float32).reshape(3, 4)
    want, got = jnp.var(a, dtype=jnp.int32), xnp.var(a, dtype=xnp.int32)
    assert (got.dtype, got.weak_type, float(got)) == (want.dtype, want.weak_type, float(want))


def test_intersect1d_assume_unique_with_duplicates_unspecified():
    """Unspecified, not compared: intersect1d(assume_unique=True, return_indices=True) on inputs
    that are not unique breaks the documented precondition; JAX and jaxprc pick different indices."""
    a1, a2 = np.array([3, 1, 1, 2, 5], np.int32), np.array([2, 2, 5, 7], np.int32)
    want = jnp.intersect1d(a1, a2, assume_unique=False, return_indices=True)
    got = xnp.intersect1d(a1, a2, assume_unique=False, return_indices=True)
    _compare(got, want, "intersect1d")


def test_clip_complex_known_difference():
    """Known difference, deliberate: JAX rejects complex clip; jaxprc orders complex values
    lexicographically (real part, then imaginary), as numpy.clip does."""
    c = np.array([1 + 5j, -2 + 1j, 3 - 1j, .5 + 0j], np.complex64)
    np.testing.assert_array_equal(np.asarray(xnp.clip(c, min=0, max=2)), np.clip(c, 0, 2))
    with pytest.raises(ValueError):
        jnp.clip(c, min=0, max=2)
