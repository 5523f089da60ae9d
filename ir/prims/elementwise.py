"""Elementwise primitives: unary and n-ary math, comparisons, conversions.

Operands of an elementwise primitive have equal shapes and equal dtypes (the
numpy layer inserts ``broadcast_in_dim`` and ``convert_element_type``), as in
JAX. The result is weakly typed when every operand is.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..core import JaxprTypeError, Primitive, ShapedArray


def _kinds(*preds):
    """A dtype predicate: the union of ``preds``, precomputed over the IR's dtypes."""
    accepted = frozenset(d for d in dt.ALL_DTYPES if any(p(d) for p in preds))
    return lambda d: d in accepted


IS_BOOL, IS_INT, IS_UINT = dt.is_bool, dt.is_signed, dt.is_unsigned
IS_FLOAT, IS_COMPLEX = dt.is_float, dt.is_complex
ANY = lambda d: d != dt.float0
NUM = _kinds(IS_INT, IS_UINT, IS_FLOAT, IS_COMPLEX)
INEXACT = _kinds(IS_FLOAT, IS_COMPLEX)
INTEGRAL = _kinds(IS_INT, IS_UINT)
BOOL_OR_INT = _kinds(IS_BOOL, IS_INT, IS_UINT)
ORDERED = _kinds(IS_BOOL, IS_INT, IS_UINT, IS_FLOAT)
F32_OR_F64 = lambda d: d in (dt.float32, dt.float64)   # the parts of a complex64/complex128
KIND_NAMES = {ANY: "any dtype", NUM: "a numeric dtype", INEXACT: "a floating or complex dtype",
              IS_FLOAT: "a floating dtype", INTEGRAL: "an integer dtype",
              BOOL_OR_INT: "a boolean or integer dtype", ORDERED: "an ordered (non-complex) dtype",
              IS_COMPLEX: "a complex dtype", IS_INT: "a signed integer dtype",
              F32_OR_F64: "float32 or float64"}


def fmt_types(avals) -> str:
    return ", ".join(a.str_short() for a in avals)


def check_same_shapes_dtypes(name: str, avals) -> None:
    shapes = {a.shape for a in avals}
    if len(shapes) > 1:
        raise JaxprTypeError(
            f"{name} requires operands of equal shapes (broadcasting is explicit), got ({fmt_types(avals)})")
    dtypes = {a.dtype for a in avals}
    if len(dtypes) > 1:
        raise JaxprTypeError(
            f"{name} requires operands of equal dtypes (promotion is explicit), got ({fmt_types(avals)})")


def elementwise(name: str, arity: int, accepts=NUM, out_dtype=None, params=()) -> Primitive:
    """A primitive mapping ``arity`` equal-typed operands to one value of the same shape.

    ``out_dtype(in_dtype)`` gives the result dtype when it differs (comparisons,
    ``abs`` of complex); as in JAX, the result is weak iff every operand is. ``params`` names the
    params the primitive takes (all required).
    """
    prim = Primitive(name)
    expected_params = set(params)

    def typing_rule(*avals, **given):
        if set(given) != expected_params:
            raise JaxprTypeError(f"{name} takes params {sorted(expected_params) or 'none'}, "
                                 f"got {sorted(given) or 'none'}")
        if len(avals) != arity:
            raise JaxprTypeError(f"{name} takes {arity} operand(s), got {len(avals)}: ({fmt_types(avals)})")
        check_same_shapes_dtypes(name, avals)
        dtype = avals[0].dtype
        if not accepts(dtype):
            raise JaxprTypeError(f"{name} does not accept dtype {dt.short_name(dtype)} "
                                 f"(operands {fmt_types(avals)}); it expects {KIND_NAMES[accepts]}")
        weak = all(a.weak_type for a in avals)
        if out_dtype is not None:
            dtype = np.dtype(out_dtype(dtype))
        return ShapedArray(avals[0].shape, dtype, weak)

    prim.def_abstract_eval(typing_rule)
    prim.arity = arity
    return prim


def _real_dtype(d):
    return {dt.complex64: dt.float32, dt.complex128: dt.float64}.get(np.dtype(d), d)


def _complex_dtype(d):
    return {dt.float32: dt.complex64, dt.float64: dt.complex128}[np.dtype(d)]


def _to_bool(d):
    return dt.bool_


