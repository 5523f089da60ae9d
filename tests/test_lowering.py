"""Lowering to StableHLO: every primitive lowered, compiled by XLA and checked against numpy.

Programs are built by binding primitives directly under ``trace_to_jaxpr``,
so the tests depend only on the primitives' contract (docs/primitives.md).
Compiled executables are cached by module text across tests.
"""
import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

from jaxprc import ir, runtime
from jaxprc.engine import lowering
from jaxprc.lax import reductions
from jaxprc.lax import slicing
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, PRIMITIVES as P, Primitive, ShapedArray

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = [F16, BF16, F32, F64]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64)]
BOOL = np.dtype(np.bool_)
SHAPES = [(), (0,), (2, 3)]
RNG = np.random.default_rng(0)

_EXECUTABLES: dict[str, runtime.Executable] = {}
_CHECKED: set[str] = set()    # primitives run by run_jaxpr, whose results every test here checks


def _record(jaxpr):
    for e in jaxpr.eqns:
        _CHECKED.add(e.primitive.name)
        for sub_cj in ir.core.subjaxprs(e):
            _record(sub_cj.jaxpr)


def run_jaxpr(cj: ClosedJaxpr, *args):
    _record(cj.jaxpr)
    lowered = lowering.lower_jaxpr(cj)
    text = lowered.as_text()
    exe = _EXECUTABLES.get(text)
    if exe is None:
        exe = runtime.compile(lowered.module, out_avals=lowered.out_avals,
                              host_callbacks=lowered.host_callbacks, runtime_token=lowered.runtime_token)
        if not lowered.host_callbacks:     # the text names callbacks by index only
            _EXECUTABLES[text] = exe
    return [np.asarray(o) for o in exe(*args)]


def trace(fn, *args):
    avals = [ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args]
    return ir.trace_to_jaxpr(lambda *xs: _as_list(fn(*xs)), avals)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def run(fn, *args):
    return run_jaxpr(trace(fn, *args), *args)


def tol(dtype):
    return {F16: 2e-3, BF16: 1.6e-2, F32: 2e-6, F64: 1e-13}.get(np.dtype(dtype), 0)


def check(got, want, dtype, scale=4):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if dt.is_float(dtype):
        t = tol(dtype) * scale
        np.testing.assert_allclose(got.astype(F64), np.asarray(want, F64), rtol=t, atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, np.asarray(want).astype(dtype))


def sample(shape, dtype, domain="any"):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return RNG.integers(0, 2, shape).astype(bool)
    if dt.is_int(dtype):
        lo, hi = (0, 12) if dt.is_unsigned(dtype) else (-6, 7)
        return RNG.integers(lo, hi, shape).astype(dtype)
    lo, hi = {"any": (-3, 3), "pos": (0.1, 3), "unit": (-0.9, 0.9), "ge1": (1.05, 3), "small": (-1.2, 1.2)}[domain]
    return RNG.uniform(lo, hi, shape).astype(dtype)


# ---------------------------------------------------------------- elementwise

def _round_afz(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


UNARY = {   # name: (numpy reference, dtypes, domain, params)
    "neg": (np.negative, FLOATS + INTS[:4], "any", {}),
    "sign": (np.sign, FLOATS + INTS, "any", {}),
    "floor": (np.floor, FLOATS, "any", {}),
    "ceil": (np.ceil, FLOATS, "any", {}),
    "exp": (np.exp, FLOATS, "any", {}),
    "exp2": (np.exp2, FLOATS, "any", {}),
    "log": (np.log, FLOATS, "pos", {}),
    "log1p": (np.log1p, FLOATS, "pos", {}),
    "expm1": (np.expm1, FLOATS, "any", {}),
    "tanh": (np.tanh, FLOATS, "any", {}),
    "logistic": (sp.expit, FLOATS, "any", {}),
    "sin": (np.sin, FLOATS, "any", {}),
    "cos": (np.cos, FLOATS, "any", {}),
    "tan": (np.tan, FLOATS, "small", {}),
    "asin": (np.arcsin, FLOATS, "unit", {}),
    "acos": (np.arccos, FLOATS, "unit", {}),
    "atan": (np.arctan, FLOATS, "any", {}),
    "sinh": (np.sinh, FLOATS, "any", {}),
    "cosh": (np.cosh, FLOATS, "any", {}),
    "asinh": (np.arcsinh, FLOATS, "any", {}),
    "acosh": (np.arccosh, FLOATS, "ge1", {}),
    "atanh": (np.arctanh, FLOATS, "unit", {}),
    "sqrt": (np.sqrt, FLOATS, "pos", {}),
    "rsqrt": (lambda x: 1 / np.sqrt(x), FLOATS, "pos", {}),
    "cbrt": (np.cbrt, FLOATS, "any", {}),
    "square": (np.square, FLOATS + INTS, "any", {}),
    "abs": (np.abs, FLOATS + INTS, "any", {}),
    "erf": (sp.erf, FLOATS, "any", {}),
    "erfc": (sp.erfc, FLOATS, "any", {}),
    "erf_inv": (sp.erfinv, FLOATS, "unit", {}),
    "lgamma": (sp.gammaln, FLOATS, "pos", {}),
    "digamma": (sp.digamma, FLOATS, "pos", {}),
    "not": (np.invert, INTS + [BOOL], "any", {}),
    "population_count": (lambda x: np.bitwise_count(x.view(f"u{x.dtype.itemsize}")), INTS, "any", {}),
    "stop_gradient": (lambda x: x, FLOATS + INTS + [BOOL], "any", {}),
    "copy": (lambda x: x, FLOATS + INTS + [BOOL], "any", {}),
    "name": (lambda x: x, FLOATS + INTS + [BOOL], "any", {"name": "tag"}),
    "round": (_round_afz, FLOATS, "any", {"rounding_method": 0}),
    "bessel_i0e": (sp.i0e, FLOATS, "any", {}),
    "bessel_i1e": (sp.i1e, FLOATS, "any", {}),
}


def _numpy_ref(fn, xs, dtype):
    """The reference in float64 (or the integer dtype), cast to the result dtype."""
    wide = [x.astype(F64) if dt.is_float(dtype) else x for x in xs]
    with np.errstate(all="ignore"):
        return np.asarray(fn(*wide))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    ref, dtypes, domain, params = UNARY[name]
    prim = P[name]
    xs = [sample(s, dtype, domain) for dtype in dtypes for s in SHAPES]   # one program for all
    outs = run(lambda *a: [prim.bind(x, **params) for x in a], *xs)
    for x, got in zip(xs, outs):
        want = _numpy_ref(ref, [x], x.dtype)
        check(got, want.astype(got.dtype), x.dtype, scale=8)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_parts(dtype):
    z = (sample((2, 3), F64) + 1j * sample((2, 3), F64)).astype(dtype)
    real, imag, conj = run(lambda a: [P[n].bind(a) for n in ("real", "imag", "conj")], z)
    part = F32 if dtype == np.complex64 else F64
    check(real, z.real, part)
    check(imag, z.imag, part)
    np.testing.assert_array_equal(conj, np.conj(z))
    assert conj.dtype == dtype


@pytest.mark.parametrize("part", [F32, F64])
def test_complex_from_parts_keeps_infinities(part):
    x = np.concatenate([sample((4,), part), np.array([np.inf, -np.inf, np.nan, 0.0], part)])
    y = np.concatenate([sample((4,), part), np.array([np.nan, 1.0, -np.inf, np.inf], part)])
    z, = run(lambda a, b: P["complex"].bind(a, b), x, y)
    assert z.dtype == (np.complex64 if part == F32 else np.complex128)
    np.testing.assert_array_equal(z.real, x)
    np.testing.assert_array_equal(z.imag, y)


def test_round_to_even_and_halves():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], F32)
    afz, even = run(lambda a: [P["round"].bind(a, rounding_method=0), P["round"].bind(a, rounding_method=1)], x)
    check(afz, _round_afz(x), F32)
    check(even, np.round(x), F32)


def test_is_finite_and_comparisons_with_nan():
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -0.0], F32)
    y = np.array([1.0, np.inf, 0.0, np.nan, -0.0, 1.0], F32)
    names = ["is_finite", "eq", "ne", "lt", "le", "gt", "ge"]
    outs = run(lambda a, b: [P["is_finite"].bind(a)] + [P[n].bind(a, b) for n in names[1:]], x, y)
    refs = [np.isfinite(x), x == y, x != y, x < y, x <= y, x > y, x >= y]
    for got, want in zip(outs, refs):
        check(got, want, BOOL)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint64, np.bool_])
