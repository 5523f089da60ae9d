"""Lowered primitives against JAX's lax on the same inputs, edge cases included.

Both sides run through XLA, so results agree to a few ulps; the point is the
semantics around the edges (NaN, infinities, out-of-range shifts, indices and
conversions) where numpy is no oracle.
"""
import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxprc import ir, runtime
from jaxprc.engine import lowering
from jaxprc.ir.core import PRIMITIVES as P, ShapedArray

pytestmark = pytest.mark.x64      # float64 and int64 edge cases on both sides

from jaxprc.lax import slicing as S
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)] + [BF16]
SIGNED = [np.dtype(t) for t in (np.int8, np.int32, np.int64)]
UNSIGNED = [np.dtype(t) for t in (np.uint8, np.uint32)]
EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.7, 1e-3, 1e30, -1e30, np.inf, -np.inf, np.nan, 2.5, -0.5, 7.0]
RNG = np.random.default_rng(1)


def floats(dtype, shape=(16,)):
    base = np.array(EDGE_FLOATS, np.float64)
    with np.errstate(over="ignore"):          # 1e30 is meant to overflow half precision to inf
        return np.resize(base, shape).astype(dtype)


def ints(dtype, shape=(16,)):
    info = np.iinfo(dtype)
    base = np.array([0, 1, -1, 2, 7, -8, info.min, info.max, 3, -3, 100, -100, 5, 63, 64, 31], np.int64)
    return np.resize(base, shape).astype(dtype)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def run_jaxprc(fn, *args):
    avals = [ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args]
    cj = ir.trace_to_jaxpr(lambda *xs: _as_list(fn(*xs)), avals)
    lowered = lowering.lower_jaxpr(cj)
    exe = runtime.compile(lowered.module, out_avals=lowered.out_avals)
    return [np.asarray(o) for o in exe(*args)]


def agree(ours, theirs, ulps=4):
    theirs = np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours.dtype, theirs.dtype, ours.shape)
    if ours.dtype.kind == "f" or ours.dtype == BF16:
        eps = float(ml_dtypes.finfo(ours.dtype).eps)
        np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=ulps * eps,
                                   atol=ulps * eps, equal_nan=True)
    else:
        np.testing.assert_array_equal(ours, theirs)


def compare(name, jax_fn, *args, **params):
    compare_all(name, jax_fn, [args], **params)