# -- unary --------------------------------------------------------------------
neg_p = elementwise("neg", 1, NUM)
sign_p = elementwise("sign", 1, NUM)
floor_p = elementwise("floor", 1, IS_FLOAT)
ceil_p = elementwise("ceil", 1, IS_FLOAT)
round_p = elementwise("round", 1, IS_FLOAT, params=("rounding_method",))  # 0: away from 0, 1: to even
is_finite_p = elementwise("is_finite", 1, IS_FLOAT, _to_bool)
exp_p = elementwise("exp", 1, INEXACT)
exp2_p = elementwise("exp2", 1, INEXACT)
log_p = elementwise("log", 1, INEXACT)
log1p_p = elementwise("log1p", 1, INEXACT)
expm1_p = elementwise("expm1", 1, INEXACT)
tanh_p = elementwise("tanh", 1, INEXACT)
logistic_p = elementwise("logistic", 1, INEXACT)
sin_p = elementwise("sin", 1, INEXACT)
cos_p = elementwise("cos", 1, INEXACT)
tan_p = elementwise("tan", 1, INEXACT)
asin_p = elementwise("asin", 1, INEXACT)
acos_p = elementwise("acos", 1, INEXACT)
atan_p = elementwise("atan", 1, INEXACT)
sinh_p = elementwise("sinh", 1, INEXACT)
cosh_p = elementwise("cosh", 1, INEXACT)
asinh_p = elementwise("asinh", 1, INEXACT)
acosh_p = elementwise("acosh", 1, INEXACT)
atanh_p = elementwise("atanh", 1, INEXACT)
sqrt_p = elementwise("sqrt", 1, INEXACT)
rsqrt_p = elementwise("rsqrt", 1, INEXACT)
cbrt_p = elementwise("cbrt", 1, IS_FLOAT)
square_p = elementwise("square", 1, NUM)
abs_p = elementwise("abs", 1, NUM, _real_dtype)
erf_p = elementwise("erf", 1, IS_FLOAT)
erfc_p = elementwise("erfc", 1, IS_FLOAT)
erf_inv_p = elementwise("erf_inv", 1, IS_FLOAT)
lgamma_p = elementwise("lgamma", 1, IS_FLOAT)
digamma_p = elementwise("digamma", 1, IS_FLOAT)
integer_pow_p = elementwise("integer_pow", 1, NUM, params=("y",))
real_p = elementwise("real", 1, IS_COMPLEX, _real_dtype)
imag_p = elementwise("imag", 1, IS_COMPLEX, _real_dtype)
conj_p = elementwise("conj", 1, IS_COMPLEX)
not_p = elementwise("not", 1, BOOL_OR_INT)
population_count_p = elementwise("population_count", 1, INTEGRAL)
clz_p = elementwise("clz", 1, INTEGRAL)
# Identity with no derivative (stops gradients) and a plain copy.
stop_gradient_p = elementwise("stop_gradient", 1, ANY)
copy_p = elementwise("copy", 1, ANY)

# -- binary -------------------------------------------------------------------
add_p = elementwise("add", 2, NUM)
sub_p = elementwise("sub", 2, NUM)
mul_p = elementwise("mul", 2, NUM)
div_p = elementwise("div", 2, NUM)
rem_p = elementwise("rem", 2, _kinds(IS_INT, IS_UINT, IS_FLOAT))
pow_p = elementwise("pow", 2, INEXACT)
max_p = elementwise("max", 2, ANY)
min_p = elementwise("min", 2, ANY)
atan2_p = elementwise("atan2", 2, IS_FLOAT)
nextafter_p = elementwise("nextafter", 2, IS_FLOAT)
complex_p = elementwise("complex", 2, F32_OR_F64, _complex_dtype)   # (real part, imaginary part)
and_p = elementwise("and", 2, BOOL_OR_INT)
or_p = elementwise("or", 2, BOOL_OR_INT)
xor_p = elementwise("xor", 2, BOOL_OR_INT)
shift_left_p = elementwise("shift_left", 2, INTEGRAL)
shift_right_arithmetic_p = elementwise("shift_right_arithmetic", 2, INTEGRAL)
shift_right_logical_p = elementwise("shift_right_logical", 2, INTEGRAL)

# -- comparisons --------------------------------------------------------------
eq_p = elementwise("eq", 2, ANY, _to_bool)
ne_p = elementwise("ne", 2, ANY, _to_bool)
lt_p = elementwise("lt", 2, ORDERED, _to_bool)
le_p = elementwise("le", 2, ORDERED, _to_bool)
gt_p = elementwise("gt", 2, ORDERED, _to_bool)
ge_p = elementwise("ge", 2, ORDERED, _to_bool)


# -- conversions --------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_element_type_rule(x, *, new_dtype, weak_type=False, **_):
    return ShapedArray(x.shape, new_dtype, weak_type)


bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_convert_type_rule(x, *, new_dtype):
    old, new = x.dtype.itemsize, np.dtype(new_dtype).itemsize
    if old == new:
        return ShapedArray(x.shape, new_dtype)
    if old > new:                      # one element becomes a trailing axis of smaller ones
        if old % new:
            raise JaxprTypeError(f"bitcast_convert_type: {x.str_short()} to {dt.short_name(new_dtype)}")
        return ShapedArray(x.shape + (old // new,), new_dtype)
    if not x.shape or x.shape[-1] != new // old:
        raise JaxprTypeError(f"bitcast_convert_type: operand {x.str_short()} needs a trailing "
                             f"axis of size {new // old} to become {dt.short_name(new_dtype)}")
    return ShapedArray(x.shape[:-1], new_dtype)


# -- ternary ------------------------------------------------------------------
clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_rule(lo, x, hi):
    for bound in (lo, hi):
        if bound.dtype != x.dtype or (bound.shape not in ((), x.shape)):
            raise JaxprTypeError(f"clamp requires bounds of the operand's dtype and either scalar "
                                 f"or the operand's shape, got (min, x, max) = ({fmt_types([lo, x, hi])})")
    if not ORDERED(x.dtype):
        raise JaxprTypeError(f"clamp does not accept dtype {dt.short_name(x.dtype)}")
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


select_n_p = Primitive("select_n")


@select_n_p.def_abstract_eval
def _select_n_rule(which, *cases):
    if not cases:
        raise JaxprTypeError("select_n requires at least one case")
    check_same_shapes_dtypes("select_n (cases)", cases)
    if which.shape not in ((), cases[0].shape):
        raise JaxprTypeError(f"select_n: the selector must be scalar or of the cases' shape, "
                             f"got ({fmt_types([which, *cases])})")
    if which.dtype == dt.bool_:
        if len(cases) > 2:
            raise JaxprTypeError(f"select_n with a boolean selector takes at most 2 cases, got {len(cases)}")
    elif which.dtype != dt.int32:
        raise JaxprTypeError(f"select_n: the selector must be bool or int32, got {which.str_short()}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))