def test_integer_comparisons(dtype):
    dtype = np.dtype(dtype)
    x, y = sample((4, 3), dtype), sample((4, 3), dtype)
    ops = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
    outs = run(lambda a, b: [P[n].bind(a, b) for n in ops], x, y)
    for got, ref in zip(outs, ops.values()):
        check(got, ref(x, y), BOOL)


def _int_div(x, y):
    return np.trunc(x.astype(np.float64) / y).astype(x.dtype) if dt.is_int(x.dtype) else x / y


BINARY = {   # name: (numpy reference, dtypes)
    "add": (np.add, FLOATS + INTS),
    "sub": (np.subtract, FLOATS + INTS),
    "mul": (np.multiply, FLOATS + INTS),
    "div": (_int_div, FLOATS + INTS),
    "rem": (np.fmod, FLOATS + INTS),
    "pow": (np.power, FLOATS),
    "max": (np.maximum, FLOATS + INTS + [BOOL]),
    "min": (np.minimum, FLOATS + INTS + [BOOL]),
    "atan2": (np.arctan2, FLOATS),
    "nextafter": (np.nextafter, [F16, F32, F64]),
    "and": (np.bitwise_and, INTS + [BOOL]),
    "or": (np.bitwise_or, INTS + [BOOL]),
    "xor": (np.bitwise_xor, INTS + [BOOL]),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    ref, dtypes = BINARY[name]
    prim = P[name]
    pairs = [(sample(s, dtype, "pos" if name == "pow" else "any"), sample(s, dtype, "any"))
             for dtype in dtypes for s in SHAPES]
    if name in ("div", "rem"):       # integer division by zero is tested against JAX (tests_oracle)
        pairs = [(x, np.where(y == 0, 3, y).astype(y.dtype)) for x, y in pairs]
    args = [a for p in pairs for a in p]
    outs = run(lambda *a: [prim.bind(a[i], a[i + 1]) for i in range(0, len(a), 2)], *args)
    for (x, y), got in zip(pairs, outs):
        want = np.nextafter(x, y) if name == "nextafter" else _numpy_ref(ref, [x, y], x.dtype)
        check(got, np.asarray(want).astype(got.dtype), x.dtype)


SPECIAL = {   # name: (scipy reference, operand samples from sample(shape, dtype, domain))
    "igamma": (sp.gammainc, ("pos", "pos")),
    "igammac": (sp.gammaincc, ("pos", "pos")),
    "igamma_grad_a": (lambda a, x: (sp.gammainc(a + 1e-5, x) - sp.gammainc(a - 1e-5, x)) / 2e-5,
                      ("pos", "pos")),     # a central difference: good to ~1e-9
    "regularized_incomplete_beta": (sp.betainc, ("pos", "pos", "unit")),
    "zeta": (sp.zeta, ("ge1", "pos")),
    "polygamma": (sp.polygamma, ("order", "pos")),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_functions(name):
    ref, domains = SPECIAL[name]
    dtypes = [F16, F32, F64]     # bfloat16 goes the float16 way (through float32)
    xs = [[RNG.integers(0, 4, (2, 3)).astype(dtype) if d == "order" else np.abs(sample((2, 3), dtype, d))
           for d in domains] for dtype in dtypes]
    outs = run(lambda *a: [P[name].bind(*a[i:i + len(domains)]) for i in range(0, len(a), len(domains))],
               *[x for group in xs for x in group])
    for dtype, group, got in zip(dtypes, xs, outs):
        want = _numpy_ref(ref, group, dtype)
        check(got, want.astype(got.dtype), dtype, scale=5e4 if name == "igamma_grad_a" else 50)


def test_max_min_propagate_nan():
    x = np.array([np.nan, 1.0, 2.0], F32)
    y = np.array([0.0, np.nan, 1.0], F32)
    mx, mn = run(lambda a, b: [P["max"].bind(a, b), P["min"].bind(a, b)], x, y)
    check(mx, np.maximum(x, y), F32)
    check(mn, np.minimum(x, y), F32)


def _shift_ref(name, x, s):
    """JAX's shift semantics: out-of-range amounts give 0 (or the sign fill for arithmetic shifts)."""
    bits = x.dtype.itemsize * 8
    unsigned = x.view(f"u{x.dtype.itemsize}")
    signed = x.view(f"i{x.dtype.itemsize}")
    amount = s.astype(np.int64)
    in_range = (amount >= 0) & (amount < bits)
    a = np.where(in_range, amount, 0).astype(unsigned.dtype)
    if name == "shift_left":
        out = np.where(in_range, unsigned << a, 0).astype(unsigned.dtype)
    elif name == "shift_right_logical":
        out = np.where(in_range, unsigned >> a, 0).astype(unsigned.dtype)
    else:
        out = (signed >> np.where(in_range, amount, bits - 1).astype(signed.dtype)).view(unsigned.dtype)
    return out.view(x.dtype)


@pytest.mark.parametrize("name", ["shift_left", "shift_right_logical", "shift_right_arithmetic"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32, np.int64])
def test_shifts_including_out_of_range(name, dtype):
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    x = np.array([1, 5, -3, 127, -128, 0, 7, -1, 2, 9][: 10], np.int64).astype(dtype)
    amounts = [0, 1, 3, bits - 1, bits, bits + 3, -1 if dt.is_signed(dtype) else 2 * bits, 2, 200 % 256, 4]
    s = np.array(amounts, np.int64).astype(dtype)
    (got,) = run(lambda a, b: P[name].bind(a, b), x, s)
    check(got, _shift_ref(name, x, s), dtype)


def test_clz():
    for dtype in (np.int8, np.int32, np.uint8, np.uint64):
        x = np.array([0, 1, 2, 3, 100, 7, -1 if np.dtype(dtype).kind == "i" else 255], np.int64).astype(dtype)
        (got,) = run(lambda a: P["clz"].bind(a), x)
        bits = x.dtype.itemsize * 8
        want = [bits - int(v).bit_length() for v in x.view(f"u{x.dtype.itemsize}")]
        check(got, np.array(want), dtype)


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, -1, -2])
def test_integer_pow(y):
    x = sample((2, 3), F32, "pos")
    xi = sample((2, 3), np.int32)
    outs = run(lambda a, b: [P["integer_pow"].bind(a, y=y)] + ([P["integer_pow"].bind(b, y=y)] if y >= 0 else []),
               x, xi)
    check(outs[0], x.astype(F64) ** y, F32)
    if y >= 0:
        check(outs[1], xi ** y, np.int32)


def test_integer_pow_emits_only_the_multiplies():
    text = lowering.lower_jaxpr(trace(lambda a: P["integer_pow"].bind(a, y=5), sample((3,), F32))).as_text()
    assert text.count("stablehlo.multiply") == 3 and "stablehlo.constant" not in text


CONVERSIONS = [(F32, np.int32, [1.7, -1.7, 0.0, 100.2]), (F32, BOOL, [0.0, -0.0, 0.5, np.nan]),
               (np.int32, BOOL, [0, 3, -1, 0]), (BOOL, F32, [True, False, True, True]),
               (np.int32, F32, [1, -7, 2**20, 0]), (F32, F16, [1.0, 1e-3, -2.5, 65504.0]),
               (F64, BF16, [1.0, 3.14159, -2.5, 0.1]), (np.int32, np.uint8, [1, 255, 7, 0]),
               (np.uint8, np.int32, [1, 255, 7, 0]), (BF16, F32, [1.0, 2.5, -3.0, 0.0]),
               (np.int64, np.int8, [1, -128, 127, 0]), (F16, F64, [0.1, 2.0, -1.0, 65504.0])]


def test_convert_element_type():
    for src, dst, values in CONVERSIONS:
        x = np.array(values).astype(src)
        (got,) = run(lambda a: P["convert_element_type"].bind(a, new_dtype=np.dtype(dst), weak_type=False), x)
        want = x != 0 if np.dtype(dst) == BOOL else x.astype(F64).astype(dst) if np.dtype(src) != BOOL else x.astype(dst)
        check(got, want, dst)


def test_bitcast_convert_type():
    x = np.array([1.0, -2.5, np.inf], F32)
    as_int, as_bytes = run(lambda a: [P["bitcast_convert_type"].bind(a, new_dtype=np.dtype(np.int32)),
                                      P["bitcast_convert_type"].bind(a, new_dtype=np.dtype(np.uint8))], x)
    check(as_int, x.view(np.int32), np.int32)
    check(as_bytes, x.view(np.uint8).reshape(3, 4), np.uint8)
    (back,) = run(lambda b: P["bitcast_convert_type"].bind(b, new_dtype=F32), x.view(np.uint8).reshape(3, 4))
    check(back, x, F32)