def compare_all(name, jax_fn, arg_tuples, **params):
    """One program per side applying the primitive to each tuple of arguments (fewer compiles)."""
    flat = [a for t in arg_tuples for a in t]
    bounds = np.cumsum([0] + [len(t) for t in arg_tuples])
    split = lambda xs: [xs[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    ours = run_jaxprc(lambda *xs: [P[name].bind(*t, **params) for t in split(xs)], *flat)
    theirs = jax.jit(lambda *xs: [jax_fn(*t) for t in split(xs)])(*flat)
    for o, t in zip(ours, theirs):
        agree(o, t)


UNARY = {"neg": lax.neg, "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil, "is_finite": lax.is_finite,
         "exp": lax.exp, "exp2": lax.exp2, "log": lax.log, "log1p": lax.log1p, "expm1": lax.expm1,
         "tanh": lax.tanh, "logistic": lax.logistic, "sin": lax.sin, "cos": lax.cos, "tan": lax.tan,
         "asin": lax.asin, "acos": lax.acos, "atan": lax.atan, "sinh": lax.sinh, "cosh": lax.cosh,
         "asinh": lax.asinh, "acosh": lax.acosh, "atanh": lax.atanh, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt,
         "cbrt": lax.cbrt, "square": lax.square, "abs": lax.abs, "erf": lax.erf, "erfc": lax.erfc,
         "erf_inv": lax.erf_inv, "lgamma": lax.lgamma, "digamma": lax.digamma}
INT_UNARY = {"neg": lax.neg, "sign": lax.sign, "abs": lax.abs, "square": lax.square, "not": lax.bitwise_not,
             "population_count": lax.population_count, "clz": lax.clz}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float_unary(name):
    unit = np.resize(np.array([0.0, -0.0, 0.5, -0.99, 0.999, 1.0, -1.0, 1.5, np.nan]), 16)
    xs = [unit.astype(d) if name in ("erf_inv", "atanh", "asin", "acos") else floats(d) for d in FLOATS]
    compare_all(name, UNARY[name], [(x,) for x in xs])


@pytest.mark.parametrize("name", sorted(INT_UNARY))
def test_int_unary(name):
    dtypes = SIGNED + (UNSIGNED if name != "abs" else [])   # lax.abs rejects unsigned
    compare_all(name, INT_UNARY[name], [(ints(d),) for d in dtypes])


@pytest.mark.parametrize("method", [0, 1])
def test_round(method):
    compare_all("round", lambda x: lax.round(x, method), [(floats(d),) for d in FLOATS], rounding_method=method)


@pytest.mark.parametrize("y", [0, 1, 2, 3, 7, -1, -3])
def test_integer_pow(y):
    xs = [floats(d) for d in FLOATS] + ([] if y < 0 else [ints(d) for d in SIGNED])
    compare_all("integer_pow", lambda a: lax.integer_pow(a, y), [(x,) for x in xs], y=y)


BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem, "pow": lax.pow,
          "max": lax.max, "min": lax.min, "atan2": lax.atan2, "nextafter": lax.nextafter,
          "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge}
INT_BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
              "max": lax.max, "min": lax.min, "and": lax.bitwise_and, "or": lax.bitwise_or,
              "xor": lax.bitwise_xor, "shift_left": lax.shift_left,
              "shift_right_arithmetic": lax.shift_right_arithmetic,
              "shift_right_logical": lax.shift_right_logical, "lt": lax.lt, "eq": lax.eq}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_float_binary(name):
    dtypes = [d for d in FLOATS if not (name == "nextafter" and d == BF16)]
    compare_all(name, BINARY[name], [(np.repeat(floats(d), 16), np.tile(np.roll(floats(d), 3), 16)) for d in dtypes])


@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_int_binary(name):
    # all pairs, incl. division by zero and out-of-range shifts
    compare_all(name, INT_BINARY[name], [(np.repeat(ints(d), 16), np.tile(ints(d), 16)) for d in SIGNED + UNSIGNED])


@pytest.mark.parametrize("src", FLOATS + SIGNED + UNSIGNED + [np.dtype(bool)], ids=str)
def test_convert_element_type(src):
    x = floats(src) if src in FLOATS else ints(src) if src != np.dtype(bool) else np.arange(16) % 3 == 0
    dsts = FLOATS + SIGNED + UNSIGNED + [np.dtype(bool)]
    ours = run_jaxprc(lambda a: [P["convert_element_type"].bind(a, new_dtype=d, weak_type=False) for d in dsts], x)
    theirs = jax.jit(lambda a: [lax.convert_element_type(a, d) for d in dsts])(x)
    for o, t in zip(ours, theirs):
        agree(o, t)


def test_bitcast_convert_type():
    x = floats(np.float32)
    for dst in (np.int32, np.uint8, np.int16, np.float32):
        compare("bitcast_convert_type", lambda a: lax.bitcast_convert_type(a, dst), x, new_dtype=np.dtype(dst))


def test_clamp_and_select_n():
    x = floats(np.float32)
    compare("clamp", lax.clamp, np.float32(-1), x, np.float32(2))
    which = (np.arange(16) % 3).astype(np.int32)
    cases = [x, -x, x * 2]
    compare("select_n", lax.select_n, which, *cases)
    compare("select_n", lax.select_n, which % 2 == 0, x, -x)


def _rows_dnums(jax_side):
    mod = lax if jax_side else S
    return mod.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))


@pytest.mark.parametrize("mode", ["CLIP", "FILL_OR_DROP", "PROMISE_IN_BOUNDS"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_, BF16], ids=str)
def test_gather(mode, dtype):
    x = (np.arange(15).reshape(5, 3) % 4).astype(dtype)
    idx = np.array([[0], [4], [5], [-1], [2], [-100], [3]], np.int32)
    if mode == "PROMISE_IN_BOUNDS":
        idx = idx[[0, 1, 4, 6]]
    jmode = getattr(lax.GatherScatterMode, mode)
    (ours,) = run_jaxprc(lambda a, i: P["gather"].bind(
        a, i, dimension_numbers=_rows_dnums(False), slice_sizes=(1, 3), indices_are_sorted=False,
        unique_indices=False, mode=S.GatherScatterMode[mode], fill_value=None), x, idx)
    theirs = jax.jit(lambda a, i: lax.gather(a, i, _rows_dnums(True), (1, 3), mode=jmode))(x, idx)
    agree(ours, theirs)


SCATTERS = {"scatter": lax.scatter, "scatter-add": lax.scatter_add, "scatter-mul": lax.scatter_mul,
            "scatter-min": lax.scatter_min, "scatter-max": lax.scatter_max}


