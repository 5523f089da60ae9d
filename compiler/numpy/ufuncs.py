"""Elementwise math with numpy broadcasting and JAX's type promotion (weak types included).

Each function promotes its operands (``_util.promote``: explicit
``convert_element_type`` and ``broadcast_in_dim``) and binds one elementwise
primitive; functions numpy defines differently from XLA (floor_divide,
remainder, power on integers, ...) are compositions.
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.api import JitFunction
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc.engine.dispatch import eager_function
from jaxprc.ir import dtypes as dt
from jaxprc.lax import elementwise as ew

from jaxprc.runtime import Array

from ._util import aval_of, convert, promote
from .creation import asarray, full_like, ones_like, zeros_like



def _strong_const(value, dtype):
    """A strongly typed constant, as JAX's ``_constant_like`` makes: combined with weakly typed
    operands it makes the result strongly typed (JAX's isinf, log2, power of integers...)."""
    return convert(value, dtype)


def _const_like(x, value):
    """``value`` in x's dtype as JAX's ``lax._const`` makes it: weakly typed only when ``x`` is a
    weakly typed scalar, so weakly typed arrays still give strongly typed results."""
    a = aval_of(x)
    return convert(value, a.dtype, weak=a.weak_type and a.ndim == 0)


def _reject_complex(fn: str, dtype, error=TypeError):
    if dt.is_complex(dtype):        # (the error class JAX raises for ``fn``)
        raise error(f"{fn} is not defined for complex inputs (got {dtype.name}); "
                         "convert to real values first, e.g. with abs(x)")


def _check_kind(fn: str, dtype, ok, what: str):
    if not ok(dtype):
        raise TypeError(f"{fn} does not accept dtype {dtype.name}: it expects {what}")


def _unop(prim, name: str, *, to_inexact=False, accepts=None, what="", identity_for=None):
    """A one-operand ufunc binding ``prim``; ``identity_for(dtype)`` marks dtypes it leaves unchanged."""
    def fn(x, /):
        (x,), dtype, _ = promote(name, x, to_inexact=to_inexact)
        if identity_for is not None and identity_for(dtype):
            return asarray(x)
        if accepts is not None:
            _check_kind(name, dtype, accepts, what)
        return prim.bind(x)

    def direct(*args):     # fn(x) binds prim on x itself
        if len(args) != 1 or type(args[0]) is not Array:
            return False
        dtype = args[0].aval.dtype
        return ((not to_inexact or dt.is_inexact(dtype)) and (identity_for is None or not identity_for(dtype))
                and (accepts is None or accepts(dtype)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (jax.numpy semantics; lowers to the ``{prim.name}`` primitive)."
    return eager_function(fn, prim, direct, JitFunction)


def _binop(prim, name: str, *, to_inexact=False, accepts=None, what=""):
    def fn(x1, x2, /):
        (x1, x2), dtype, _ = promote(name, x1, x2, to_inexact=to_inexact)
        if accepts is not None:
            _check_kind(name, dtype, accepts, what)
        return prim.bind(x1, x2)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting (the ``{prim.name}`` primitive)."
    return eager_function(fn, prim, _direct_binary(
        lambda d: (not to_inexact or dt.is_inexact(d)) and (accepts is None or accepts(d))), JitFunction)


def _direct_binary(ok):
    """For ``eager_function``: a binary ufunc binds its primitive on its operands themselves when
    they are device Arrays of one type (nothing to promote or broadcast) whose dtype is ``ok``."""
    def direct(*args):
        if len(args) != 2 or type(args[0]) is not Array or type(args[1]) is not Array:
            return False
        aval = args[0].aval
        return aval is args[1].aval and ok(aval.dtype)
    return direct


_INT_OR_BOOL = lambda d: dt.is_int(d) or dt.is_bool(d)
_NOT_BOOL = lambda d: not dt.is_bool(d)
_NUMERIC = "a numeric (non-boolean) dtype"

# -- unary ------------------------------------------------------------------
negative = _unop(ew.neg_p, "negative", accepts=_NOT_BOOL, what=_NUMERIC)
sign = _unop(ew.sign_p, "sign", accepts=_NOT_BOOL, what=_NUMERIC)
floor = _unop(ew.floor_p, "floor", identity_for=_INT_OR_BOOL)
ceil = _unop(ew.ceil_p, "ceil", identity_for=_INT_OR_BOOL)
exp = _unop(ew.exp_p, "exp", to_inexact=True)
exp2 = _unop(ew.exp2_p, "exp2", to_inexact=True)
expm1 = _unop(ew.expm1_p, "expm1", to_inexact=True)
log = _unop(ew.log_p, "log", to_inexact=True)
log1p = _unop(ew.log1p_p, "log1p", to_inexact=True)
sqrt = _unop(ew.sqrt_p, "sqrt", to_inexact=True)
cbrt = _unop(ew.cbrt_p, "cbrt", to_inexact=True)
sin = _unop(ew.sin_p, "sin", to_inexact=True)
cos = _unop(ew.cos_p, "cos", to_inexact=True)
tan = _unop(ew.tan_p, "tan", to_inexact=True)
arcsin = _unop(ew.asin_p, "arcsin", to_inexact=True)
arccos = _unop(ew.acos_p, "arccos", to_inexact=True)
arctan = _unop(ew.atan_p, "arctan", to_inexact=True)
sinh = _unop(ew.sinh_p, "sinh", to_inexact=True)
cosh = _unop(ew.cosh_p, "cosh", to_inexact=True)
tanh = _unop(ew.tanh_p, "tanh", to_inexact=True)
arcsinh = _unop(ew.asinh_p, "arcsinh", to_inexact=True)
arccosh = _unop(ew.acosh_p, "arccosh", to_inexact=True)
arctanh = _unop(ew.atanh_p, "arctanh", to_inexact=True)
conjugate = conj = _unop(ew.conj_p, "conjugate", identity_for=lambda d: not dt.is_complex(d))
bitwise_not = invert = _unop(ew.not_p, "bitwise_not", accepts=_INT_OR_BOOL, what="an integer or boolean dtype")
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh


def _promote_numeric(fn, *args):
    """Operands promoted, booleans counting as int32 (JAX's promote_dtypes_numeric)."""
    args, dtype, weak = promote(fn, *args)
    if dt.is_bool(dtype):
        dtype = dt.to_numeric_dtype(dtype)
        args = [convert(x, dtype, weak) for x in args]
    return args, dtype


def square(x, /):
    (x,), _ = _promote_numeric("square", x)
    return ew.square_p.bind(x)


def bitwise_count(x, /):
    """The number of 1 bits of ``|x|``, as uint8 (numpy's and JAX's result type)."""
    (x,), dtype = _promote_numeric("bitwise_count", x)
    _check_kind("bitwise_count", dtype, dt.is_int, "an integer dtype")
    return convert(ew.population_count_p.bind(absolute(x)), dt.uint8)


def positive(x, /):
    (x,), _, _ = promote("positive", x)
    return asarray(x)


def absolute(x, /):
    """``|x|``; unsigned and boolean values are returned unchanged, complex gives its real dtype."""
    (x,), dtype, _ = promote("absolute", x)
    if dt.is_unsigned(dtype) or dt.is_bool(dtype):
        return asarray(x)
    return ew.abs_p.bind(x)


abs = absolute


def real(x, /):
    (x,), dtype, _ = promote("real", x)
    return ew.real_p.bind(x) if dt.is_complex(dtype) else positive(x)


def imag(x, /):
    (x,), dtype, _ = promote("imag", x)
    if dt.is_complex(dtype):
        return ew.imag_p.bind(x)
    return zeros_like(x)


def _by_parts(fn, x):
    """``fn`` applied to the real and imaginary parts of complex ``x`` separately (as JAX does)."""
    return lax.complex(fn(ew.real_p.bind(x)), fn(ew.imag_p.bind(x)))


def round(a, decimals: int = 0):
    """Round half to even, like numpy; integers are returned unchanged (negative ``decimals`` on
    integers is rejected, as JAX, rather than silently ignored), booleans rejected (as JAX);
    complex values round both parts."""
    (x,), dtype, _ = promote("round", a)
    if dt.is_bool(dtype):       # (a ValueError, as JAX's)
        raise ValueError(f"round does not accept dtype bool: it expects {_NUMERIC}")
    if dt.is_int(dtype):
        if decimals < 0:
            raise NotImplementedError(f"round: integer input with decimals={decimals} < 0 is not supported (as JAX)")
        return asarray(x)
    if dt.is_complex(dtype):
        return _by_parts(lambda part: round(part, decimals), x)
    if decimals == 0:
        return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = _const_like(x, 10.0 ** decimals)
    return divide(lax.round(multiply(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


around = round


def rint(x, /):
    """Round half to even; integers and booleans become (strongly typed) default floats, as in JAX."""
    (x,), dtype, _ = promote("rint", x)
    if _INT_OR_BOOL(dtype):
        return convert(x, dt.default_float_dtype())
    if dt.is_complex(dtype):
        return _by_parts(rint, x)
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def trunc(x, /):
    (x,), dtype, _ = promote("trunc", x)
    if _INT_OR_BOOL(dtype):
        return asarray(x)
    from .selection import where
    return where(less(x, 0), ceil(x), floor(x))


fix = trunc


def reciprocal(x, /):
    (x,), _, _ = promote("reciprocal", x, to_inexact=True)
    return ew.integer_pow_p.bind(x, y=-1)


def log2(x, /):
    (x,), dtype, _ = promote("log2", x, to_inexact=True)
    return divide(log(x), log(_strong_const(2, dtype)))


def log10(x, /):
    (x,), dtype, _ = promote("log10", x, to_inexact=True)
    if dt.is_complex(dtype):
        return divide(log(x), log(_strong_const(10, dtype)))
    return multiply(log(x), _strong_const(1 / np.log(10), dtype))   # JAX's rounding: log(x) * (1/ln 10)


def deg2rad(x, /):
    (x,), _, _ = promote("deg2rad", x, to_inexact=True)
    return multiply(x, _const_like(x, np.pi / 180))


def rad2deg(x, /):
    (x,), _, _ = promote("rad2deg", x, to_inexact=True)
    return multiply(x, _const_like(x, 180 / np.pi))


radians, degrees = deg2rad, rad2deg


def isfinite(x, /):
    (x,), dtype, _ = promote("isfinite", x)
    if dt.is_float(dtype):
        return ew.is_finite_p.bind(x)
    if dt.is_complex(dtype):
        return logical_and(isfinite(real(x)), isfinite(imag(x)))
    return _bool_like(x, True)


def isinf(x, /):
    (x,), dtype, _ = promote("isinf", x)
    if dt.is_float(dtype):
        return equal(absolute(x), _strong_const(np.inf, dtype))
    if dt.is_complex(dtype):
        return logical_or(isinf(real(x)), isinf(imag(x)))
    return _bool_like(x, False)


def _is_inf_of_sign(fn: str, x, infinity):
    (x,), dtype, _ = promote(fn, x)
    _reject_complex(fn, dtype, ValueError)
    if not dt.is_float(dtype):
        return _bool_like(x, False)
    return equal(x, _strong_const(infinity, dtype))


def isposinf(x, /):
    return _is_inf_of_sign("isposinf", x, np.inf)


def isneginf(x, /):
    return _is_inf_of_sign("isneginf", x, -np.inf)


def isnan(x, /):
    # x != x is the test for every dtype (always False for integers), as in JAX.
    (x,), _, _ = promote("isnan", x)
    return not_equal(x, x)


def _bool_like(x, value):
    return full_like(x, value, dtype=dt.bool_)


def signbit(x, /):
    """Whether the sign bit is set; strongly typed, as JAX's."""
    (x,), dtype, _ = promote("signbit", x)
    _reject_complex("signbit", dtype, ValueError)
    if dt.is_bool(dtype):
        return _bool_like(x, False)
    if dt.is_float(dtype):
        bits = {2: dt.int16, 4: dt.int32, 8: dt.int64}[dtype.itemsize]
        x, dtype = ew.bitcast_convert_type_p.bind(x, new_dtype=bits), bits
    return less(x, _strong_const(0, dtype))


# -- binary -------------------------------------------------------------------
subtract = _binop(ew.sub_p, "subtract", accepts=_NOT_BOOL, what=_NUMERIC)
true_divide = divide = _binop(ew.div_p, "divide", to_inexact=True)
nextafter = _binop(ew.nextafter_p, "nextafter", to_inexact=True)
maximum = _binop(ew.max_p, "maximum")
minimum = _binop(ew.min_p, "minimum")
bitwise_and = _binop(ew.and_p, "bitwise_and", accepts=_INT_OR_BOOL, what="an integer or boolean dtype")
bitwise_or = _binop(ew.or_p, "bitwise_or", accepts=_INT_OR_BOOL, what="an integer or boolean dtype")
bitwise_xor = _binop(ew.xor_p, "bitwise_xor", accepts=_INT_OR_BOOL, what="an integer or boolean dtype")
equal = _binop(ew.eq_p, "equal")
not_equal = _binop(ew.ne_p, "not_equal")


def _ordered_comparison(prim, name: str):
    """A comparison ufunc; complex numbers compare lexicographically (real part, then imaginary),
    as in JAX."""
    def fn(x1, x2, /):
        (x1, x2), dtype, _ = promote(name, x1, x2)
        if not dt.is_complex(dtype):
            return prim.bind(x1, x2)
        from .selection import where
        return where(equal(real(x1), real(x2)), fn(imag(x1), imag(x2)), fn(real(x1), real(x2)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting (the ``{prim.name}`` primitive)."
    return eager_function(fn, prim, _direct_binary(lambda d: not dt.is_complex(d)), JitFunction)


less = _ordered_comparison(ew.lt_p, "less")
less_equal = _ordered_comparison(ew.le_p, "less_equal")
greater = _ordered_comparison(ew.gt_p, "greater")
greater_equal = _ordered_comparison(ew.ge_p, "greater_equal")


def arctan2(x1, x2, /):
    """The angle of the point ``(x2, x1)``; on complex inputs XLA's complex atan2, as JAX."""
    (x1, x2), _, _ = promote("arctan2", x1, x2, to_inexact=True)
    return ew.atan2_p.bind(x1, x2)


atan2 = arctan2


def add(x1, x2, /):
    """``x1 + x2``; on booleans it is logical or, as in numpy."""
    (x1, x2), dtype, _ = promote("add", x1, x2)
    return (ew.or_p if dt.is_bool(dtype) else ew.add_p).bind(x1, x2)


def multiply(x1, x2, /):
    """``x1 * x2``; on booleans it is logical and, as in numpy."""
    (x1, x2), dtype, _ = promote("multiply", x1, x2)
    return (ew.and_p if dt.is_bool(dtype) else ew.mul_p).bind(x1, x2)


add = eager_function(add, ew.add_p, _direct_binary(lambda d: not dt.is_bool(d)), JitFunction)
multiply = eager_function(multiply, ew.mul_p, _direct_binary(lambda d: not dt.is_bool(d)), JitFunction)


def fmod(x1, x2, /):
    """C's remainder (sign of ``x1``); booleans count as integers, as in JAX."""
    (x1, x2), dtype = _promote_numeric("fmod", x1, x2)
    return ew.rem_p.bind(x1, _nonzero_divisor(x2, dtype))


def _promote_shift(fn, x1, x2):
    """Shift operands: promoted, booleans counting as the default integer (as in JAX)."""
    (x1, x2), dtype = _promote_numeric(fn, x1, x2)
    _check_kind(fn, dtype, dt.is_int, "an integer dtype")
    return x1, x2, dtype


def left_shift(x1, x2, /):
    x1, x2, _ = _promote_shift("left_shift", x1, x2)
    return ew.shift_left_p.bind(x1, x2)


def right_shift(x1, x2, /):
    """Arithmetic shift for signed integers, logical for unsigned (numpy's ``>>``)."""
    x1, x2, dtype = _promote_shift("right_shift", x1, x2)
    prim = ew.shift_right_logical_p if dt.is_unsigned(dtype) else ew.shift_right_arithmetic_p
    return prim.bind(x1, x2)


def _truth(x):
    """``x != 0`` for non-boolean operands, the zero made as JAX's ``lax._const`` makes it: weakly
    typed scalars (Python scalars, and weak scalars under tracing) give a weak truth value, weakly
    typed arrays a strong one."""
    if dt.is_bool(aval_of(x).dtype):
        return x
    return not_equal(x, _const_like(x, 0))


def _logical(prim, name):
    def fn(*args):
        args, _, _ = promote(name, *args)       # promoted first, as in JAX
        return prim.bind(*map(_truth, args))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` on the truth values of its operands."
    return fn


logical_and = _logical(ew.and_p, "logical_and")
logical_or = _logical(ew.or_p, "logical_or")
logical_xor = _logical(ew.xor_p, "logical_xor")
logical_not = _logical(ew.not_p, "logical_not")


def floor_divide(x1, x2, /):
    """``x1 // x2`` rounding toward minus infinity (numpy), for integers and floats."""
    (x1, x2), dtype, weak = promote("floor_divide", x1, x2)
    if dt.is_bool(dtype):
        dtype = dt.to_numeric_dtype(dtype)
        x1, x2 = convert(x1, dtype), convert(x2, dtype)
    if dt.is_unsigned(dtype):
        return ew.div_p.bind(x1, x2)
    from .selection import where
    if dt.is_int(dtype):
        q = ew.div_p.bind(x1, x2)
        inexact = logical_and(not_equal(sign(x1), sign(x2)), not_equal(ew.rem_p.bind(x1, x2), 0))
        return where(inexact, subtract(q, 1), q)
    _check_kind("floor_divide", dtype, dt.is_float, "a real dtype")
    # Divide x1 - (x1 rem x2), an exact multiple of x2, then step down where the remainder's
    # sign differs from the divisor's; a zero divisor divides x1 itself (+-inf, as in JAX).
    mod = ew.rem_p.bind(x1, x2)
    q = divide(where(equal(x2, 0), x1, subtract(x1, mod)), x2)
    step_down = logical_and(not_equal(mod, 0), not_equal(sign(x2), sign(mod)))
    return lax.round(where(step_down, subtract(q, 1), q))


def _nonzero_divisor(x2, dtype):
    """Integer divisors with 0 replaced by 1, so that x % 0 is 0 as in JAX (XLA returns x)."""
    if not dt.is_int(dtype):
        return x2
    from .selection import where
    return where(equal(x2, 0), ones_like(x2), x2)


def remainder(x1, x2, /):
    """``x1 % x2`` with the sign of the divisor (numpy), for integers and floats."""
    (x1, x2), dtype, _ = promote("remainder", x1, x2)
    if dt.is_bool(dtype):
        dtype = dt.to_numeric_dtype(dtype)
        x1, x2 = convert(x1, dtype), convert(x2, dtype)
    x2 = _nonzero_divisor(x2, dtype)
    r = ew.rem_p.bind(x1, x2)
    if dt.is_unsigned(dtype):
        return r
    from .selection import where
    wrong_sign = logical_and(not_equal(r, 0), not_equal(less(r, 0), less(x2, 0)))
    return where(wrong_sign, add(r, x2), r)


mod = remainder


def divmod(x1, x2, /):
    return floor_divide(x1, x2), remainder(x1, x2)


def _concrete_index(x):
    """``x`` as a Python int when it is a concrete integer or boolean scalar (a Python or numpy
    scalar, a 0-d host array, an eager 0-d Array), else None: JAX's ``operator.index`` test."""
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        return int(x)
    if isinstance(x, (np.ndarray, Array)) and np.ndim(x) == 0 and _INT_OR_BOOL(np.dtype(x.dtype)):
        return int(np.asarray(x))
    return None


def power(x1, x2, /):
    """``x1 ** x2``, typed as JAX's: a concrete integer exponent (booleans and 0-d integer arrays
    included) becomes ``integer_pow`` of x1 (booleans counting as the default int); an integer
    exponent of an inexact base keeps the base's dtype and is weak only if both are; integers and
    booleans use exponentiation by squaring in the promoted integer dtype (exponents must be
    non-negative)."""
    y = _concrete_index(x2)
    if y is not None:
        (x1,), _ = _promote_numeric("power", x1)
        return ew.integer_pow_p.bind(x1, y=y)
    from .selection import where
    (a1, a2) = aval_of(x1, "power"), aval_of(x2, "power")
    if dt.is_inexact(a1.dtype) and _INT_OR_BOOL(a2.dtype) and not dt.is_bool(a2.dtype):
        # lax.pow of an integer exponent: the base's dtype; weak only when both operands are.
        # x**0 is 1 with a zero derivative in x, even at x = 0: the exponent 0 is replaced
        # under the select, so no 0 * x**-1 reaches the derivative.
        base, = promote("power", x1)[0]
        weak = a1.weak_type and a2.weak_type
        base = convert(base, a1.dtype, weak)
        (base, exponent), _, _ = promote("power", base, convert(x2, a1.dtype, weak))
        is_zero = equal(exponent, 0)
        one = _const_like(base, 1)
        return where(is_zero, one, ew.pow_p.bind(base, where(is_zero, one, exponent)))
    (x1, x2), dtype = _promote_numeric("power", x1, x2)
    if dt.is_inexact(dtype):
        return ew.pow_p.bind(x1, x2)
    # A strongly typed 1, as JAX's: integer powers of weakly typed arrays are strongly typed.
    acc, base, exponent = full_like(x1, 1, dtype=dtype), x1, x2
    for _ in range(dtype.itemsize * 8):
        acc = where(not_equal(bitwise_and(exponent, 1), 0), multiply(acc, base), acc)
        base = multiply(base, base)
        exponent = right_shift(exponent, 1)
    if np.issubdtype(dtype, np.signedinteger):
        # x ** -n is 1 / x**n truncated toward zero: 0 unless |x| == 1 (0 ** -n too, as in JAX).
        # (numpy raises; JAX's bit loop returns wrapped garbage such as 2**-100 = 268435456.)
        odd = not_equal(bitwise_and(x2, 1), 0)
        one, zero = full_like(x1, 1, dtype=dtype), full_like(x1, 0, dtype=dtype)
        recip = where(equal(x1, one), one, where(equal(x1, negative(one)), where(odd, negative(one), one), zero))
        acc = where(less(x2, zero), recip, acc)
    return acc


def float_power(x1, x2, /):
    """``x1 ** x2`` in the operands' inexact dtype (JAX's promote_args_inexact, not float64)."""
    (x1, x2), _, _ = promote("float_power", x1, x2, to_inexact=True)
    return ew.pow_p.bind(x1, x2)


def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` computed as ``big * sqrt(1 + (small/big)**2)``, which does not
    overflow; the result types follow JAX's (an infinite operand gives inf, even with NaN)."""
    (x1, x2), dtype, _ = promote("hypot", x1, x2, to_inexact=True)
    _reject_complex("hypot", dtype, ValueError)
    from .selection import where
    x1, x2 = absolute(x1), absolute(x2)
    any_inf = logical_or(isinf(x1), isinf(x2))
    big, small = maximum(x1, x2), minimum(x1, x2)
    is_zero = equal(big, 0)
    ratio = divide(small, where(is_zero, ones_like(big), big))
    out = where(is_zero, big, multiply(big, sqrt(add(1, square(ratio)))))
    return where(any_inf, _const_like(out, np.inf), out)


def _logaddexp_in_base(base_exp, log_of_base):
    """``log_b(b**x1 + b**x2)`` without overflow (``base_exp`` is b**x, ``log_of_base`` ln b, None
    for e), with the derivative ``b**(xi - out)`` (softmax weights: 1/2 each at a tie, where the
    composite through ``maximum`` and ``abs`` would give 0) and +inf read as 0 in it, as in JAX."""
    @custom_jvp
    def logaddexp_b(x1, x2):
        from .selection import where
        if dt.is_complex(aval_of(x1).dtype):
            return _complex_logaddexp(x1, x2)
        delta = subtract(x1, x2)
        soft = log1p(base_exp(negative(absolute(delta))))
        if log_of_base is not None:
            soft = multiply(_const_like(soft, 1 / log_of_base), soft)
        return where(isnan(delta), add(x1, x2), add(maximum(x1, x2), soft))   # inf - inf: x1 + x2

    @logaddexp_b.defjvp
    def _jvp(primals, tangents):
        from .selection import where
        x1, x2 = primals
        out = logaddexp_b(x1, x2)

        def finite(v):
            return where(isposinf(real(v)), zeros_like(v), v)
        weight1 = base_exp(subtract(finite(x1), finite(out)))
        weight2 = base_exp(subtract(finite(x2), finite(out)))
        return out, add(multiply(tangents[0], weight1), multiply(tangents[1], weight2))
    def _complex_logaddexp(x1, x2):
        # about the larger (lax.max's order: real part, then imaginary), the imaginary part of
        # the result wrapped into [-pi, pi) (in base b: [-pi / ln b, pi / ln b)), as JAX
        amax = lax.max(x1, x2)
        soft = log1p(base_exp(subtract(add(x1, x2), multiply(amax, _const_like(amax, 2)))))
        if log_of_base is not None:
            soft = multiply(_const_like(soft, 1 / log_of_base), soft)
        out = add(amax, soft)
        half_period = np.pi if log_of_base is None else np.pi / log_of_base
        angle = imag(out)
        a, two_a = _const_like(angle, half_period), _const_like(angle, 2 * half_period)
        rem = lax.rem(add(angle, a), two_a)
        from .selection import where
        rem = where(less(rem, _const_like(rem, 0)), add(rem, two_a), rem)
        return lax.complex(real(out), subtract(rem, a))

    return logaddexp_b


_logaddexp = _logaddexp_in_base(exp, None)
_logaddexp2 = _logaddexp_in_base(exp2, np.log(2))


def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` computed without overflow."""
    (x1, x2), _, _ = promote("logaddexp", x1, x2, to_inexact=True)
    return _logaddexp(x1, x2)


def logaddexp2(x1, x2, /):
    """``log2(2**x1 + 2**x2)`` computed without overflow."""
    (x1, x2), _, _ = promote("logaddexp2", x1, x2, to_inexact=True)
    return _logaddexp2(x1, x2)


def copysign(x1, x2, /):
    (x1, x2), dtype, _ = promote("copysign", x1, x2, to_inexact=True)
    _reject_complex("copysign", dtype)
    from .selection import where
    return where(signbit(x2), negative(absolute(x1)), absolute(x1))


def heaviside(x1, x2, /):
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0`` and NaN where ``x1`` is NaN."""
    (x1, x2), dtype, _ = promote("heaviside", x1, x2, to_inexact=True)
    _reject_complex("heaviside", dtype)
    from .selection import where
    zero = _const_like(x1, 0)
    at_zero = where(isnan(x1), x1, x2)
    return where(less(x1, zero), zero, where(greater(x1, zero), _const_like(x1, 1), at_zero))


def fmax(x1, x2):
    """The larger, ignoring a NaN; a tie (0 vs -0 included) gives x2 and its derivative, as in
    JAX. A select, not ``max``, so subnormals pass through unflushed."""
    from .selection import where
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """The smaller, ignoring a NaN; a tie gives x2 (see fmax)."""
    from .selection import where
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


def sinc(x, /):
    """``sin(pi x) / (pi x)``, 1 at 0. At 0 the value and every derivative come from the
    Maclaurin series of sin(z)/z (``_sinc_maclaurin``), so grad(grad(sinc))(0) = -pi^2/3."""
    (x,), _, _ = promote("sinc", x, to_inexact=True)
    from .selection import where
    pix = multiply(_const_like(x, np.pi), x)
    is_zero = equal(x, _const_like(x, 0))
    safe = where(is_zero, _const_like(x, 1), pix)
    at_zero = _sinc_maclaurin(asarray(np.int32(0)), pix)
    return where(is_zero, at_zero, divide(sin(safe), safe))


def _sinc_maclaurin_value(k, z):
    """The k-th derivative of sin(z)/z at z = 0, (-1)^(k/2) / (k+1) for even k and 0 for odd k,
    broadcast like ``z`` (as ``z * 0 + c``)."""
    from .selection import where
    z_aval = aval_of(z)
    dtype = z_aval.dtype
    sign = where(equal(bitwise_and(right_shift(k, 1), 1), 0), _strong_const(1, dtype), _strong_const(-1, dtype))
    coefficient = where(equal(bitwise_and(k, 1), 0), divide(sign, convert(add(k, 1), dtype)),
                        _strong_const(0, dtype))
    # weakly typed like a constant made for z (JAX's _const), so sinc of a Python float stays weak
    coefficient = convert(coefficient, dtype, weak=z_aval.weak_type and z_aval.ndim == 0)
    return add(multiply(z, _const_like(z, 0)), coefficient)


def _sinc_maclaurin_rule(primals, tangents):
    (k, z), (_, t) = primals, tangents
    return _sinc_maclaurin(k, z), multiply(_sinc_maclaurin(add(k, 1), z), t)


# The order ``k`` is an int32 operand, not a static argument: the rule's call with ``k + 1`` has
# the same types, so it names the rule being formed, and derivatives of every order exist
# without tracing an unbounded chain of rules.
_sinc_maclaurin = custom_jvp(_sinc_maclaurin_value)
_sinc_maclaurin.defjvp(_sinc_maclaurin_rule)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    (x,), dtype, _ = promote("nan_to_num", x)
    if dt.is_complex(dtype):
        return _by_parts(lambda part: nan_to_num(part, nan=nan, posinf=posinf, neginf=neginf), x)
    if not dt.is_float(dtype):
        return positive(x)
    from .selection import where
    info = dt.finfo(dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    # Strongly typed replacements, as JAX's (asarray(nan, dtype)).
    const = lambda v: _strong_const(v, dtype)
    out = where(isnan(x), const(nan), x)
    out = where(equal(out, const(np.inf)), const(posinf), out)
    return where(equal(out, const(-np.inf)), const(neginf), out)