def test_clamp_scalar_and_array_bounds():
    x = sample((2, 3), F32)
    lo, hi = np.float32(-1), np.full((2, 3), 0.5, F32)
    (got,) = run(lambda a, b, c: P["clamp"].bind(b, a, c), x, np.asarray(lo), hi)
    check(got, np.clip(x, lo, hi), F32)
    xi = sample((5,), np.int32)
    (got,) = run(lambda a: P["clamp"].bind(np.int32(-2), a, np.int32(3)), xi)
    check(got, np.clip(xi, -2, 3), np.int32)


def test_select_n():
    cases = [np.full((2, 3), k, F32) + sample((2, 3), F32) for k in range(5)]
    which_bool = sample((2, 3), BOOL)
    which_int = RNG.integers(0, 5, (2, 3)).astype(np.int32)
    outs = run(lambda wb, wi, s, *c: [P["select_n"].bind(wb, c[0], c[1]), P["select_n"].bind(wi, *c),
                                       P["select_n"].bind(s, *c[:3]), P["select_n"].bind(wb, c[0])],
               which_bool, which_int, np.int32(2), *cases)
    check(outs[0], np.where(which_bool, cases[1], cases[0]), F32)
    check(outs[1], np.choose(which_int, cases), F32)
    check(outs[2], cases[2], F32)
    check(outs[3], cases[0], F32)


# ---------------------------------------------------------------- structural

@pytest.mark.parametrize("dtype", [F32, BF16, np.int8, BOOL])
def test_shape_ops(dtype):
    x = sample((2, 1, 3), dtype)
    y = sample((0, 3), dtype)
    outs = run(lambda a, b: [
        P["broadcast_in_dim"].bind(a, shape=(4, 2, 5, 3), broadcast_dimensions=(1, 2, 3)),
        P["reshape"].bind(a, new_sizes=(3, 2), dimensions=None),
        P["transpose"].bind(a, permutation=(2, 0, 1)),
        P["squeeze"].bind(a, dimensions=(1,)),
        P["rev"].bind(a, dimensions=(0, 2)),
        P["concatenate"].bind(a, a, dimension=1),
        P["reshape"].bind(b, new_sizes=(3, 0), dimensions=None),
        P["concatenate"].bind(b, b, dimension=0),
    ], x, y)
    wants = [np.broadcast_to(x, (4, 2, 5, 3)), x.reshape(3, 2), x.transpose(2, 0, 1), x[:, 0], x[::-1, :, ::-1],
             np.concatenate([x, x], 1), y.reshape(3, 0), np.concatenate([y, y])]
    for got, want in zip(outs, wants):
        check(got, want, dtype)


def _np_pad(x, padval, config):
    for axis, (lo, hi, interior) in enumerate(config):
        x = np.moveaxis(x, axis, 0)
        n = x.shape[0]
        grown = np.full(((n - 1) * (interior + 1) + 1 if n else 0,) + x.shape[1:], padval, x.dtype)
        grown[::interior + 1] = x
        parts = [np.full((max(lo, 0),) + x.shape[1:], padval, x.dtype), grown,
                 np.full((max(hi, 0),) + x.shape[1:], padval, x.dtype)]
        x = np.concatenate(parts)
        x = x[max(-lo, 0): x.shape[0] - max(-hi, 0)]
        x = np.moveaxis(x, 0, axis)
    return x


def test_pad_negative_and_interior():
    x = sample((3, 4), F32)
    configs = [((1, 2, 0), (0, 0, 1)), ((-1, 1, 1), (2, -2, 0)), ((0, 0, 0), (-1, -1, 2))]
    outs = run(lambda a, v: [P["pad"].bind(a, v, padding_config=c) for c in configs], x, np.float32(7))
    for got, c in zip(outs, configs):
        check(got, _np_pad(x, 7, c), F32)


def test_slice_with_strides():
    x = sample((5, 6), np.int32)
    outs = run(lambda a: [P["slice"].bind(a, start_indices=(1, 0), limit_indices=(4, 6), strides=None),
                          P["slice"].bind(a, start_indices=(0, 1), limit_indices=(5, 6), strides=(2, 3)),
                          P["slice"].bind(a, start_indices=(2, 2), limit_indices=(2, 5), strides=(1, 1))], x)
    for got, want in zip(outs, [x[1:4, 0:6], x[0:5:2, 1:6:3], x[2:2, 2:5]]):
        check(got, want, np.int32)


@pytest.mark.parametrize("start", [(1, 2), (0, 0), (4, 5), (-3, 1), (100, -100)])
def test_dynamic_slice_and_update_clamp(start):
    x = sample((5, 6), F32)
    upd = sample((2, 3), F32)
    i, j = np.int32(start[0]), np.int64(start[1])
    ds, dus = run(lambda a, u, s0, s1: [P["dynamic_slice"].bind(a, s0, s1, slice_sizes=(2, 3)),
                                         P["dynamic_update_slice"].bind(a, u, s0, s1)], x, upd, i, j)
    ci, cj = min(max(start[0], 0), 3), min(max(start[1], 0), 3)
    check(ds, x[ci:ci + 2, cj:cj + 3], F32)
    want = x.copy()
    want[ci:ci + 2, cj:cj + 3] = upd
    check(dus, want, F32)


def test_iota():
    outs = run(lambda: [P["iota"].bind(dtype=np.dtype(np.int32), shape=(2, 3), dimension=1),
                        P["iota"].bind(dtype=F32, shape=(4,), dimension=0),
                        P["iota"].bind(dtype=np.dtype(np.uint8), shape=(0, 2), dimension=0)])
    check(outs[0], np.tile(np.arange(3), (2, 1)), np.int32)
    check(outs[1], np.arange(4), F32)
    check(outs[2], np.zeros((0, 2)), np.uint8)


def _dn(cls, **kw):
    return getattr(slicing, cls)(**kw)


def _mode(name):
    return slicing.GatherScatterMode[name]


