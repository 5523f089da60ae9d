"""The narrow ml_dtypes types (float8/6/4, int/uint 1/2/4), ``accuracy=`` on the transcendental
ops and ``lax.DotAlgorithm``: values against ml_dtypes' numpy arithmetic, promotion, text round
trips, lowering attributes and the errors XLA:CPU's gaps give."""
import ml_dtypes
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import dtypes as jdtypes
from jaxprc import lax
from jaxprc.ir import dtypes as irdt
from jaxprc.ir import parse
from jaxprc.runtime import XlaCompileError

from roundtrip import assert_round_trip

# The types XLA:CPU computes in (float6_* and int1/uint1 have no CPU form: tested apart).
FLOATS = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn"]
INTS = ["int2", "int4", "uint2", "uint4"]


def _values(name):
    t = np.dtype(getattr(ml_dtypes, name))
    if name in INTS:
        info = ml_dtypes.iinfo(t)
        return np.arange(info.min, info.max + 1).astype(t)
    if name == "float8_e8m0fnu":            # powers of two only
        return np.array([0.25, 0.5, 1.0, 2.0, 4.0], np.float32).astype(t)
    return np.array([-2.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0], np.float32).astype(t)


@jx.jit
def _ops(a, wide_values):
    return (a.astype(wide_values.dtype), wide_values.astype(a.dtype), a + a[::-1], a + 1, jnp.max(a))


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_create_convert_compute(name):
    x = _values(name)
    a = jnp.asarray(x)
    assert a.dtype == x.dtype and np.array_equal(np.asarray(a).view(np.uint8), x.view(np.uint8))
    wide = np.float32 if name in FLOATS else np.int32
    to_wide, back, added, plus_one, top = _ops(a, x.astype(wide))
    np.testing.assert_array_equal(np.asarray(to_wide), x.astype(wide))
    np.testing.assert_array_equal(np.asarray(back).view(np.uint8), x.view(np.uint8))
    # one op: computed wide and rounded once, as ml_dtypes' numpy arithmetic does
    want = (x.astype(wide) + x[::-1].astype(wide)).astype(x.dtype)
    assert added.dtype == plus_one.dtype == x.dtype              # Python scalars stay weak
    np.testing.assert_array_equal(np.asarray(added).astype(np.float32), want.astype(np.float32))
    assert float(top) == x.astype(np.float32).max()
    assert repr(a[:1]).startswith("Array([")


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_text_names_round_trip(name):
    t = np.dtype(getattr(ml_dtypes, name))
    c = _values(name)[:3]
    cj = jx.make_jaxpr(lambda x: (x * 2 + jnp.asarray(c), jnp.max(x)))(jnp.asarray(c))
    assert_round_trip(cj)
    assert f"{irdt.short_name(t)}[3]" in str(cj)


def test_parse_handwritten_program():
    cj = parse("{ lambda ; a:f8e4m3fn[] b:i4[2]. let c:f8e4m3fn[] = add a 1.5:f8e4m3fn[]; "
               "d:u4[2] = convert_element_type[new_dtype=u4 weak_type=False] b in (c, d) }")
    c, d = jx.jaxpr_as_fun(cj)(np.array(0.5, ml_dtypes.float8_e4m3fn), np.array([3, 7], ml_dtypes.int4))
    assert float(c) == 2.0
    assert d.dtype == np.dtype(ml_dtypes.uint4) and list(np.asarray(d).astype(int)) == [3, 7]
    with pytest.raises(Exception, match="out of range for i4"):
        parse("{ lambda ; a:i4[]. let b:i4[] = add a 9:i4[] in (b,) }")


def test_promotion():
    f8, f8b, i4, u4 = jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int4, jnp.uint4
    assert jnp.promote_types(f8, float) == np.dtype(ml_dtypes.float8_e4m3fn)
    assert jnp.promote_types(i4, int) == np.dtype(ml_dtypes.int4)
    assert jnp.promote_types(jnp.bool_, i4) == np.dtype(ml_dtypes.int4)
    assert jnp.promote_types(jnp.int8, f8) == np.dtype(ml_dtypes.float8_e4m3fn)   # i8 <= f* <= f8
    for a, b, what in ((f8, f8b, "8-bit floats"), (f8, jnp.float32, "8-bit floats"),
                       (i4, u4, "1-bit, 2-bit and 4-bit integers"), (i4, jnp.int8, "4-bit integers"),
                       (jnp.float4_e2m1fn, jnp.bfloat16, "4-bit floats")):
        with pytest.raises(jdtypes.TypePromotionError, match=what):
            jnp.promote_types(a, b)
    with pytest.raises(jdtypes.TypePromotionError):
        jnp.ones(2, f8) + jnp.ones(2, jnp.float32)


