"""lax's dtype rules against JAX (issue 32): a Python scalar operand has its default dtype (no
adapting to the other operand), mixed dtypes and refused kinds raise TypeError with JAX's
message, eagerly and under jit, with x64 off and on; what JAX accepts gives the same dtype and
weak type."""
import jax
import numpy as np
import pytest

import jaxprc

F16 = np.ones(3, np.float16)
BF16 = np.ones(3, jax.numpy.bfloat16)
F32 = np.ones(3, np.float32)
I8 = np.ones(3, np.int8)
I32 = np.ones(3, np.int32)
U8 = np.ones(3, np.uint8)
B = np.ones(3, bool)
C64 = np.ones(3, np.complex64)

# (name, call of a library's lax)
CASES = [
    ("f16 + python float", lambda lax: lax.add(F16, 1.0)),
    ("python int * bf16", lambda lax: lax.mul(2, BF16)),
    ("i8 * python int", lambda lax: lax.mul(I8, 2)),
    ("u8 & python int", lambda lax: lax.bitwise_and(U8, 3)),
    ("i32 + python int", lambda lax: lax.add(I32, 1)),
    ("f32 + python float", lambda lax: lax.add(F32, 1.0)),
    ("c64 + python float", lambda lax: lax.add(C64, 1.0)),
    ("max f32 python int", lambda lax: lax.max(F32, 0)),
    ("python ints", lambda lax: lax.add(1, 2)),
    ("python int + float", lambda lax: lax.add(1, 1.0)),
    ("python int + bool", lambda lax: lax.add(1, True)),
    ("i32 + python bool", lambda lax: lax.add(I32, True)),
    ("bool & python bool", lambda lax: lax.bitwise_and(B, True)),
    ("i32 & python bool", lambda lax: lax.bitwise_and(I32, True)),
    ("pow f16 python int", lambda lax: lax.pow(F16, 2)),
    ("pow f16 python float", lambda lax: lax.pow(F16, 2.0)),
    ("eq f32 python int", lambda lax: lax.eq(F32, 0)),
    ("div i32 python float", lambda lax: lax.div(I32, 2.0)),
    ("i32 + f32", lambda lax: lax.add(I32, F32)),
    ("f32 - f16", lambda lax: lax.sub(F32, F16)),
    ("bool + bool", lambda lax: lax.add(B, B)),
    ("atan2 of ints at position 1", lambda lax: lax.atan2(F32, I32)),
    ("and of floats", lambda lax: lax.bitwise_and(F32, F32)),
    ("rem of complex", lambda lax: lax.rem(C64, C64)),
    ("lt of complex", lambda lax: lax.lt(C64, C64)),
    ("nextafter of ints", lambda lax: lax.nextafter(I32, I32)),
    ("sin of int", lambda lax: lax.sin(I32)),
    ("neg of bool", lambda lax: lax.neg(B)),
    ("not of float", lambda lax: lax.bitwise_not(F32)),
    ("complex of f32 and python int", lambda lax: lax.complex(F32, 1)),
    ("clamp python floats around ints", lambda lax: lax.clamp(0.0, I32, 2.0)),
    ("clamp python ints around floats", lambda lax: lax.clamp(0, F32, 2)),
    ("clamp python floats around f32", lambda lax: lax.clamp(0.0, F32, 2.0)),
    ("select_n of int and float", lambda lax: lax.select_n(B, I32, F32)),
]


def outcome(lib, case, jit):
    """("ok", dtype, weak type) or ("error", type, message) of ``case`` run by ``lib``."""
    fn = (lambda: lib.jit(lambda: case(lib.lax))()) if jit else (lambda: case(lib.lax))
    try:
        out = fn()
    except TypeError as e:
        return ("error", "TypeError", str(e))
    return ("ok", np.asarray(out).dtype.name, bool(out.weak_type))


def _check(case, jit):
    ours, theirs = outcome(jaxprc, case, jit), outcome(jax, case, jit)
    assert ours[:2] == theirs[:2]
    if ours[0] == "ok":
        assert ours == theirs
    else:     # JAX's message, which jaxprc may follow with the operands' types
        assert ours[2].startswith(theirs[2]), (ours[2], theirs[2])


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_lax_dtype_rules_as_jax(case, jit):
    _check(case, jit)


X64_CASES = [
    ("f32 + python float", lambda lax: lax.add(F32, 1.0)),
    ("f64 + python float", lambda lax: lax.add(np.ones(3), 1.0)),
    ("i32 + python int", lambda lax: lax.add(I32, 1)),
]


@pytest.mark.x64
@pytest.mark.parametrize("case", [c[1] for c in X64_CASES], ids=[c[0] for c in X64_CASES])
def test_lax_dtype_rules_as_jax_with_x64(case):
    _check(case, jit=False)


def test_the_library_still_differentiates_narrow_floats():
    """jaxprc's own rules write Python scalars for every dtype; the user's strictness is not theirs."""
    def f(lib, x):
        return lib.grad(lambda x: lib.numpy.sum(lib.lax.atanh(x) + lib.lax.tanh(x) * lib.lax.rsqrt(x)))(x)
    x = np.array([0.25, 0.5], np.float16)
    ours, theirs = f(jaxprc, x), f(jax, x)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32), rtol=1e-2)