def _take_rows(operand, idx, mode, fill_value=None):
    dnums = _dn("GatherDimensionNumbers", offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return P["gather"].bind(operand, idx, dimension_numbers=dnums, slice_sizes=(1, operand.shape[1]),
                            indices_are_sorted=False, unique_indices=False, mode=_mode(mode),
                            fill_value=fill_value)


@pytest.mark.parametrize("dtype", [F32, np.int32, np.uint8, BOOL])
def test_gather_modes(dtype):
    x = sample((4, 3), dtype)
    idx = np.array([[0], [3], [5], [-1], [2], [-7]], np.int32)
    clip, fill, fill_given, promise = run(lambda a, i, i_in: [
        _take_rows(a, i, "CLIP"), _take_rows(a, i, "FILL_OR_DROP"), _take_rows(a, i, "FILL_OR_DROP", 1),
        _take_rows(a, i_in, "PROMISE_IN_BOUNDS")], x, idx, idx[:2])
    check(clip, x[np.clip(idx[:, 0], 0, 3)], dtype)
    inb = ((idx[:, 0] >= 0) & (idx[:, 0] < 4))[:, None]
    default = slicing.default_fill_value(np.dtype(dtype))
    check(fill, np.where(inb, x[np.clip(idx[:, 0], 0, 3)], np.asarray(default).astype(dtype)), dtype)
    check(fill_given, np.where(inb, x[np.clip(idx[:, 0], 0, 3)], np.asarray(1).astype(dtype)), dtype)
    check(promise, x[[0, 3]], dtype)


def test_gather_window_partially_out_of_bounds():
    x = np.arange(10, dtype=F32)
    idx = np.array([[0], [7], [8], [-1]], np.int32)
    dnums = _dn("GatherDimensionNumbers", offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
    kw = dict(dimension_numbers=dnums, slice_sizes=(3,), indices_are_sorted=False, unique_indices=False)
    clip, fill = run(lambda a, i: [P["gather"].bind(a, i, mode=_mode("CLIP"), fill_value=None, **kw),
                                   P["gather"].bind(a, i, mode=_mode("FILL_OR_DROP"), fill_value=None, **kw)],
                     x, idx)
    starts = np.clip(idx[:, 0], 0, 7)
    check(clip, np.stack([x[s:s + 3] for s in starts]), F32)
    check(fill, np.stack([x[s:s + 3] if 0 <= i <= 7 else np.full(3, np.nan) for s, i in zip(starts, idx[:, 0])]),
          F32)


SCATTERS = {"scatter": None, "scatter-add": np.add, "scatter-mul": np.multiply, "scatter-min": np.minimum,
            "scatter-max": np.maximum}


@pytest.mark.parametrize("name", sorted(SCATTERS))
@pytest.mark.parametrize("mode", ["FILL_OR_DROP", "CLIP", "PROMISE_IN_BOUNDS"])
def test_scatter_rows(name, mode):
    x = sample((4, 3), F32)
    idx = np.array([[1], [3], [9], [-2], [1]], np.int32)
    if name == "scatter":
        idx = np.array([[1], [3], [9], [-2], [0]], np.int32)    # unique in bounds: order is unspecified
    if mode == "PROMISE_IN_BOUNDS":
        idx = idx[[0, 1, 4]]
    upd = sample((len(idx), 3), F32)
    dnums = _dn("ScatterDimensionNumbers", update_window_dims=(1,), inserted_window_dims=(0,),
                scatter_dims_to_operand_dims=(0,))
    (got,) = run(lambda a, i, u: P[name].bind(a, i, u, dimension_numbers=dnums, indices_are_sorted=False,
                                              unique_indices=False, mode=_mode(mode)), x, idx, upd)
    want = x.astype(F64)
    for row, u in zip(idx[:, 0], upd.astype(F64)):
        if mode == "CLIP":
            row = min(max(row, 0), 3)
        elif not 0 <= row < 4:
            continue
        want[row] = u if SCATTERS[name] is None else SCATTERS[name](want[row], u)
    check(got, want, F32)


def _np_sort_key(x):
    return np.where(np.isnan(x), np.inf, x) if x.dtype.kind == "f" else x


def test_sort_total_order_stable_and_multi_operand():
    x = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, np.nan, 1.0, -2.0], F32)
    payload = np.arange(9, dtype=np.int32)
    keys2 = np.array([1, 0, 1, 0, 1, 0, 1, 1, 0], np.int32)
    (sx,), (s1, p1), (k2, v2, p2) = (
        run(lambda a: P["sort"].bind(a, dimension=0, is_stable=True, num_keys=1), x),
        run(lambda a, b: P["sort"].bind(a, b, dimension=0, is_stable=True, num_keys=1), x, payload),
        run(lambda k, a, b: P["sort"].bind(k, a, b, dimension=0, is_stable=True, num_keys=2), keys2, x, payload))
    order = np.argsort(x, kind="stable")       # numpy: NaNs last, -0.0 == 0.0, stable
    check(sx, x[order], F32)
    check(p1, payload[order], np.int32)
    order2 = np.lexsort((_np_sort_key(x), keys2))
    check(k2, keys2[order2], np.int32)
    check(p2, payload[order2], np.int32)


@pytest.mark.parametrize("dtype", [F32, BF16, np.int32, np.uint8, BOOL])
def test_sort_2d_along_each_axis(dtype):
    x = sample((3, 4), dtype)
    a0, a1 = run(lambda a: [P["sort"].bind(a, dimension=0, is_stable=True, num_keys=1)[0],
                            P["sort"].bind(a, dimension=1, is_stable=False, num_keys=1)[0]], x)
    check(a0, np.sort(x.astype(F64) if dtype == BF16 else x, axis=0), dtype)
    check(a1, np.sort(x.astype(F64) if dtype == BF16 else x, axis=1), dtype)


def test_argmax_argmin_nan_and_ties():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [np.nan, 2.0, np.nan, 5.0], [-1.0, -1.0, -1.0, -1.0]], F32)
    outs = run(lambda a: [P["argmax"].bind(a, axes=(1,), index_dtype=np.dtype(np.int32)),
                          P["argmin"].bind(a, axes=(1,), index_dtype=np.dtype(np.int32)),
                          P["argmax"].bind(a, axes=(0,), index_dtype=np.dtype(np.int64))], x)
    check(outs[0], np.argmax(x, 1), np.int32)
    check(outs[1], np.argmin(x, 1), np.int32)
    check(outs[2], np.argmax(x, 0), np.int64)
    xi = np.array([[3, 7, 7], [0, 0, -1]], np.int8)
    outs = run(lambda a: [P["argmax"].bind(a, axes=(1,), index_dtype=np.dtype(np.int32)),
                          P["argmin"].bind(a, axes=(1,), index_dtype=np.dtype(np.int32))], xi)
    check(outs[0], np.argmax(xi, 1), np.int32)
    check(outs[1], np.argmin(xi, 1), np.int32)


def _np_cumulative(name, x, axis, reverse):
    fn = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
          "cummin": np.minimum.accumulate, "cumlogsumexp": np.logaddexp.accumulate}[name]
    if reverse:
        return np.flip(fn(np.flip(x, axis), axis=axis), axis)
    return fn(x, axis=axis)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
def test_cumulative(name):
    for dtype in ([F32, F16, np.int32] if name != "cumlogsumexp" else [F32, F64]):
        x = sample((3, 4), dtype)
        z = sample((0, 2), dtype)
        outs = run(lambda a, b: [P[name].bind(a, axis=ax, reverse=rev) for ax in (0, 1) for rev in (False, True)]
                   + [P[name].bind(b, axis=0, reverse=False)], x, z)
        wants = [_np_cumulative(name, x.astype(F64) if dt.is_float(dtype) else x, ax, rev)
                 for ax in (0, 1) for rev in (False, True)] + [z]
        for got, want in zip(outs, wants):
            check(got, want, dtype, scale=20)


def test_host_callbacks():
    from jaxprc.ir import Effect, HostCallback
    seen = []
    x = sample((2, 3), F32)
    outs = run(lambda a: [
        *P["pure_callback"].bind(a, callback=HostCallback("sin", lambda v: [np.sin(v)]),
                                 result_avals=(ShapedArray((2, 3), F32),), vmap_method=None, device=None),
        *P["io_callback"].bind(a, callback=HostCallback("sum", lambda v: [np.sum(v, 1)]),
                               result_avals=(ShapedArray((2,), F32),), ordered=True, device=None),
        *P["debug_callback"].bind(a, callback=HostCallback("see", lambda v: seen.append(np.asarray(v))),
                                  effect=Effect.debug, partitioned=False)], x)
    check(outs[0], np.sin(x.astype(F64)), F32)
    check(outs[1], x.astype(F64).sum(1), F32)
    assert len(seen) == 1 and np.array_equal(seen[0], x)


def test_sharding_constraint():
    import jaxprc as jx
    from jaxprc.sharding import NamedSharding, PartitionSpec
    s = NamedSharding(jx.make_mesh((1,), ("x",), axis_types=(jx.sharding.AxisType.Auto,)), PartitionSpec(None, "x"))
    x = sample((2, 3), F32)
    (out,) = _as_list(run(lambda a: jx.lax.with_sharding_constraint(a, s), x))
    check(out, x, F32)


def test_shard_map_and_collectives_on_one_device():
    """On a one-device mesh every collective is an identity (axis_index is 0); compiled through
    jit, which partitions programs holding shard_map."""
    import jaxprc as jx
    from jaxprc.lax import parallel as par
    x = sample((2, 3), F32)
    f = jx.shard_map(lambda a: (par.psum(a, "i"), par.pmax(a, "i"), par.pmin(a, "i"),
                                par.all_gather(a, "i", axis=1), par.ppermute(a, "i", [(0, 0)]),
                                par.axis_index("i").reshape(1), par.psum_scatter(a, "i", tiled=True),
                                par.all_to_all(a, "i", 0, 1, tiled=True), par.pbroadcast(a, "i", 0),
                                par.pcast(par.psum(a, "i"), "i", to="varying")),
                     mesh=jx.make_mesh((1,), ("i",)), in_specs=jx.P("i"),
                     out_specs=(jx.P("i"),) * 10)      # axis_index, ppermute, all_gather vary over i
    _record(jx.make_jaxpr(f)(x).jaxpr)
    outs = jx.jit(f)(x)
    for o in outs[:3] + outs[4:5]:
        check(o, x, F32)
    check(outs[3], x[:, None], F32)
    assert outs[5].shape == (1,) and int(outs[5][0]) == 0
    check(outs[6], x, F32)
    check(outs[7], x, F32)
    check(outs[8], x, F32)
    check(outs[9], x, F32)


def test_host_local_global_conversions_in_one_process():
    """In one process a host-local array is the global one: both conversions lower to identities."""
    import jaxprc as jx
    from jaxprc.experimental import multihost_utils as mh
    mesh, x = jx.make_mesh((1,), ("x",)), sample((2, 3), F32)
    (out,) = _as_list(run(lambda a: mh.global_array_to_host_local_array(
        mh.host_local_array_to_global_array(a, mesh, jx.P("x")), mesh, jx.P(None, "x")), x))
    check(out, x, F32)