def test_dtype_queries():
    assert jnp.issubdtype(jnp.float8_e4m3fn, jnp.floating)
    assert jnp.issubdtype(jnp.int4, jnp.signedinteger) and not jnp.issubdtype(jnp.int4, jnp.unsignedinteger)
    assert jnp.issubdtype(jnp.uint2, jnp.unsignedinteger) and jnp.issubdtype(jnp.uint2, jnp.integer)
    assert jnp.isdtype(jnp.float4_e2m1fn, "real floating") and jnp.isdtype(jnp.int2, "signed integer")
    assert float(jnp.finfo(jnp.float8_e4m3fn).max) == 448.0 and jnp.iinfo(jnp.int4).min == -8
    assert jdtypes.itemsize_bits(jnp.int4) == 4 and jdtypes.itemsize_bits(jnp.float8_e5m2) == 8
    assert jdtypes.scalar_type_of(jnp.ones(2, jnp.uint4)) is int
    assert jnp.float8_e5m2(2.5).dtype == np.dtype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(np.asarray(jnp.array([7, 8], jnp.int4)).astype(int), [7, -8])   # wraps


def test_bitcasts_by_bit_width():
    u8 = np.array([0x21, 0xF3], np.uint8)
    halves = lax.bitcast_convert_type(u8, jnp.int4)                  # 8 bits -> two 4-bit elements
    assert halves.shape == (2, 2) and np.asarray(halves).astype(int).tolist() == [[1, 2], [3, -1]]
    np.testing.assert_array_equal(lax.bitcast_convert_type(halves, np.uint8), u8)
    f8 = lax.bitcast_convert_type(u8, jnp.float8_e4m3fn)
    assert f8.shape == (2,) and np.array_equal(np.asarray(f8).view(np.uint8), u8)


def test_two_bit_concatenation():
    # XLA:CPU aborts on a concatenate of 2-bit integers (JAX's process dies): it goes through int8
    for t in (jnp.int2, jnp.uint2):
        x = jnp.array([1, 0, 1], t)
        np.testing.assert_array_equal(np.asarray(jnp.concatenate([x, x[:1]])).astype(int), [1, 0, 1, 1])
        assert jnp.stack([x, x]).shape == (2, 3)


def test_reductions_without_infinities():
    x = jnp.asarray(np.array([-3.0, -1.0], ml_dtypes.float8_e4m3fn))     # e4m3fn has no -inf
    assert float(jnp.max(x)) == -1.0 and float(jnp.min(x)) == -3.0


def test_what_xla_cpu_cannot_run():
    with pytest.raises(TypeError, match="float6_e2m3fn arrays cannot be placed"):
        jnp.array([1.0], jnp.float6_e2m3fn)
    with pytest.raises(TypeError, match="int1 has no StableHLO element type.*1-bit"):
        jnp.zeros(2, jnp.int1)
    with pytest.raises(XlaCompileError, match="S2"):
        jnp.dot(jnp.ones((2, 2), jnp.int2), jnp.ones((2, 2), jnp.int2))


# ------------------------------------------------------------------ accuracy=

_ACCURACY_OPS = [lax.exp, lax.exp2, lax.log, lax.log1p, lax.expm1, lax.tanh, lax.logistic, lax.sin, lax.cos,
                 lax.tan, lax.sqrt, lax.rsqrt, lax.cbrt]


def test_accuracy_values_text_and_lowering():
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    tol, high = lax.Tolerance(atol=1e-3, ulps=2), lax.AccuracyMode.HIGHEST

    def f(x):
        return [op(x, accuracy=tol if i % 2 else high) for i, op in enumerate(_ACCURACY_OPS)]
    for got, op in zip(jx.jit(f)(x), _ACCURACY_OPS):
        np.testing.assert_allclose(got, op(x), rtol=1e-6)
    cj = jx.make_jaxpr(f)(x)
    assert "exp[accuracy=AccuracyMode.HIGHEST]" in str(cj)
    assert "exp2[accuracy=Tolerance(atol=0.001, rtol=0.0, ulps=2)]" in str(cj)
    assert_round_trip(cj)
    assert "accuracy" not in str(jx.make_jaxpr(lax.exp)(x))        # absent unless asked for
    text = jx.jit(f).lower(x).as_text()
    assert "stablehlo.exponential %arg0 {result_accuracy = #stablehlo.result_accuracy<mode = " \
           "#stablehlo.result_accuracy_mode<HIGHEST>>}" in text
    assert "result_accuracy<atol = 1.000000e-03, ulps = 2, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>" \
        in text
    assert np.allclose(jx.vmap(lambda v: lax.sin(v, accuracy=high))(x), np.sin(x))


