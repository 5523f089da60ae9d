"""The narrow ml_dtypes types, ``accuracy=`` and ``lax.DotAlgorithm`` against JAX: the promotion
table, values (bit for bit) on XLA:CPU, finfo/iinfo, and the lowered StableHLO attributes."""
import itertools
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import jaxprc
import jaxprc.numpy as xnp
from jaxprc import lax as xlax
from jaxprc.dtypes import TypePromotionError
from jaxprc.engine.lowering import lower_jaxpr

NARROW = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
          "int1", "int2", "int4", "uint1", "uint2", "uint4"]
WIDE = ["bool_", "int8", "int16", "int32", "uint8", "uint32", "float16", "bfloat16", "float32", "complex64"]
COMPUTED = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
            "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn", "int2", "int4", "uint2", "uint4"]


def _promote(np_mod, a, b):
    try:
        return np.dtype(np_mod.promote_types(a, b))
    except (TypePromotionError, jax.dtypes.TypePromotionError) as e:
        return type(e).__name__ + re.sub(r"\(.*\)", "", str(e))       # the message without the names


def test_promotion_table_matches_jax():
    names = NARROW + WIDE
    kinds = [(getattr(jnp, n), getattr(xnp, n)) for n in names] + [(t, t) for t in (int, float, complex)]
    for (ja, xa), (jb, xb) in itertools.product(kinds, repeat=2):
        want, got = _promote(jnp, ja, jb), _promote(xnp, xa, xb)
        assert got == want, (ja, jb, got, want)


@pytest.mark.parametrize("name", NARROW)
def test_dtype_queries_match_jax(name):
    j, x = getattr(jnp, name), getattr(xnp, name)
    assert np.dtype(x) == np.dtype(j)
    for kind in (jnp.floating, jnp.integer, jnp.signedinteger, jnp.unsignedinteger, jnp.inexact, jnp.number):
        assert xnp.issubdtype(x, kind) == jnp.issubdtype(j, kind), kind
    assert jaxprc.dtypes.itemsize_bits(x) == jax.dtypes.itemsize_bits(j)
    info = jnp.finfo if jnp.issubdtype(j, jnp.floating) else jnp.iinfo
    ours = xnp.finfo if info is jnp.finfo else xnp.iinfo
    for field in ("bits", "min", "max") + (("eps", "tiny") if info is jnp.finfo else ()):
        assert float(getattr(ours(x), field)) == float(getattr(info(j), field)), field


def _values(name):
    t = np.dtype(getattr(ml_dtypes, name))
    if name.startswith(("int", "uint")):
        info = ml_dtypes.iinfo(t)
        return np.arange(info.min, info.max + 1).astype(t)
    edges = [-np.inf, -500.0, -2.0, -0.3, -0.0, 0.0, 0.01, 0.5, 1.0, 1.5, 3.0, 500.0, np.inf, np.nan]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.array(edges, np.float32).astype(t)


def _fns(np_mod, name):
    fns = [lambda a, w: a + a[::-1], lambda a, w: a * a[::-1], lambda a, w: a - 1,
           lambda a, w: a.astype(np.float32), lambda a, w: w.astype(a.dtype), lambda a, w: np_mod.max(a),
           lambda a, w: a < a[::-1], lambda a, w: np_mod.where(a > a[::-1], a, a[::-1])]
    if name.startswith("float"):
        fns += [lambda a, w: np_mod.exp(a), lambda a, w: -a, lambda a, w: a / 2]
    return fns