REDUCTIONS = {"reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_max": np.max, "reduce_min": np.min,
              "reduce_and": None, "reduce_or": None, "reduce_xor": None}


def _np_reduce(name, x, axes):
    if name in ("reduce_and", "reduce_or", "reduce_xor"):
        ufunc = {"reduce_and": np.bitwise_and, "reduce_or": np.bitwise_or, "reduce_xor": np.bitwise_xor}[name]
        if x.dtype == BOOL:
            ufunc = {"reduce_and": np.logical_and, "reduce_or": np.logical_or, "reduce_xor": np.logical_xor}[name]
        return ufunc.reduce(x, axis=axes)
    return REDUCTIONS[name](x, axis=axes)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    bitwise = name in ("reduce_and", "reduce_or", "reduce_xor")
    dtypes = [np.int32, np.uint8, BOOL] if bitwise else [F32, BF16, np.int32, np.uint32] + (
        [BOOL] if name in ("reduce_max", "reduce_min") else [])
    for dtype in map(np.dtype, dtypes):
        x = sample((2, 3, 4), dtype)
        z = sample((0, 3), dtype)
        axes_list = [(0,), (1, 2), (0, 1, 2), ()]
        outs = run(lambda a, b: [P[name].bind(a, axes=ax) for ax in axes_list] + [P[name].bind(b, axes=(0,))], x, z)
        xs = x.astype(F64) if dt.is_float(dtype) else x
        wants = [_np_reduce(name, xs, ax) for ax in axes_list]
        if name in ("reduce_max", "reduce_min"):
            init = reductions._identity_value(name[7:], dtype)
            wants.append(np.full((3,), init))
        else:
            wants.append(_np_reduce(name, z.astype(F64) if dt.is_float(dtype) else z, (0,)))
        for got, want in zip(outs, wants):
            check(got, np.asarray(want).astype(dtype) if not dt.is_float(dtype) else want, dtype, scale=8)


@pytest.mark.parametrize("dtype", [F32, F64, BF16, np.int32, BOOL])
def test_dot_general(dtype):
    a, b = sample((2, 3, 4), dtype), sample((2, 4, 5), dtype)
    m, v = sample((3, 4), dtype), sample((4,), dtype)
    dg = lambda x, y, dn, **kw: P["dot_general"].bind(x, y, dimension_numbers=dn, precision=None,
                                                      preferred_element_type=kw.get("pet"))
    outs = run(lambda x, y, mm, vv: [dg(x, y, (((2,), (1,)), ((0,), (0,)))), dg(mm, vv, (((1,), (0,)), ((), ()))),
                                     dg(vv, vv, (((), ()), ((), ()))), dg(mm, mm, (((0, 1), (0, 1)), ((), ())))],
               a, b, m, v)
    w = (lambda t: t.astype(F64)) if dt.is_float(dtype) else (lambda t: t.astype(np.int64))
    wants = [np.einsum("bij,bjk->bik", w(a), w(b)), w(m) @ w(v), np.outer(w(v), w(v)), np.sum(w(m) * w(m))]
    for got, want in zip(outs, wants):
        check(got, want != 0 if dtype == BOOL else want, dtype, scale=16)


def test_dot_general_preferred_element_type():
    a, b = sample((3, 4), np.int8), sample((4, 2), np.int8)
    fa, fb = sample((3, 4), BF16), sample((4, 2), BF16)
    dn = (((1,), (0,)), ((), ()))
    i32, f32 = run(lambda x, y, p, q: [
        P["dot_general"].bind(x, y, dimension_numbers=dn, precision=None, preferred_element_type=np.dtype(np.int32)),
        P["dot_general"].bind(p, q, dimension_numbers=dn, precision=None, preferred_element_type=F32)], a, b, fa, fb)
    check(i32, a.astype(np.int32) @ b.astype(np.int32), np.int32)
    check(f32, fa.astype(F64) @ fb.astype(F64), F32, scale=4)


# -------------------------------------------------------------- the module

def test_consts_and_literals_become_constants():
    c = np.arange(6, dtype=F32).reshape(2, 3)
    cb = np.array([1.5, -2.0], BF16)
    cu = np.array([250, 3], np.uint8)
    x, s = sample((2, 3), F32), np.float32(1.5)
    cj = trace(lambda a, b: [P["mul"].bind(a, c), P["add"].bind(b, 2.0), P["neg"].bind(cb), P["add"].bind(cu, cu)],
               x, s)
    assert len(cj.consts) == 3 and any(type(a) is ir.Literal for e in cj.eqns for a in e.invars)
    got = run_jaxpr(cj, x, s)
    check(got[0], x.astype(F64) * c, F32)
    check(got[1], 3.5, F32)
    check(got[2], -cb.astype(F64), BF16)
    check(got[3], cu + cu, np.uint8)


def test_text_is_valid_stablehlo_and_reparses():
    x = sample((3,), F32)
    lowered = lowering.lower_jaxpr(trace(lambda a: P["sin"].bind(P["mul"].bind(a, a)), x), name="jit_f")
    text = lowered.as_text()
    assert text.startswith("module @jit_f") and "func.func public @main" in text and "loc(" not in text
    assert "stablehlo.sine" in text
    exe = runtime.compile(text)           # XLA compiles the printed text
    check(np.asarray(exe(x)[0]), np.sin(x.astype(F64) ** 2), F32)
    assert "sine" in exe.as_text()


def test_locations_with_debug_info():
    x = sample((3,), F32)
    lowered = lowering.lower_jaxpr(trace(lambda a: P["cos"].bind(a), x))
    debug = lowered.as_text(debug_info=True)
    assert f'"{__file__}"' in debug or __file__.split("/")[-1] in debug
    assert 'loc("cos"(' in debug
    exe = runtime.compile(lowered.as_bytecode())      # the bytecode keeps them too
    check(np.asarray(exe(x)[0]), np.cos(x), F32)


def test_missing_rule_names_primitive_and_platform():
    my_p = Primitive("test_lowering_unlowerable")
    my_p.def_abstract_eval(lambda a: a)
    cj = trace(lambda a: my_p.bind(a), sample((2,), F32))
    with pytest.raises(NotImplementedError, match="test_lowering_unlowerable.*cpu"):
        lowering.lower_jaxpr(cj)


def test_user_rule_and_platform_override():
    from jaxlib.mlir.dialects import stablehlo as hlo
    twice_p = Primitive("test_lowering_twice")
    twice_p.def_abstract_eval(lambda a: a)
    lowering.register_lowering(twice_p, lambda ctx, a: [hlo.add(a, a)])
    lowering.register_lowering(twice_p, lambda ctx, a: hlo.multiply(a, a), platform="cuda")
    x = sample((4,), F32)
    cj = trace(lambda a: twice_p.bind(a), x)
    check(run_jaxpr(cj, x)[0], 2 * x, F32)
    assert "multiply" in lowering.lower_jaxpr(cj, platform="cuda").as_text()
    bad_p = Primitive("test_lowering_bad_type")
    bad_p.def_abstract_eval(lambda a: a)
    lowering.register_lowering(bad_p, lambda ctx, a: hlo.convert(
        lowering.aval_to_ir_type(ctx.avals_in[0].update(dtype=np.int32)), a))
    with pytest.raises(TypeError, match="test_lowering_bad_type.*expected tensor<4xf32>"):
        lowering.lower_jaxpr(trace(lambda a: bad_p.bind(a), x))


def test_donation_sets_aliasing_attribute():
    x, y = sample((4,), F32), sample((2,), F32)
    cj = trace(lambda a, b: [P["neg"].bind(b), P["sin"].bind(a)], x, y)
    text = lowering.lower_jaxpr(cj, donated_invars=(True, False)).as_text()
    assert "tf.aliasing_output = 1 : i32" in text


def test_zero_outputs_and_passthrough():
    x = sample((2,), F32)
    assert run_jaxpr(trace(lambda a: [], x), x) == []
    (got,) = run_jaxpr(trace(lambda a: a, x), x)
    check(got, x, F32)


def test_custom_lin_lowering_and_evaluation_say_jvp_of_custom_vjp():
    """custom_lin is transposed away by reverse mode; reaching lowering or evaluation means
    forward mode was applied to a custom_vjp function (JAX's error)."""
    from jaxprc.lax import custom_lin_p
    from jaxprc.engine.lowering import find_lowering_rule
    for rule in (find_lowering_rule(custom_lin_p, "cpu"), custom_lin_p.impl):
        with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
            rule(None)