def test_accuracy_derivatives():
    for op, d in ((lax.tanh, lambda v: 1 - np.tanh(v) ** 2), (lax.logistic, lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2),
                  (lax.expm1, np.exp), (lax.sin, np.cos), (lax.cos, lambda v: -np.sin(v))):
        g = jx.grad(lambda v: op(v, accuracy=lax.AccuracyMode.HIGHEST))
        np.testing.assert_allclose(g(0.7), d(0.7), rtol=1e-5)
        assert_round_trip(jx.make_jaxpr(g)(0.7))
    # the tangent's sin keeps the request (JAX's rule)
    assert "sin[accuracy=AccuracyMode.HIGHEST]" in str(jx.make_jaxpr(
        jx.grad(lambda v: lax.cos(v, accuracy=lax.AccuracyMode.HIGHEST)))(0.7))


def test_accuracy_errors():
    with pytest.raises(ValueError, match="non-negative"):
        lax.Tolerance(atol=-1.0)
    with pytest.raises(ValueError, match="At least one"):
        lax.Tolerance()
    with pytest.raises(TypeError, match="lax.exp: accuracy must be"):
        lax.exp(1.0, accuracy="high")
    with pytest.raises(Exception, match="accuracy"):
        parse("{ lambda ; a:f32[]. let b:f32[] = exp[accuracy=3] a in (b,) }")


# ------------------------------------------------------------------ DotAlgorithm

def test_dot_algorithm():
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    alg = lax.DotAlgorithm(jnp.float16, np.float16, np.float32)
    cj = jx.make_jaxpr(lambda u: lax.dot(u, u.T, precision=alg))(a)
    assert "lhs_precision_type=f16" in str(cj) and "accumulation_type=f32" in str(cj)
    assert_round_trip(cj)
    g = jx.make_jaxpr(jx.grad(lambda u: lax.dot(u, u.T, precision=alg).astype(np.float32).sum()))(a)
    assert str(g).count("DotAlgorithm(") == str(g).count("dot_general") == 2     # both transposes
    assert_round_trip(g)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        jx.jit(lambda u: lax.dot(u, u.T, precision=alg))(a)
    # presets by name, through jnp
    assert "DotAlgorithmPreset.F16_F16_F16" in str(jx.make_jaxpr(
        lambda u: jnp.einsum("ij,kj->ik", u, u, precision="F16_F16_F16"))(a))
    np.testing.assert_array_equal(jnp.matmul(a, a.T, precision="F16_F16_F16"), a @ a.T)
    with pytest.raises(ValueError, match="DotAlgorithm value"):
        lax.dot(a, a.T, precision="NOT_A_PRESET")


def test_shape_as_value():
    assert lax.shape_as_value((2, 3)).dtype == np.int32 and list(lax.shape_as_value((2, 3))) == [2, 3]
    assert lax.shape_as_value((2 ** 31, 1)).dtype == np.int64
    empty = lax.shape_as_value(())
    assert empty.shape == (0,) and empty.dtype == np.int32


# ------------------------------------------------------------------ tokens

def test_tokens():
    t = lax.create_token()
    assert repr(t) == "Token()" and repr(lax.after_all(t, t)) == "Token()"
    f = jx.jit(lambda t, x: (lax.after_all(t, lax.create_token()), x + 1))
    t2, y = f(t, 1.0)
    assert isinstance(t2, type(t)) and float(y) == 2.0
    cj = jx.make_jaxpr(f)(t, 1.0)
    assert "token[]" in str(cj) and "after_all" in str(cj)
    assert_round_trip(cj)
    text = f.lower(t, 1.0).as_text()
    assert "stablehlo.after_all" in text and "!stablehlo.token" in text
    # through control flow, and past differentiation (tokens have no tangents)
    loop = jx.jit(lambda t: lax.fori_loop(0, 3, lambda i, c: lax.after_all(c, lax.create_token()), t))
    assert repr(loop(t)) == "Token()"
    assert jx.grad(lambda x: (lax.create_token(), x * 2.0)[1])(1.0) == 2.0
    assert repr(jx.vmap(lambda x: (lax.create_token(), x), out_axes=(None, 0))(np.ones(2))[0]) == "Token()"


def test_token_errors():
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        lax.after_all(1.0)
    with pytest.raises(Exception, match="tokens cannot be broadcast or batched"):
        jx.vmap(lambda x: (lax.create_token(), x))(np.ones(2))
    with pytest.raises(Exception, match="tokens are 0-d"):
        parse("{ lambda ; a:token[2]. let  in (a,) }")
    with pytest.raises(Exception, match="after_all"):
        parse("{ lambda ; a:f32[]. let b:token[] = after_all a in (b,) }")