@pytest.mark.parametrize("name", COMPUTED)
def test_values_match_jax_bits(name):
    x = _values(name)
    wide = np.float32 if name.startswith("float") else np.int32
    # conversions into the type from out-of-range, infinite and NaN floats: XLA's, in both
    w = np.array([-1e6, -7.0, -0.4, 0.0, 0.2, 2.5, 9.0, 1e6, np.inf, -np.inf, np.nan], np.float32)
    w = w if wide == np.float32 else np.array([-9, -3, -1, 0, 1, 2, 5, 17], np.int32)
    both = lambda np_mod: lambda a, w: [f(a, w) for f in _fns(np_mod, name)]  # noqa: E731 (one program)
    wants = jax.jit(both(jnp))(jnp.asarray(x), jnp.asarray(w))
    gots = jaxprc.jit(both(xnp))(xnp.asarray(x), xnp.asarray(w))
    for k, (got, want) in enumerate(zip(gots, wants)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (name, k, got, want)


def test_what_xla_cpu_cannot_run_fails_in_both():
    for make in (lambda np_mod: np_mod.array([1.0], np_mod.float6_e2m3fn),
                 lambda np_mod: np_mod.dot(np_mod.ones((2, 2), np_mod.int2), np_mod.ones((2, 2), np_mod.int2))):
        with pytest.raises(Exception):
            make(jnp)
        with pytest.raises(Exception):
            make(xnp)


# ----------------------------------------------------------------- lowered attributes

_ACC_OPS = ["exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "sqrt", "rsqrt",
            "cbrt"]


def _attrs(text, pattern):
    return re.findall(pattern, text)


@pytest.mark.parametrize("accuracy", ["HIGHEST", "DEFAULT", "tol", "ulps"])
def test_accuracy_lowers_as_jax(accuracy):
    def make(lax):
        acc = {"tol": lambda: lax.Tolerance(atol=1e-3, rtol=1e-4), "ulps": lambda: lax.Tolerance(atol=1e-2, ulps=3)
               }.get(accuracy, lambda: getattr(lax.AccuracyMode, accuracy))()
        return lambda x: [getattr(lax, op)(x, accuracy=acc) for op in _ACC_OPS]
    x = np.linspace(0.2, 0.8, 3).astype(np.float32)
    want_text = jax.jit(make(jlax)).lower(x).as_text()
    got_text = jaxprc.jit(make(xlax)).lower(x).as_text()
    pattern = r"stablehlo\.(\w+) [^\n]*?(\{result_accuracy = [^\n]*\})"
    assert sorted(_attrs(got_text, pattern)) == sorted(_attrs(want_text, pattern))
    for got, want in zip(jaxprc.jit(make(xlax))(x), jax.jit(make(jlax))(x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    if accuracy != "HIGHEST":          # (only HIGHEST changes the derivative rules)
        return
    gj = jax.grad(lambda v: sum(f.sum() for f in make(jlax)(v)))(x)
    gx = jaxprc.grad(lambda v: sum(f.sum() for f in make(xlax)(v)))(x)
    np.testing.assert_allclose(gx, gj, rtol=1e-5)


def test_dot_algorithm_lowers_as_jax():
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    cases = [(lambda lax: lax.DotAlgorithm(np.float16, np.float16, np.float32), "cuda"),
             (lambda lax: lax.DotAlgorithm(np.float32, np.float32, np.float32, 1, 1, 1, False), "cuda"),
             (lambda lax: lax.DotAlgorithmPreset.BF16_BF16_F32_X3, "cpu"),
             (lambda lax: "TF32_TF32_F32", "cuda")]
    pattern = r"algorithm = <[^>]*>"
    for alg, platform in cases:
        f = lambda lax: (lambda u: lax.dot(u, u.T, precision=alg(lax)))  # noqa: E731
        want = jax.jit(f(jlax)).trace(a).lower(lowering_platforms=(platform,)).as_text()
        got = lower_jaxpr(jaxprc.make_jaxpr(f(xlax))(a), platform=platform).as_text()
        assert _attrs(got, pattern) == _attrs(want, pattern) != [], (alg, platform)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        jax.jit(lambda u: jlax.dot(u, u.T, precision=jlax.DotAlgorithm(np.float16, np.float16, np.float32)))(a)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        jaxprc.jit(lambda u: xlax.dot(u, u.T, precision=xlax.DotAlgorithm(np.float16, np.float16, np.float32)))(a)


def test_shape_as_value_matches_jax():
    for shape in ((), (2, 3), (2 ** 31, 1), (0, 5)):
        want, got = jlax.shape_as_value(shape), xlax.shape_as_value(shape)
        assert type(got).__module__.startswith("numpy") == type(want).__module__.startswith("numpy")
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_tokens_as_jax():
    for lax in (jlax, xlax):
        t = lax.create_token()
        f = (jax if lax is jlax else jaxprc).jit(lambda t, x: (lax.after_all(t, lax.create_token()), x + 1))
        t2, y = f(t, 1.0)
        assert type(t2).__name__ == "Token" and float(y) == 2.0
        text = f.lower(t, 1.0).as_text()
        # (jaxprc's entry takes the token as a boolean and starts a fresh chain: one more create_token)
        assert text.count("stablehlo.create_token") == (1 if lax is jlax else 2)
        assert text.count("stablehlo.after_all") == 1
        with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
            lax.after_all(1.0)


def test_bitcasts_match_jax():
    u8 = np.arange(0, 240, 40, dtype=np.uint8)

    def both(np_mod, lax):       # one program per library: every type there and back
        def f(x):
            there = [lax.bitcast_convert_type(x, getattr(np_mod, name)) for name in COMPUTED]
            return there + [lax.bitcast_convert_type(t, np.uint8) for t in there]
        return f
    for k, (got, want) in enumerate(zip(jaxprc.jit(both(xnp, xlax))(u8), jax.jit(both(jnp, jlax))(u8))):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, COMPUTED[k % len(COMPUTED)]
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), COMPUTED[k % len(COMPUTED)]