# -------------------------------------------------------------- control flow

def sub(fn, *avals):
    """A ClosedJaxpr without consts, of ``fn`` over the given (shape, dtype) avals."""
    cj = ir.trace_to_jaxpr(lambda *xs: _as_list(fn(*xs)), [ShapedArray(s, d) for s, d in avals])
    assert not cj.consts
    return cj


def test_cond_clamps_index_like_switch():
    x = sample((3,), F32)
    branches = (sub(lambda a: P["neg"].bind(a), ((3,), F32)), sub(lambda a: P["sin"].bind(a), ((3,), F32)),
                sub(lambda a: P["add"].bind(a, a), ((3,), F32)))
    cj = trace(lambda i, a: P["cond"].bind(i, a, branches=branches), np.int32(0), x)
    wants = {-5: -x, -1: -x, 0: -x, 1: np.sin(x), 2: 2 * x, 3: 2 * x, 100: 2 * x}
    for i, want in wants.items():
        check(run_jaxpr(cj, np.int32(i), x)[0], want, F32)
    assert "stablehlo.case" in lowering.lower_jaxpr(cj).as_text()


def test_while_with_cond_and_body_consts():
    # while i < limit: i += 1; acc = acc * scale
    cond = sub(lambda limit, i, acc: P["lt"].bind(i, limit), ((), np.int32), ((), np.int32), ((2,), F32))
    body = sub(lambda scale, i, acc: [P["add"].bind(i, np.int32(1)), P["mul"].bind(acc, scale)],
               ((2,), F32), ((), np.int32), ((2,), F32))
    acc0, scale = np.array([1.0, -2.0], F32), np.array([2.0, 0.5], F32)
    cj = trace(lambda lim, sc, i, acc: P["while"].bind(lim, sc, i, acc, cond_jaxpr=cond, body_jaxpr=body,
                                                       cond_nconsts=1, body_nconsts=1),
               np.int32(5), scale, np.int32(0), acc0)
    for limit in (5, 0, -3):
        i, acc = run_jaxpr(cj, np.int32(limit), scale, np.int32(0), acc0)
        n = max(limit, 0)
        check(i, n, np.int32)
        check(acc, acc0 * scale.astype(F64) ** n, F32)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carry_consts_xs_ys(reverse):
    # carry c; y_t = c * w + x_t; c = c + x_t[0]
    body = sub(lambda w, c, x: [P["add"].bind(c, P["reduce_sum"].bind(x, axes=(0,))),
                                P["add"].bind(P["mul"].bind(P["broadcast_in_dim"].bind(
                                    c, shape=(2,), broadcast_dimensions=()), w), x), P["neg"].bind(c)],
               ((2,), F32), ((), F32), ((2,), F32))
    xs, w, c0 = sample((4, 2), F32), sample((2,), F32), np.float32(0.5)
    cj = trace(lambda w_, c_, xs_: P["scan"].bind(w_, c_, xs_, jaxpr=body, length=4, reverse=reverse, unroll=1,
                                                  num_consts=1, num_carry=1, linear=(False,) * 3), w, c0, xs)
    c, ys, negs = run_jaxpr(cj, w, c0, xs)
    want_c, want_ys, want_negs = np.float64(c0), np.zeros((4, 2)), np.zeros(4)
    for t in (reversed(range(4)) if reverse else range(4)):
        want_ys[t] = want_c * w + xs[t]
        want_negs[t] = -want_c
        want_c = want_c + xs[t].astype(F64).sum()
    check(c, want_c, F32)
    check(ys, want_ys, F32)
    check(negs, want_negs, F32)


def test_scan_of_length_zero():
    body = sub(lambda c, x: [P["add"].bind(c, x), P["mul"].bind(x, x)], ((3,), F32), ((3,), F32))
    xs, c0 = np.zeros((0, 3), F32), sample((3,), F32)
    cj = trace(lambda c_, xs_: P["scan"].bind(c_, xs_, jaxpr=body, length=0, reverse=False, unroll=1,
                                              num_consts=0, num_carry=1, linear=(False, False)), c0, xs)
    c, ys = run_jaxpr(cj, c0, xs)
    check(c, c0, F32)
    check(ys, np.zeros((0, 3)), F32)


def test_identical_callees_emitted_once():
    callee = sub(lambda a: P["sin"].bind(P["mul"].bind(a, a)), ((3,), F32))
    other = sub(lambda a: P["cos"].bind(a), ((3,), F32))
    x = sample((3,), F32)
    cj = trace(lambda a: [P["jit"].bind(a, jaxpr=callee, name="f")[0],
                          P["jit"].bind(P["neg"].bind(a), jaxpr=callee, name="f")[0],
                          P["jit"].bind(a, jaxpr=other, name="f")[0],
                          P["checkpoint"].bind(a, jaxpr=callee, prevent_cse=True, policy=None)[0]], x)
    text = lowering.lower_jaxpr(cj).as_text()
    assert text.count("func.func private") == 2, text
    assert text.count("call @f(") == 2 and "call @f_1(" in text
    # checkpoint is inlined instead; undifferentiated, it needs no barrier (as JAX: see test_remat.py)
    assert text.count("stablehlo.optimization_barrier") == 0
    got = run_jaxpr(cj, x)
    for g, want in zip(got, [np.sin(x * x), np.sin(x * x), np.cos(x), np.sin(x * x)]):
        check(g, want, F32)


def test_structurally_equal_callees_emitted_once():
    pytest.importorskip("jaxprc.ir.equality")
    x = sample((3,), F32)
    make = lambda: sub(lambda a: P["exp"].bind(a), ((3,), F32))
    c1, c2 = make(), make()
    cj = trace(lambda a: [P["jit"].bind(a, jaxpr=c1, name="g")[0], P["jit"].bind(a, jaxpr=c2, name="g")[0]], x)
    assert lowering.lower_jaxpr(cj).as_text().count("func.func private") == 1


def test_custom_nodes_lower_their_primal_function():
    fun = sub(lambda k, a: P["mul"].bind(P["sin"].bind(a), k), ((3,), F32), ((3,), F32))
    never = ir.Thunk(lambda: pytest.fail("lowering must not form the custom rule"), name="rule")
    x, k = sample((3,), F32), sample((3,), F32)
    cj = trace(lambda k_, a: [
        P["custom_jvp_call_jaxpr"].bind(k_, a, fun_jaxpr=fun, jvp_jaxpr_thunk=never, num_consts=1,
                                        symbolic_zeros=False)[0],
        P["custom_vjp_call_jaxpr"].bind(k_, a, fun_jaxpr=fun, fwd_jaxpr_thunk=never, bwd=lambda *a: a,
                                        num_consts=1, out_trees=lambda: None, symbolic_zeros=False)[0]], k, x)
    for got in run_jaxpr(cj, k, x):
        check(got, np.sin(x.astype(F64)) * k, F32)
    assert not never.forced


def test_custom_vmap_and_linear_call_lower_their_function():
    from jaxprc.lax.custom_batching import VmapRule
    fun = sub(lambda k, a: P["mul"].bind(P["sin"].bind(a), k), ((3,), F32), ((3,), F32))
    never = ir.Thunk(lambda: pytest.fail("lowering must not form the transpose"), name="t")
    x, k = sample((3,), F32), sample((3,), F32)
    cj = trace(lambda k_, a: [
        P["custom_vmap_call"].bind(k_, a, call=fun, rule=VmapRule("rule", num_consts=1))[0],
        P["linear_call"].bind(k_, a, callee=fun, transpose_thunk=never, num_consts=0, num_res=1)[0]], k, x)
    for got in run_jaxpr(cj, k, x):
        check(got, np.sin(x.astype(F64)) * k, F32)
    assert not never.forced


def test_seed_style_rule_with_op_classes():
    """The seed's multiply_add rule: op classes (hlo.AddOp), registered for cpu only."""
    from jaxlib.mlir.dialects import stablehlo as hlo
    fma_p = Primitive("test_lowering_multiply_add")
    fma_p.def_abstract_eval(lambda x, y, z: x)
    lowering.register_lowering(fma_p, lambda ctx, xc, yc, zc: [hlo.AddOp(hlo.MulOp(xc, yc), zc).result],
                               platform="cpu")
    x, y, z = (sample((3,), F32) for _ in range(3))
    check(run_jaxpr(trace(lambda *a: fma_p.bind(*a), x, y, z), x, y, z)[0], x * y + z, F32)
    with pytest.raises(NotImplementedError, match="test_lowering_multiply_add.*cuda"):
        lowering.lower_jaxpr(trace(lambda *a: fma_p.bind(*a), x, y, z), platform="cuda")