@pytest.mark.parametrize("name", sorted(SCATTERS))
@pytest.mark.parametrize("mode", ["CLIP", "FILL_OR_DROP"])
def test_scatter(name, mode):
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[0], [4], [7], [-1], [2]], np.int32)
    upd = np.arange(15, dtype=np.float32).reshape(5, 3) * 10 - 30
    dn = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    (ours,) = run_jaxprc(lambda a, i, u: P[name].bind(a, i, u, dimension_numbers=S.ScatterDimensionNumbers(**dn),
                                                      indices_are_sorted=False, unique_indices=False,
                                                      mode=S.GatherScatterMode[mode]), x, idx, upd)
    theirs = jax.jit(lambda a, i, u: SCATTERS[name](a, i, u, lax.ScatterDimensionNumbers(**dn),
                                                    mode=getattr(lax.GatherScatterMode, mode)))(x, idx, upd)
    agree(ours, theirs)


def test_sort_argminmax_cumulative():
    x = floats(np.float32, (4, 16))
    x[1] = np.roll(x[1], 5)
    keys = (np.arange(64).reshape(4, 16) % 3).astype(np.int32)
    for dim in (0, 1):
        ours = run_jaxprc(lambda k, a: P["sort"].bind(k, a, dimension=dim, is_stable=True, num_keys=2), keys, x)
        theirs = jax.jit(lambda k, a: lax.sort((k, a), dimension=dim, is_stable=True, num_keys=2))(keys, x)
        for o, t in zip(ours, theirs):
            agree(o, t)
        (ours,) = run_jaxprc(lambda a: P["sort"].bind(a, dimension=dim, is_stable=True, num_keys=1), x)
        agree(ours, jax.jit(lambda a: lax.sort(a, dimension=dim))(x))
        for name, fn in (("argmax", lax.argmax), ("argmin", lax.argmin)):
            compare(name, lambda a: fn(a, dim, np.int32), x, axes=(dim,), index_dtype=np.dtype(np.int32))
        for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
            for rev in (False, True):
                xf = np.where(np.isfinite(x), np.clip(x, -4, 4), x) if name == "cumprod" else x
                (ours,) = run_jaxprc(lambda a: P[name].bind(a, axis=dim, reverse=rev), xf)
                agree(ours, jax.jit(lambda a: getattr(lax, name)(a, dim, rev))(xf), ulps=64)


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
def test_float_reductions(name):
    for dtype in FLOATS:
        x = floats(dtype, (4, 4))
        x = np.where(np.abs(x.astype(np.float64)) > 10, 1, x).astype(dtype) if name == "reduce_prod" else x
        for axes in ((0,), (0, 1)):
            compare(name, lambda a: getattr(lax, name)(a, axes), x, axes=axes)


@pytest.mark.parametrize("name", ["reduce_and", "reduce_or", "reduce_xor", "reduce_max", "reduce_min"])
def test_int_reductions(name):
    for dtype in SIGNED + UNSIGNED + [np.dtype(bool)]:
        x = ints(dtype, (4, 4)) if dtype != np.dtype(bool) else (np.arange(16).reshape(4, 4) % 3 == 0)
        compare(name, lambda a: getattr(lax, name)(a, (1,)), x, axes=(1,))


def test_dot_general_and_structural():
    a, b = RNG.normal(size=(2, 3, 4)).astype(np.float32), RNG.normal(size=(2, 4, 5)).astype(np.float32)
    dn = (((2,), (1,)), ((0,), (0,)))
    compare("dot_general", lambda x, y: lax.dot_general(x, y, dn), a, b, dimension_numbers=dn, precision=None,
            preferred_element_type=None)
    ai, bi = (a * 10).astype(np.int8), (b * 10).astype(np.int8)
    compare("dot_general", lambda x, y: lax.dot_general(x, y, dn, preferred_element_type=np.int32), ai, bi,
            dimension_numbers=dn, precision=None, preferred_element_type=np.dtype(np.int32))
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    cfg = ((-1, 2, 1), (1, -2, 0))
    compare("pad", lambda v, p: lax.pad(v, p, cfg), x, np.float32(9), padding_config=cfg)
    for s in ((-2, 1), (2, 7), (1, 1)):
        compare("dynamic_slice", lambda v, i, j: lax.dynamic_slice_p.bind(v, i, j, slice_sizes=(2, 2)), x,
                np.int32(s[0]), np.int32(s[1]), slice_sizes=(2, 2))
        compare("dynamic_update_slice", lambda v, u, i, j: lax.dynamic_update_slice_p.bind(v, u, i, j), x,
                np.ones((2, 2), np.float32), np.int32(s[0]), np.int32(s[1]))