@pytest.mark.parametrize("n", [1, 2, 5, 8, 1001])
def test_cumulative_scan_lengths(n):
    x = sample((2, n), F64)
    xi = sample((n,), np.int32)
    outs = run(lambda a, b: [P["cumsum"].bind(a, axis=1, reverse=False), P["cummax"].bind(a, axis=1, reverse=True),
                             P["cumsum"].bind(b, axis=0, reverse=True)], x, xi)
    check(outs[0], np.cumsum(x, 1), F64, scale=1e3)
    check(outs[1], _np_cumulative("cummax", x, 1, True), F64)
    check(outs[2], _np_cumulative("cumsum", xi, 0, True), np.int32)


def test_fft_and_implicit_solves_lower():
    from jaxprc.lax import FftType, custom_linear_solve, custom_root
    for dtype in (F32, F64):
        x = sample((2, 3, 4), dtype)
        spectrum, back, full, empty = run(
            lambda a, e: [P["fft"].bind(a, fft_type=FftType.RFFT, fft_lengths=(3, 4)),
                          P["fft"].bind(P["fft"].bind(a, fft_type=FftType.RFFT, fft_lengths=(3, 4)),
                                        fft_type=FftType.IRFFT, fft_lengths=(3, 4)),
                          P["fft"].bind(P["fft"].bind(a, fft_type=FftType.RFFT, fft_lengths=(4,)),
                                        fft_type=FftType.FFT, fft_lengths=(2, 3, 3)),
                          P["fft"].bind(e, fft_type=FftType.RFFT, fft_lengths=(4,))],
            x, np.zeros((0, 4), dtype))
        complex_dtype = np.result_type(dtype, np.complex64)
        assert spectrum.dtype == complex_dtype and empty.shape == (0, 3)
        t = tol(dtype) * 50
        np.testing.assert_allclose(spectrum, np.fft.rfft2(x), rtol=t, atol=t)
        np.testing.assert_allclose(back, x, rtol=t, atol=t)
        np.testing.assert_allclose(full, np.fft.fftn(np.fft.rfft(x)), rtol=t, atol=t)
    b = sample((3,), F32)
    solved, root = run(lambda v: [custom_linear_solve(lambda y: y * 2, v, lambda mv, y: y / 2),
                                  custom_root(lambda y: y * y - 4, v * 0 + 1, lambda f, y: y * 0 + 2,
                                              lambda g, y: y)], b)
    check(solved, b / 2, F32)
    check(root, np.full(3, 2.0), F32)


def test_complex_max_min_sort_order_by_real_then_imag_as_jax():
    import jaxprc as jx
    import jaxprc.numpy as jnp
    from jaxprc import lax
    # expected values printed by JAX 0.10.2
    x = np.array([1 + 2j, 1 + 3j, 0 + 5j, 2 - 1j, np.nan + 0j], np.complex64)
    y = np.array([1 + 3j, 1 + 2j, 1 + 0j, 2 - 2j, 1 + 0j], np.complex64)
    np.testing.assert_array_equal(np.asarray(lax.max(x, y)), [1 + 3j, 1 + 3j, 1 + 0j, 2 - 1j, 1 + 0j])
    np.testing.assert_array_equal(np.asarray(jx.jit(lax.min)(x, y)), [1 + 2j, 1 + 2j, 0 + 5j, 2 - 2j, 1 + 0j])
    np.testing.assert_array_equal(np.asarray(lax.sort(x)), [0 + 5j, 1 + 2j, 1 + 3j, 2 - 1j, np.nan + 0j])
    _, perm = lax.sort((x, np.arange(5, dtype=np.int32)), num_keys=1)
    np.testing.assert_array_equal(np.asarray(perm), [2, 0, 1, 3, 4])
    np.testing.assert_array_equal(np.asarray(lax.cummax(x)), [1 + 2j, 1 + 3j, 1 + 3j, 2 - 1j, np.nan + 0j])
    assert complex(jnp.min(x[:4])) == 5j and complex(jx.jit(jnp.max)(x[:4])) == 2 - 1j


def test_top_k_numerics_bits_rng_and_barrier():
    x = np.array([[1.0, np.nan, 3.0, -np.inf], [3.0, -0.0, 0.0, 2.0]], F32)
    vals, idx = run(lambda a: P["top_k"].bind(a, k=3, axis=1), x)
    check(vals, [[np.nan, 3.0, 1.0], [3.0, 2.0, 0.0]], F32)
    check(idx, [[1, 2, 0], [0, 3, 2]], np.int32)
    vals, idx = run(lambda a: P["top_k"].bind(a, k=1, axis=0), x)
    check(idx, [[1, 0, 0, 1]], np.int32)
    y = np.array([1.0001, 65520.0, 1e-8, -3.3], F32)
    check(run(lambda a: P["reduce_precision"].bind(a, exponent_bits=5, mantissa_bits=10), y)[0],
          [1.0, np.inf, 0.0, np.float16(-3.3)], F32, scale=0)     # float16's rounding and overflow
    a = np.array([2**31 - 1, -5, 7, -(2**31)], np.int32)
    b = np.array([2**31 - 1, 3, -9, -(2**31)], np.int32)
    check(run(lambda u, v: P["mulhi"].bind(u, v), a, b)[0], (a.astype(np.int64) * b) >> 32, np.int32)
    u = np.array([2**32 - 1, 5, 1 << 31], np.uint32)
    check(run(lambda v: P["mulhi"].bind(v, v), u)[0], (u.astype(np.uint64) * u) >> 32, np.uint32)
    outs = run(lambda v, w: P["optimization_barrier"].bind(v, w), y, a)
    check(outs[0], y, F32, scale=0)
    check(outs[1], a, np.int32)
    # tokens hold no data: one comes out of the program (as a boolean) beside the value
    outs = run(lambda v: (P["after_all"].bind(P["create_token"].bind(), P["create_token"].bind()), v * 2.0), y)
    assert len(outs) == 2
    check(outs[1], y * 2, F32, scale=0)
    # rng_bit_generator: XLA's generators; the values JAX 0.10.2 prints for this key
    from jaxprc.lax import RandomAlgorithm
    key = np.array([1, 2, 3, 4], np.uint32)
    new_key, bits = run(lambda k: P["rng_bit_generator"].bind(k, shape=(3,), dtype=np.dtype(np.uint32),
                                                              algorithm=RandomAlgorithm.RNG_DEFAULT), key)
    check(new_key, [1, 2, 4, 4], np.uint32)
    check(bits, [512747620, 1298009047, 1267190206], np.uint32)
    new_key, bits = run(lambda k: P["rng_bit_generator"].bind(k, shape=(2, 3), dtype=np.dtype(np.uint8),
                                                              algorithm=RandomAlgorithm.RNG_THREE_FRY), key)
    check(new_key, [1, 2, 6, 4], np.uint32)
    check(bits, [[236, 168, 67], [142, 94, 25]], np.uint8)
    from jaxprc import lax as jlax
    xs = np.arange(1, 7, dtype=F32).reshape(2, 3)
    check(run(lambda v: jlax.reduce(v, np.float32(0), lambda a, b: a + b + a * b, (1,)), xs)[0],
          np.prod(1 + xs.astype(np.float64), 1) - 1, F32)
    check(run(lambda v: jlax.composite(lambda u, *, k: u * k, "my.scale", 1)(v, k=2.5), xs)[0], xs * 2.5, F32)
    draws = run(lambda lo, hi: P["rng_uniform"].bind(lo, hi, shape=(1000,)), np.float32(2), np.float32(3))[0]
    assert draws.dtype == F32 and draws.shape == (1000,) and draws.min() >= 2 and draws.max() < 3
    assert draws.std() > 0.2
def test_linalg_primitives_lower_to_kernels_that_reconstruct_their_input():
    from jaxprc.lax import linalg as la
    rng = np.random.default_rng(0)
    for dtype in (F32, F64):
        a = rng.standard_normal((2, 3, 3)).astype(dtype)
        spd = (a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)).astype(dtype)
        b = rng.standard_normal((2, 3, 2)).astype(dtype)
        L, x, lu, piv, perm, q, r, v, w, u, s, vt, ew, vr, t, z, h, taus, hq, xt = run(
            lambda a, spd, b, d: [la.cholesky(spd, symmetrize_input=False),
                               la.triangular_solve(la.cholesky(spd, symmetrize_input=False), b, left_side=True,
                                                   lower=True),
                               *la.lu(a), *la.qr(a), *la.eigh(spd, symmetrize_input=False), *la.svd(a),
                               *la.eig(a, compute_left_eigenvectors=False), *la.schur(a), *la.hessenberg(a),
                               la.householder_product(la.hessenberg(a)[0][..., 1:, :2], la.hessenberg(a)[1]),
                               la.tridiagonal_solve(a[..., 0], d, a[..., 2], b)], a, spd, b, a[..., 1] + 4)
        k = 40

        def near(got, want, scale=k):       # products of factors, in numpy: checked in float64
            check(np.asarray(got).astype(dtype), want, dtype, scale)
        near(L @ np.swapaxes(L, -1, -2), spd, k)
        near(L @ x, b, k)
        rows = np.take_along_axis(a, perm[..., None].astype(np.int64), axis=-2)
        near((np.tril(lu, -1) + np.eye(3)) @ np.triu(lu), rows, k)
        assert piv.dtype == np.int32 and perm.dtype == np.int32
        near(q @ r, a, k)
        near((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), spd, 200)
        near((u * s[..., None, :]) @ vt, a, k)
        np.testing.assert_allclose(a.astype(vr.dtype) @ vr, vr * ew[..., None, :], atol=1e-4)
        near(z @ t @ np.swapaxes(z, -1, -2), a, k)
        assert taus.shape == (2, 2)      # the reflectors below h's subdiagonal make q (hq) below
        near(hq @ np.swapaxes(hq, -1, -2), np.broadcast_to(np.eye(2), (2, 2, 2)), k)
        tri = (np.eye(3, k=-1) * a[..., 0][..., None] + np.eye(3) * (a[..., 1][..., None] + 4)
               + np.eye(3, k=1) * a[..., 2][..., None])      # row i: dl_i, d_i, du_i
        near(tri @ xt, b, k)
        packed, taus, q = run(lambda a: [*la.geqrf(a), la.householder_product(*la.geqrf(a))], a)
        near(q @ np.triu(packed), a, k)     # r above the diagonal, the reflectors making q below
    (p,) = run(lambda piv: [la.lu_pivots_to_permutation(piv, 4)], np.array([[2, 2, 3], [0, 1, 2]], np.int32))
    np.testing.assert_array_equal(p, [[2, 0, 3, 1], [0, 1, 2, 3]])
@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_convolution_and_windowed_reductions(dtype):
    from jaxprc import lax
    x, w = sample((2, 3, 6), dtype), sample((4, 3, 2), dtype)
    win = dict(window_dimensions=(1, 1, 2), window_strides=(1, 1, 2), padding=((0, 0), (0, 0), (0, 0)),
               base_dilation=(1, 1, 1), window_dilation=(1, 1, 1))
    sel = dict(select_prim="ge", window_dimensions=win["window_dimensions"], window_strides=win["window_strides"],
               padding=win["padding"])
    t, src = sample((2, 3, 6), dtype), sample((2, 3, 3), dtype)
    outs = run(lambda x, w, t, s: [
        lax.conv_general_dilated(x, w, (2,), ((1, 0),)),
        *[P[f"reduce_window_{k}"].bind(x, **win) for k in ("sum", "max", "min")],
        *lax.reduce_window((x,), (1.0,), lambda a, b: (lax.mul(a[0], b[0]),),
                           (1, 1, 2), (1, 1, 2)),
        P["select_and_gather_add"].bind(t, x, select_prim="ge", **win),
        P["select_and_scatter_add"].bind(s, x, **sel)], x, w, t, src)
    pairs = x.astype(F64).reshape(2, 3, 3, 2)
    padded = np.pad(x.astype(F64), ((0, 0), (0, 0), (1, 0)))
    conv = np.stack([np.einsum("nck,ock->no", padded[:, :, 2 * i:2 * i + 2], w.astype(F64)) for i in range(3)], -1)
    first = pairs[..., 0] >= pairs[..., 1]        # the element each window selects (first of ties)
    gathered = np.where(first, t.astype(F64).reshape(2, 3, 3, 2)[..., 0], t.astype(F64).reshape(2, 3, 3, 2)[..., 1])
    scattered = np.stack([np.where(first, src, 0), np.where(first, 0, src)], -1).reshape(2, 3, 6)
    wants = [conv, pairs.sum(-1), pairs.max(-1), pairs.min(-1), pairs.prod(-1), gathered, scattered]
    for got, want in zip(outs, wants):
        check(got, want, dtype, scale=64)
def test_random_gamma_and_its_derivative():
    """random_gamma: Gamma(a, 1) draws (mean a, all positive); random_gamma_grad: dx/da of a gamma
    sample by implicit differentiation, -(dP/da) / (dP/dx) for the regularized incomplete gamma P."""
    a = np.array([0.3, 1.0, 2.5, 6.0, 0.8, 40.0], F32)
    x = np.array([0.05, 1.5, 2.0, 9.0, 3.0, 38.0], F32)
    (got,) = run(lambda a, x: [P["random_gamma_grad"].bind(a, x)], a, x)
    a, x, h = a.astype(F64), x.astype(F64), 1e-6
    dP_da = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    dP_dx = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    np.testing.assert_allclose(got, -dP_da / dP_dx, rtol=1e-5)
    keys = np.array([[0, 1], [2, 3]], np.uint32)
    alpha = np.repeat(np.array([[0.5], [3.0]], F32), 2000, axis=1)
    for log_space in (False, True):
        (draws,) = run(lambda k, a: [P["random_gamma"].bind(k, a, log_space=log_space)], keys, alpha)
        draws = np.exp(draws) if log_space else draws
        assert np.all(draws >= 0) and np.all(np.isfinite(draws))
        np.testing.assert_allclose(draws.mean(1), [0.5, 3.0], rtol=0.1)


def test_checkify_check_lowers_to_nothing_in_debug_mode_else_refuses():
    from jaxprc.experimental import checkify
    x = sample((3,), F32)
    (out,) = run(lambda a: [checkify.debug_check(a[0] > 0, "dbg {}", a), a * 2][1], x)
    check(out, x.astype(F64) * 2, F32)
    with pytest.raises(ValueError, match="not functionalized"):
        run(lambda a: [checkify.check(a[0] > 0, "no"), a][1], x)


def test_dim_as_value_lowers_to_the_specialised_size():
    """A symbolic dimension used as a value is its size once the program is specialised."""
    from jaxprc import lax
    from jaxprc.passes import specialize_for_args
    b, = ir.symbolic_shape("b")
    poly = ir.trace_to_jaxpr(lambda x: [x * lax.dim_as_value(b)], [ShapedArray((b, 2), F32)])
    x = sample((3, 2), F32)
    out, = run_jaxpr(specialize_for_args(poly, [x.shape]), x)
    check(out, x * 3, F32)


def test_call_exported_lowers_the_module_into_the_caller():
    """A deserialized Exported's module called from a program (its functions merged in), twice."""
    import jaxprc
    from jaxprc import export
    from jaxprc.lax.exported_call import call_exported_p
    exp = export.export(jaxprc.jit(lambda x: (x * 2.0 + 1.0,)))(jaxprc.ShapeDtypeStruct((2, 3), F32))
    back = export.deserialize(exp.serialize())
    program = ir.trace_to_jaxpr(
        lambda x: [call_exported_p.bind(call_exported_p.bind(x, exported=back)[0], exported=back)[0]],
        [ShapedArray((2, 3), F32)])
    x = sample((2, 3), F32)
    out, = run_jaxpr(program, x)
    check(out, (x * 2 + 1) * 2 + 1, F32)


def test_every_builtin_primitive_is_checked_numerically(request, builtins):
    """Runs last: the tests above must have run (and checked) every built-in primitive."""
    if request.session.testscollected != len(request.session.items):
        pytest.skip("some tests were deselected: coverage needs the whole module")
    if getattr(request.config.option, "dist", "no") not in ("no", "loadfile", "loadscope"):
        pytest.skip("xdist spreads this module's tests over workers: coverage needs them in one")
    no_lowering = {"custom_lin"}     # by design: transposed away before lowering (test above)
    no_lowering.add("ragged_all_to_all")   # XLA:CPU cannot compile it (its lowering: test_collectives2.py)
    no_lowering.add("ffi_call")            # needs a C++ handler: tests/test_ffi.py builds one and runs it
    unchecked = {p.name for p in builtins} - _CHECKED - no_lowering
    assert not unchecked, f"primitives without a numeric lowering test: {sorted(unchecked)}"
