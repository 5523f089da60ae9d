"""The elementwise family: unary and n-ary math, comparisons, conversions, ``clamp`` and ``select_n``.

Operands of an elementwise primitive have equal shapes and equal dtypes (the
numpy layer inserts ``broadcast_in_dim`` and ``convert_element_type``), as in
JAX. The result is weakly typed when every operand is.
"""
from __future__ import annotations

import builtins
import enum
import math
from functools import partial

import numpy as np
from jaxlib.mlir.dialects import chlo

from jaxprc.interpreters import ad, batching, mlir
from jaxprc import lax
from jaxprc.passes import jet
from jaxprc.interpreters.ad import Zero, add_tangents, instantiate_zeros, is_undefined_primal
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray
from jaxprc.ir.params import Bool, DType, Int
from jaxprc.ir.sharding_type import same_shape_rule
from jaxprc.ir.tree_util import tree_map
from jaxprc.engine.lowering import param_name, result_typed_op
from jaxprc.passes import emit
from jaxprc.passes.jvp import aval_of, tangent_aval
from jaxprc.passes.canonicalize import CANONICALIZE
from jaxprc.passes.patterns import Pat, Splat, pattern

from .support import operands as _ops
from .support.accuracy import ACCURACY, AccuracyMode, accuracy_attr, check_accuracy

__all__ = [
    # builders
    "neg", "sign", "floor", "ceil", "round", "RoundingMethod", "is_finite", "exp", "exp2", "log",
    "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "square", "abs", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "integer_pow", "real", "imag", "conj", "bitwise_not", "population_count", "clz",
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "complex",
    "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_arithmetic", "shift_right_logical",
    "eq", "ne", "lt", "le", "gt", "ge",
    "convert_element_type", "bitcast_convert_type", "clamp", "select", "select_n", "stop_gradient",
    # primitives
    "neg_p", "sign_p", "floor_p", "ceil_p", "round_p", "is_finite_p", "exp_p", "exp2_p", "log_p",
    "log1p_p", "expm1_p", "tanh_p", "logistic_p", "sin_p", "cos_p", "tan_p", "asin_p", "acos_p", "atan_p",
    "sinh_p", "cosh_p", "asinh_p", "acosh_p", "atanh_p", "sqrt_p", "rsqrt_p", "cbrt_p", "square_p", "abs_p",
    "erf_p", "erfc_p", "erf_inv_p", "lgamma_p", "digamma_p", "integer_pow_p", "real_p", "imag_p", "conj_p",
    "not_p", "population_count_p", "clz_p", "stop_gradient_p", "copy_p",
    "add_p", "sub_p", "mul_p", "div_p", "rem_p", "pow_p", "max_p", "min_p", "atan2_p", "nextafter_p",
    "complex_p", "and_p", "or_p", "xor_p", "shift_left_p", "shift_right_arithmetic_p",
    "shift_right_logical_p", "eq_p", "ne_p", "lt_p", "le_p", "gt_p", "ge_p",
    "convert_element_type_p", "bitcast_convert_type_p", "clamp_p", "select_n_p",
]


# ==================================================================== primitives

def _kinds(*preds):
    """A dtype predicate: the union of ``preds``, precomputed over the IR's dtypes."""
    accepted = frozenset(d for d in dt.ALL_DTYPES if any(p(d) for p in preds))
    return lambda d: d in accepted


IS_BOOL, IS_INT, IS_UINT = dt.is_bool, dt.is_signed, dt.is_unsigned
IS_FLOAT, IS_COMPLEX = dt.is_float, dt.is_complex
ANY = lambda d: d != dt.float0 and d != dt.token
NUM = _kinds(IS_INT, IS_UINT, IS_FLOAT, IS_COMPLEX)
INEXACT = _kinds(IS_FLOAT, IS_COMPLEX)
REAL_NUM = _kinds(IS_INT, IS_UINT, IS_FLOAT)
INTEGRAL = _kinds(IS_INT, IS_UINT)
BOOL_OR_INT = _kinds(IS_BOOL, IS_INT, IS_UINT)
ORDERED = _kinds(IS_BOOL, IS_INT, IS_UINT, IS_FLOAT)
F32_OR_F64 = lambda d: d in (dt.float32, dt.float64)   # the parts of a complex64/complex128
KIND_NAMES = {ANY: "any dtype", NUM: "a numeric dtype", INEXACT: "a floating or complex dtype",
              IS_FLOAT: "a floating dtype", INTEGRAL: "an integer dtype",
              BOOL_OR_INT: "a boolean or integer dtype", ORDERED: "an ordered (non-complex) dtype",
              IS_COMPLEX: "a complex dtype", IS_INT: "a signed integer dtype",
              F32_OR_F64: "float32 or float64", REAL_NUM: "an integer or floating dtype"}
# the same kinds in JAX's words ("Accepted dtypes are subtypes of ...")
JAX_KIND_NAMES = {ANY: "any", NUM: "integer, floating, complexfloating", INEXACT: "floating, complexfloating",
                  IS_FLOAT: "floating", INTEGRAL: "integer", BOOL_OR_INT: "integer, bool",
                  ORDERED: "integer, floating, bool", IS_COMPLEX: "complexfloating", IS_INT: "signedinteger",
                  F32_OR_F64: "float32, float64", REAL_NUM: "integer, floating"}


def fmt_types(avals) -> str:
    return ", ".join(a.str_short() for a in avals)


def check_same_shapes_dtypes(name: str, avals) -> None:
    shapes = {a.shape for a in avals}
    if len(shapes) > 1:      # JAX's words: ranks first, then the shapes
        ranks = sorted({len(a.shape) for a in avals})
        operands = f"The operands: {fmt_types(avals)}."
        if len(ranks) > 1:
            raise JaxprTypeError(f"{name}: arrays must have the same number of dimensions, "
                                 f"got {{{', '.join(map(str, ranks))}}}\n{operands}")
        raise JaxprTypeError(f"{name} got incompatible shapes for broadcasting: "
                             f"{', '.join(str(tuple(a.shape)) for a in avals)}.\n{operands}")
    dtypes = {a.dtype for a in avals}
    if len(dtypes) > 1 and name == "pow":      # JAX's pow states its own rule
        raise JaxprTypeError("the first argument to pow must have an inexact dtype (float or complex), and "
                             "the second argument must have an inexact or integer dtype, and two inexact "
                             "dtypes must match, but got "
                             f"{' and '.join(np.dtype(a.dtype).name for a in avals)} respectively. The "
                             f"operands: {fmt_types(avals)}.")
    if len(dtypes) > 1:      # JAX's words (users match them), with the jax.numpy function that promotes
        promoting = _PROMOTING.get(name)
        tip = "" if promoting is None else (f" (Tip: jnp.{promoting} is a similar function that does "
                                            "automatic type promotion on inputs).")
        raise JaxprTypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                             f"{', '.join(np.dtype(a.dtype).name for a in avals)}.{tip} The operands: "
                             f"{fmt_types(avals)}.")


def check_accepted_dtypes(name: str, accepts, avals) -> None:
    """Each operand's dtype is of a kind the primitive accepts (JAX's words, by position)."""
    for i, a in enumerate(avals):
        if not accepts(a.dtype):
            where = f" at position {i}" if len(avals) > 1 else ""
            raise JaxprTypeError(f"{name} does not accept dtype {np.dtype(a.dtype).name}{where}. Accepted "
                                 f"dtypes{where} are subtypes of {JAX_KIND_NAMES[accepts]}. The operands: "
                                 f"{fmt_types(avals)}.")


# lax binary ops -> the jax.numpy function of the same computation that promotes its operands
_PROMOTING = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
              "pow": "power", "max": "maximum", "min": "minimum", "atan2": "arctan2", "eq": "equal",
              "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
              "select": "where",
              "nextafter": "nextafter",
              "shift_left": "left_shift", "shift_right_arithmetic": "right_shift"}


def elementwise(name: str, arity: int, accepts=NUM, out_dtype=None, params=(), optional=()) -> Primitive:
    """A primitive mapping ``arity`` equal-typed operands to one value of the same shape.

    ``out_dtype(in_dtype)`` gives the result dtype when it differs (comparisons,
    ``abs`` of complex); as in JAX, the result is weak iff every operand is. ``params`` names the
    params the primitive takes (all required). Like JAX's ``naryop``, it batches by broadcasting.
    """
    prim = Primitive(name)
    expected_params = set(params)
    allowed_params = expected_params | set(optional)    # ``optional``: params an equation may leave out

    def typing_rule(*avals, **given):
        if not expected_params <= set(given) <= allowed_params:
            raise JaxprTypeError(f"{name} takes params {sorted(expected_params) or 'none'}, "
                                 f"got {sorted(given) or 'none'}")
        if len(avals) != arity:
            raise JaxprTypeError(f"{name} takes {arity} operand(s), got {len(avals)}: ({fmt_types(avals)})")
        first = avals[0]
        dtype = first.dtype
        if avals.count(first) != arity:          # operand types equal (or identical): one dtype to check
            check_accepted_dtypes(name, accepts, avals)
            check_same_shapes_dtypes(name, avals)
        elif not accepts(dtype):
            check_accepted_dtypes(name, accepts, avals)
        weak = first.weak_type and all(a.weak_type for a in avals)
        if out_dtype is not None:
            dtype = np.dtype(out_dtype(dtype))
        elif weak == first.weak_type:
            return first                # the operand's type (types are immutable): no new object
        return ShapedArray(first.shape, dtype, weak)

    prim.def_abstract_eval(typing_rule)
    prim.def_sharding_rule(same_shape_rule(name))
    if not params and not optional:
        prim.def_params()       # those with params declare their schema below
    batching.defbroadcasting(prim)
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
# The ops JAX gives ``accuracy=`` (lax.Tolerance / lax.AccuracyMode): an optional param.
_ACC = ("accuracy",)
exp_p = elementwise("exp", 1, INEXACT, optional=_ACC)
exp2_p = elementwise("exp2", 1, INEXACT, optional=_ACC)
log_p = elementwise("log", 1, INEXACT, optional=_ACC)
log1p_p = elementwise("log1p", 1, INEXACT, optional=_ACC)
expm1_p = elementwise("expm1", 1, INEXACT, optional=_ACC)
tanh_p = elementwise("tanh", 1, INEXACT, optional=_ACC)
logistic_p = elementwise("logistic", 1, INEXACT, optional=_ACC)
sin_p = elementwise("sin", 1, INEXACT, optional=_ACC)
cos_p = elementwise("cos", 1, INEXACT, optional=_ACC)
tan_p = elementwise("tan", 1, INEXACT, optional=_ACC)
asin_p = elementwise("asin", 1, INEXACT)
acos_p = elementwise("acos", 1, INEXACT)
atan_p = elementwise("atan", 1, INEXACT)
sinh_p = elementwise("sinh", 1, INEXACT)
cosh_p = elementwise("cosh", 1, INEXACT)
asinh_p = elementwise("asinh", 1, INEXACT)
acosh_p = elementwise("acosh", 1, INEXACT)
atanh_p = elementwise("atanh", 1, INEXACT)
sqrt_p = elementwise("sqrt", 1, INEXACT, optional=_ACC)
rsqrt_p = elementwise("rsqrt", 1, INEXACT, optional=_ACC)
cbrt_p = elementwise("cbrt", 1, IS_FLOAT, optional=_ACC)
square_p = elementwise("square", 1, NUM)
abs_p = elementwise("abs", 1, NUM, _real_dtype)
erf_p = elementwise("erf", 1, IS_FLOAT)
erfc_p = elementwise("erfc", 1, IS_FLOAT)
erf_inv_p = elementwise("erf_inv", 1, IS_FLOAT)
lgamma_p = elementwise("lgamma", 1, IS_FLOAT)
digamma_p = elementwise("digamma", 1, IS_FLOAT)
integer_pow_p = elementwise("integer_pow", 1, NUM, params=("y",))
_integer_pow_shape_rule = integer_pow_p.abstract_eval_rule


@integer_pow_p.def_abstract_eval
def _integer_pow_rule(x, **params):
    """An integer has no negative powers (1/x is not an integer): rejected, as in JAX."""
    out = _integer_pow_shape_rule(x, **params)
    if INTEGRAL(x.dtype) and params["y"] < 0:
        shape = ",".join(map(str, x.shape))
        raise JaxprTypeError(f"Integers cannot be raised to negative powers, got "
                             f"integer_pow({x.dtype.name}[{shape}], {params['y']})")
    return out


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
rem_p = elementwise("rem", 2, REAL_NUM)
pow_p = elementwise("pow", 2, INEXACT)
max_p = elementwise("max", 2, ANY)
min_p = elementwise("min", 2, ANY)
atan2_p = elementwise("atan2", 2, INEXACT)       # complex: XLA's complex atan2, as JAX
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

# -- param schemas (jaxprc.ir.params), checked by the verifier before the typing rules
round_p.def_params(rounding_method=Int(0, 1))      # a RoundingMethod
integer_pow_p.def_params(y=Int())


# -- conversions --------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.def_sharding_rule(same_shape_rule("convert_element_type"))


@convert_element_type_p.def_abstract_eval
def _convert_element_type_rule(x, *, new_dtype, weak_type=False, **_):
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p.def_params(new_dtype=DType(), weak_type=Bool())
bitcast_convert_type_p = Primitive("bitcast_convert_type")
bitcast_convert_type_p.def_params(new_dtype=DType())


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_convert_type_rule(x, *, new_dtype):
    old, new = dt.bit_width(x.dtype), dt.bit_width(new_dtype)
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
clamp_p = Primitive("clamp").def_params()
clamp_p.def_sharding_rule(same_shape_rule("clamp"))


@clamp_p.def_abstract_eval
def _clamp_rule(lo, x, hi):
    if not lo.dtype == x.dtype == hi.dtype:      # JAX's words
        raise JaxprTypeError(f"lax.clamp requires arguments to have the same dtypes, got "
                             f"{', '.join(np.dtype(a.dtype).name for a in (lo, x, hi))}. The operands: "
                             f"{fmt_types([lo, x, hi])}.")
    for bound in (lo, hi):
        if bound.dtype != x.dtype or (bound.shape not in ((), x.shape)):
            raise JaxprTypeError(f"clamp requires bounds of the operand's dtype and either scalar "
                                 f"or the operand's shape, got (min, x, max) = ({fmt_types([lo, x, hi])})")
    if not ANY(x.dtype):     # complex operands too: XLA orders them lexicographically, as JAX's clamp
        raise JaxprTypeError(f"clamp does not accept dtype {dt.short_name(x.dtype)}")
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


select_n_p = Primitive("select_n").def_params()
select_n_p.def_sharding_rule(same_shape_rule("select_n"))


@select_n_p.def_abstract_eval
def _select_n_rule(which, *cases):
    if not cases:
        raise JaxprTypeError("select_n requires at least one case")
    check_same_shapes_dtypes("select", cases)
    if which.shape not in ((), cases[0].shape):
        raise JaxprTypeError(f"select_n: the selector must be scalar or of the cases' shape, "
                             f"got ({fmt_types([which, *cases])})")
    if which.dtype == dt.bool_:
        if len(cases) > 2:
            raise JaxprTypeError(f"select_n with a boolean selector takes at most 2 cases, got {len(cases)}")
    elif which.dtype != dt.int32:
        raise JaxprTypeError(f"select_n: the selector must be bool or int32, got {which.str_short()}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))



# ====================================================================== builders

def _unop(prim):
    def op(x):
        return prim.bind(x)
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Elementwise ``{prim.name}``."
    return op


def _unop_with_accuracy(prim):
    def op(x, *, accuracy=None):
        params = {} if check_accuracy(prim.name, accuracy) is None else {"accuracy": accuracy}
        return prim.bind(x, **params)
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = (f"Elementwise ``{prim.name}``; ``accuracy`` (a lax.Tolerance or lax.AccuracyMode) "
                  "asks the compiler for an implementation of that accuracy.")
    return op


def _binop(prim, name=None):
    name = name or prim.name

    @_ops.builder
    def op(x, y):
        return _ops.nary(prim, name, x, y)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{prim.name}`` of equal dtypes (a Python scalar: its default dtype)."
    return op


neg, sign, floor, ceil = map(_unop, (neg_p, sign_p, floor_p, ceil_p))
is_finite = _unop(is_finite_p)
exp, exp2, log, log1p, expm1 = map(_unop_with_accuracy, (exp_p, exp2_p, log_p, log1p_p, expm1_p))
tanh, logistic, sin, cos, tan = map(_unop_with_accuracy, (tanh_p, logistic_p, sin_p, cos_p, tan_p))
asin, acos, atan, sinh, cosh = map(_unop, (asin_p, acos_p, atan_p, sinh_p, cosh_p))
asinh, acosh, atanh = map(_unop, (asinh_p, acosh_p, atanh_p))
sqrt, rsqrt, cbrt = map(_unop_with_accuracy, (sqrt_p, rsqrt_p, cbrt_p))
square, abs = map(_unop, (square_p, abs_p))
erf, erfc, erf_inv, lgamma, digamma = map(_unop, (erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p))
real, imag = map(_unop, (real_p, imag_p))
population_count, clz = map(_unop, (population_count_p, clz_p))
bitwise_not = _unop(not_p)
bitwise_not.__name__ = "bitwise_not"

add, sub, mul, div, rem, pow = map(_binop, (add_p, sub_p, mul_p, div_p, rem_p, pow_p))
max, min, atan2, nextafter = map(_binop, (max_p, min_p, atan2_p, nextafter_p))
complex = _binop(complex_p)
complex.__doc__ = "Elementwise ``x + yi`` from float32/float64 parts of equal dtypes."
bitwise_and = _binop(and_p, "bitwise_and")
bitwise_or = _binop(or_p, "bitwise_or")
bitwise_xor = _binop(xor_p, "bitwise_xor")
shift_left, shift_right_arithmetic, shift_right_logical = map(
    _binop, (shift_left_p, shift_right_arithmetic_p, shift_right_logical_p))
eq, ne, lt, le, gt, ge = map(_binop, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


_mul = mul


@_ops.builder
def mul(x, y, *, out_dtype=None):
    """Elementwise product; with ``out_dtype`` the operands are converted to it first."""
    if out_dtype is not None:
        x, y = (convert_element_type(v, out_dtype) for v in _ops.match_python_scalars("mul", (x, y)))
    return _mul(x, y)


def conj(x):
    """Complex conjugate; of a float32/float64 operand, that operand as a complex number (its
    imaginary part +0, its weak type kept), as in JAX."""
    if _ops.is_py_scalar(x) or _ops.aval(x).dtype in (dt.float32, dt.float64):
        return complex(x, 0.0)
    return conj_p.bind(x)


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding; halves go away from zero unless ``TO_NEAREST_EVEN``."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y: int):
    """``x ** y`` for a static Python int ``y``."""
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow: the exponent y must be a Python int, got {y!r} of type "
                        f"{type(y).__name__}")      # JAX refuses it too (a TypeError from its rule)
    return integer_pow_p.bind(x, y=int(y))


def _convert(x, dtype, weak_type: bool):
    """``x`` as ``dtype`` with the given weak bit, to feed a bind (scalars become Literals)."""
    dtype = np.dtype(dtype)
    if _ops.is_py_scalar(x) or isinstance(x, np.generic) or (type(x) is np.ndarray and x.ndim == 0):
        return _ops.scalar_of_dtype(x, dtype, weak_type)
    aval = _ops.aval(x)
    if aval.dtype == dtype and aval.weak_type == weak_type and not isinstance(x, np.ndarray):
        return x
    return convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak_type)


def convert_element_type(operand, new_dtype):
    """``operand`` converted to ``new_dtype`` (canonicalized: 64-bit types narrow without x64)."""
    dtype = dt.canonicalize_dtype(new_dtype)
    aval = _ops.aval(operand)
    if aval.dtype == dtype and not aval.weak_type and not isinstance(operand, (np.ndarray, np.generic)):
        return operand
    return convert_element_type_p.bind(operand, new_dtype=dtype, weak_type=False)


def bitcast_convert_type(operand, new_dtype):
    return bitcast_convert_type_p.bind(operand, new_dtype=dt.canonicalize_dtype(new_dtype))


@_ops.builder
def clamp(min, x, max):
    """``x`` limited to [min, max]; the bounds are scalars or of ``x``'s shape."""
    lo, x, hi = _ops.match_python_scalars("clamp", (min, x, max))
    return clamp_p.bind(lo, x, hi)


@_ops.builder
def select_n(which, *cases):
    """Case ``i`` where ``which == i`` (``which`` bool for <= 2 cases, else int32)."""
    cases = _ops.broadcast_rank0(_ops.match_python_scalars("select_n", cases))
    return select_n_p.bind(which, *cases)


@_ops.builder
def select(pred, on_true, on_false):
    """``on_true`` where ``pred``, else ``on_false``."""
    return select_n(pred, on_false, on_true)


def stop_gradient(x):
    """The identity, with zero derivative; maps over a pytree, leaving non-float leaves alone."""
    def stop(leaf):
        return stop_gradient_p.bind(leaf) if dt.is_inexact(_ops.aval(leaf).dtype) else leaf
    return tree_map(stop, x)


# The pass drivers accumulate (co)tangents with this family's add.
emit.provide(add=add)


# ===================================================================== jvp rules
# Rules call other families (full_like, broadcast_in_dim) through the jaxprc.lax
# namespace at call time.

for _prim in (sign_p, floor_p, ceil_p, round_p, is_finite_p, not_p, population_count_p, clz_p,
              stop_gradient_p, nextafter_p, and_p, or_p, xor_p, shift_left_p, shift_right_arithmetic_p,
              shift_right_logical_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p, bitcast_convert_type_p):
    ad.defjvp_zero(_prim)

for _prim in (neg_p, copy_p, real_p, imag_p, conj_p):
    ad.defjvp_linear(_prim)

ad.defjvp_bilinear(mul_p)


def _defjvp_unary(prim, tangent):
    """``tangent(t, x, ans)``: the output tangent of a unary function (linear in t)."""
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        return ans, tangent(t, x, ans, **params)
    ad.primitive_jvps[prim] = rule


_SQRT_PI = math.sqrt(math.pi)
# (``accuracy``, when given, reaches the tangent's own transcendental ops as in JAX; with
# AccuracyMode.HIGHEST expm1, tanh and logistic take forms that keep precision in the tails.)
_HIGHEST = lambda accuracy: accuracy is AccuracyMode.HIGHEST
_defjvp_unary(exp_p, lambda t, x, ans, **_: mul(t, ans))
_defjvp_unary(exp2_p, lambda t, x, ans, **_: mul(t, mul(ans, math.log(2.0))))
_defjvp_unary(log_p, lambda t, x, ans, **_: div(t, x))
_defjvp_unary(log1p_p, lambda t, x, ans, **_: div(t, add(x, 1.0)))
_defjvp_unary(expm1_p, lambda t, x, ans, accuracy=None: mul(t, exp(x, accuracy=accuracy))
              if _HIGHEST(accuracy) else mul(t, add(ans, 1.0)))
_defjvp_unary(tanh_p, lambda t, x, ans, accuracy=None: mul(t, mul(4.0, mul(
    logistic(mul(2.0, x), accuracy=accuracy), logistic(mul(-2.0, x), accuracy=accuracy))))
              if _HIGHEST(accuracy) else mul(add(t, mul(t, ans)), sub(1.0, ans)))
_defjvp_unary(logistic_p, lambda t, x, ans, accuracy=None: mul(t, mul(ans, logistic(neg(x), accuracy=accuracy)))
              if _HIGHEST(accuracy) else mul(t, mul(ans, sub(1.0, ans))))
_defjvp_unary(sin_p, lambda t, x, ans, accuracy=None: mul(t, cos(x, accuracy=accuracy)))
_defjvp_unary(cos_p, lambda t, x, ans, accuracy=None: mul(t, neg(sin(x, accuracy=accuracy))))
_defjvp_unary(tan_p, lambda t, x, ans, **_: mul(t, add(1.0, mul(ans, ans))))
_defjvp_unary(asin_p, lambda t, x, ans: mul(t, rsqrt(sub(1.0, mul(x, x)))))
_defjvp_unary(acos_p, lambda t, x, ans: mul(t, neg(rsqrt(sub(1.0, mul(x, x))))))
_defjvp_unary(atan_p, lambda t, x, ans: div(t, add(1.0, mul(x, x))))
_defjvp_unary(sinh_p, lambda t, x, ans: mul(t, cosh(x)))
_defjvp_unary(cosh_p, lambda t, x, ans: mul(t, sinh(x)))
_defjvp_unary(asinh_p, lambda t, x, ans: mul(t, rsqrt(add(mul(x, x), 1.0))))
_defjvp_unary(acosh_p, lambda t, x, ans: mul(t, rsqrt(sub(square(x), 1.0))))
_defjvp_unary(atanh_p, lambda t, x, ans: mul(div(1.0, add(x, 1.0)), div(t, sub(1.0, x))))
_defjvp_unary(sqrt_p, lambda t, x, ans, **_: mul(t, div(0.5, ans)))
_defjvp_unary(rsqrt_p, lambda t, x, ans, **_: mul(t, mul(-0.5, div(ans, x))))
_defjvp_unary(cbrt_p, lambda t, x, ans, **_: mul(t, mul(integer_pow(ans, -2), 1.0 / 3.0)))
_defjvp_unary(square_p, lambda t, x, ans: mul(t, mul(x, 2.0)))


def _abs_tangent(t, x, ans):
    from jaxprc import lax
    if not dt.is_complex(aval_of(x).dtype):
        # the slope is +1 at both zeros, so |x| has derivative 1 at 0 and -0 (as in JAX)
        return select_n(ge(x, 0.0), neg(t), t)
    # d|z| = Re(dz conj(z) / |z|), with |z| taken as 1 where z == 0 (JAX's convention)
    safe_ans = select_n(eq(ans, 0.0), ans, lax.full_like(ans, 1))
    factor = div(conj(x), convert_element_type(safe_ans, aval_of(x).dtype))
    return real(mul(t, factor))


_defjvp_unary(abs_p, _abs_tangent)
_defjvp_unary(erf_p, lambda t, x, ans: mul(t, mul(exp(neg(mul(x, x))), 2.0 / _SQRT_PI)))
_defjvp_unary(erfc_p, lambda t, x, ans: mul(t, mul(exp(neg(mul(x, x))), -2.0 / _SQRT_PI)))
_defjvp_unary(erf_inv_p, lambda t, x, ans: mul(_SQRT_PI / 2.0, mul(t, exp(square(ans)))))
_defjvp_unary(lgamma_p, lambda t, x, ans: mul(t, digamma(x)))


def _integer_pow_tangent(t, x, ans, *, y):
    if y == 0:     # constant 1: no 0 * x**-1, which is NaN at 0
        return Zero(tangent_aval(aval_of(ans)))
    if y == 1:
        return t
    return mul(t, mul(integer_pow(x, y - 1) if y != 2 else x, float(y)))


_defjvp_unary(integer_pow_p, _integer_pow_tangent)


def _convert_element_type_jvp(primals, tangents, *, new_dtype, **params):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, **params)
    if not dt.is_inexact(new_dtype):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, convert_element_type(t, new_dtype)


ad.primitive_jvps[convert_element_type_p] = _convert_element_type_jvp


def _add_jvp(primals, tangents):
    return add(*primals), add_tangents(*tangents)


def _complex_jvp(primals, tangents):
    """Linear in (re, im) jointly; a zero part is instantiated only when the other is not."""
    out = complex(*primals)
    if all(isinstance(t, Zero) for t in tangents):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, complex(*map(instantiate_zeros, tangents))


def _sub_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return sub(x, y), add_tangents(tx, ty if isinstance(ty, Zero) else neg(ty))


def _div_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    ans = div(x, y)
    left = Zero(tangent_aval(aval_of(ans))) if isinstance(tx, Zero) else div(tx, y)
    right = ty if isinstance(ty, Zero) else mul(mul(neg(ty), x), integer_pow(y, -2))
    return ans, add_tangents(left, right)


ad.primitive_jvps[add_p] = _add_jvp
ad.primitive_jvps[complex_p] = _complex_jvp
ad.primitive_jvps[sub_p] = _sub_jvp
ad.primitive_jvps[div_p] = _div_jvp


def _scaled(t, factor):
    """t * factor; ``factor=1`` means t itself."""
    return t if isinstance(t, Zero) or (isinstance(factor, int) and factor == 1) else mul(t, factor)


def _defjvp_binary(prim, partials):
    """``partials(x, y, ans) -> (dans/dx, dans/dy)``; the tangent is tx*dx + ty*dy."""
    def rule(primals, tangents, **params):
        (x, y), (tx, ty) = primals, tangents
        ans = prim.bind(x, y, **params)
        dx, dy = partials(x, y, ans)
        return ans, add_tangents(_scaled(tx, dx) if dx is not None else Zero(tangent_aval(aval_of(ans))),
                                 _scaled(ty, dy) if dy is not None else Zero(tangent_aval(aval_of(ans))))
    ad.primitive_jvps[prim] = rule


def _pow_partials(x, y, ans):
    from jaxprc import lax
    # d/dy x**y = log(x) x**y, taken as 0 where x == 0 (as JAX does)
    safe_log = log(select_n(eq(x, 0.0), x, lax.full_like(x, 1)))
    return mul(y, pow(x, sub(y, 1.0))), mul(ans, safe_log)


def _balanced_eq(x, ans, y):
    """1 where x alone attains the extremum, 1/2 on ties, 0 elsewhere (JAX's convention)."""
    from jaxprc import lax
    one, half, zero = lax.full_like(ans, 1), lax.full_like(ans, 0.5), lax.full_like(ans, 0)
    return select_n(eq(x, ans), zero, select_n(eq(y, ans), one, half))


def _atan2_partials(x, y, ans):
    denom = add(square(x), square(y))
    return div(y, denom), div(neg(x), denom)


def _rem_partials(x, y, ans):
    q = div(x, y)
    return 1, neg(mul(sign(q), floor(abs(q))))


_defjvp_binary(pow_p, _pow_partials)
_defjvp_binary(max_p, lambda x, y, ans: (_balanced_eq(x, ans, y), _balanced_eq(y, ans, x)))
_defjvp_binary(min_p, lambda x, y, ans: (_balanced_eq(x, ans, y), _balanced_eq(y, ans, x)))
_defjvp_binary(atan2_p, _atan2_partials)
_defjvp_binary(rem_p, _rem_partials)


def _clamp_jvp(primals, tangents):
    from jaxprc import lax
    (lo, x, hi), (tlo, tx, thi) = primals, tangents
    out = clamp_p.bind(lo, x, hi)
    shape = aval_of(x).shape

    def where(pred, t):
        if isinstance(t, Zero):
            return Zero(tangent_aval(aval_of(out)))
        if aval_of(t).shape != shape:
            t = lax.broadcast_in_dim(t, shape, ())
        return select_n(pred, lax.full_like(out, 0), t)
    # XLA's clamp is min(max(x, lo), hi): where lo > hi the result is hi, whatever x is.
    inside = bitwise_and(gt(x, lo), lt(x, hi))
    t = add_tangents(where(bitwise_and(lt(x, lo), lt(lo, hi)), tlo), where(inside, tx))
    return out, add_tangents(t, where(gt(x, hi), thi))


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    return out, select_n_p.bind(which, *map(instantiate_zeros, tangents[1:]))


ad.primitive_jvps[clamp_p] = _clamp_jvp
ad.primitive_jvps[select_n_p] = _select_n_jvp


# =============================================================== transpose rules

def _linear_unary(fn):
    """A rule for ops linear in their first operand: Zero in, Zero out."""
    def rule(ct, x, *rest, **params):
        if isinstance(ct, Zero):
            return [Zero(x.aval)] + [None] * len(rest)
        return [fn(ct, x, *rest, **params)] + [None] * len(rest)
    return rule


def _add_transpose(ct, x, y):
    return [ct if is_undefined_primal(x) else None, ct if is_undefined_primal(y) else None]


def _sub_transpose(ct, x, y):
    neg_ct = Zero(y.aval) if isinstance(ct, Zero) else neg(ct)
    return [ct if is_undefined_primal(x) else None, neg_ct if is_undefined_primal(y) else None]


def _mul_transpose(ct, x, y):
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise ValueError("transpose of mul: both operands are linear, so the program is not linear")
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None, Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x):
        return [mul(ct, y), None]
    return [None, mul(x, ct)]


def _div_transpose(ct, x, y):
    if is_undefined_primal(y):
        raise ValueError("transpose of div: the divisor is linear, so the program is not linear")
    return [Zero(x.aval) if isinstance(ct, Zero) else div(ct, y), None]


ad.primitive_transposes[add_p] = _add_transpose
ad.primitive_transposes[sub_p] = _sub_transpose
ad.primitive_transposes[mul_p] = _mul_transpose
ad.primitive_transposes[div_p] = _div_transpose
ad.primitive_transposes[neg_p] = _linear_unary(lambda ct, x: neg(ct))
ad.primitive_transposes[copy_p] = _linear_unary(lambda ct, x: ct)
ad.primitive_transposes[conj_p] = _linear_unary(lambda ct, x: conj(ct))


def _imag_transpose(ct, x):
    from jaxprc import lax
    return complex(lax.full_like(ct, 0), neg(ct))


# real, imag and complex are linear over the reals. As in JAX, a complex cotangent ct pairs with
# a tangent t as Re(ct * t) (no conjugate), so ct of real(z) goes back as ct + 0i, of imag(z) as
# 0 - ct i, and ct of complex(x, y) as (Re ct, -Im ct). Parts are assembled with complex, not by
# multiplying with 1j, which would turn an infinite cotangent into NaN.
ad.primitive_transposes[real_p] = _linear_unary(lambda ct, x: convert_element_type(ct, x.aval.dtype))
ad.primitive_transposes[imag_p] = _linear_unary(_imag_transpose)


def _complex_transpose(ct, x, y):
    def part(operand, fn):
        if not is_undefined_primal(operand):
            return None
        return Zero(operand.aval) if isinstance(ct, Zero) else fn(ct)
    return [part(x, real), part(y, lambda c: neg(imag(c)))]


def _convert_element_type_transpose(ct, x, *, new_dtype, weak_type=False, **_):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    # back to the operand's type, weak bit included (as JAX: a weak carry or argument that was
    # promoted keeps a weak cotangent)
    a, c = x.aval, aval_of(ct)
    if (c.dtype, c.weak_type) == (a.dtype, a.weak_type):
        return [ct]
    return [convert_element_type_p.bind(ct, new_dtype=a.dtype, weak_type=a.weak_type)]


def _select_n_transpose(ct, which, *cases):
    from jaxprc import lax
    if is_undefined_primal(which):
        raise ValueError("transpose of select_n: the selector must not be linear")
    out = []
    for i, c in enumerate(cases):
        if not is_undefined_primal(c):
            out.append(None)
        elif isinstance(ct, Zero):
            out.append(Zero(c.aval))
        else:
            z = lax.full_like(ct, 0)
            out.append(select_n_p.bind(which, *[ct if j == i else z for j in range(len(cases))]))
    return [None] + out


ad.primitive_transposes[complex_p] = _complex_transpose
ad.primitive_transposes[convert_element_type_p] = _convert_element_type_transpose
ad.primitive_transposes[select_n_p] = _select_n_transpose


# ================================================================ batching rules
# The ``elementwise`` primitives batch by broadcasting (registered by the factory).

batching.defbroadcasting(convert_element_type_p)
batching.defbroadcasting(clamp_p, scalar_ok={0, 2})
batching.defbroadcasting(select_n_p, scalar_ok={0})


def _bitcast_convert_type_batch(args, dims, *, new_dtype):
    (x,), (d,) = args, dims
    aval = aval_of(x)
    if dt.bit_width(aval.dtype) != dt.bit_width(new_dtype) and d == aval.ndim - 1:
        x, d = batching.moveaxis(x, d, 0), 0     # the trailing axis is where elements split or merge
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


batching.primitive_batchers[bitcast_convert_type_p] = _bitcast_convert_type_batch


# =============================================================== lowering rules

# Ops of one result typed like the equation's output, by their MLIR names (built directly);
# those JAX gives ``accuracy=`` carry it as their ``result_accuracy`` attribute.
def _accuracy_attributes(accuracy=None):
    return None if accuracy is None else {"result_accuracy": accuracy_attr(accuracy)}


for _prim, _op in [
    (neg_p, "stablehlo.negate"), (floor_p, "stablehlo.floor"), (ceil_p, "stablehlo.ceil"),
    (is_finite_p, "stablehlo.is_finite"), (asin_p, "chlo.asin"), (acos_p, "chlo.acos"), (atan_p, "chlo.atan"),
    (sinh_p, "chlo.sinh"), (cosh_p, "chlo.cosh"), (asinh_p, "chlo.asinh"), (acosh_p, "chlo.acosh"),
    (atanh_p, "chlo.atanh"), (erf_p, "chlo.erf"), (erfc_p, "chlo.erfc"), (erf_inv_p, "chlo.erf_inv"),
    (lgamma_p, "chlo.lgamma"), (digamma_p, "chlo.digamma"), (real_p, "stablehlo.real"),
    (imag_p, "stablehlo.imag"), (not_p, "stablehlo.not"), (population_count_p, "stablehlo.popcnt"),
    (clz_p, "stablehlo.count_leading_zeros"),
    (add_p, "stablehlo.add"), (sub_p, "stablehlo.subtract"), (mul_p, "stablehlo.multiply"),
    (div_p, "stablehlo.divide"), (rem_p, "stablehlo.remainder"), (pow_p, "stablehlo.power"),
    (atan2_p, "stablehlo.atan2"), (nextafter_p, "chlo.next_after"), (complex_p, "stablehlo.complex"),
    (and_p, "stablehlo.and"), (or_p, "stablehlo.or"), (xor_p, "stablehlo.xor"),
    (shift_left_p, "stablehlo.shift_left"), (shift_right_arithmetic_p, "stablehlo.shift_right_arithmetic"),
    (shift_right_logical_p, "stablehlo.shift_right_logical"),
]:
    mlir.register_lowering(_prim, result_typed_op(_op))


def _complex_sin_cos(is_cos):
    """sin/cos of a + bi from real functions of a and b, as JAX lowers them (XLA's complex sine
    loses the small imaginary part near the zeros of cos a): sinh b and cosh b from expm1(+-b),
    with no cancellation for small b; at a == 0 the zero part is exact (no inf * 0 = NaN)."""
    def impl(x):
        from jaxprc import lax
        a, b = real(x), imag(x)
        zero, two = lax.full_like(a, 0), lax.full_like(a, 2)
        sn, cs = sin(a), cos(a)
        e1m, e2m = expm1(b), expm1(neg(b))
        snh, csh = div(sub(e1m, e2m), two), div(add(add(e1m, e2m), two), two)
        if is_cos:
            re, im = mul(cs, csh), mul(neg(sn), snh)
            exact = complex(re, zero)
        else:
            re, im = mul(sn, csh), mul(cs, snh)
            exact = complex(zero, im)
        return select_n(eq(a, zero), complex(re, im), exact)
    complex_rule = mlir.lower_fun(impl, multiple_results=False)
    real_rule = result_typed_op("stablehlo.cosine" if is_cos else "stablehlo.sine", _accuracy_attributes)

    def rule(ctx, x, **params):
        if dt.is_complex(ctx.avals_in[0].dtype):
            return complex_rule(ctx, x)
        return real_rule(ctx, x, **params)
    return rule


mlir.register_lowering(sin_p, _complex_sin_cos(False))
mlir.register_lowering(cos_p, _complex_sin_cos(True))

for _prim, _op in [
    (exp_p, "stablehlo.exponential"), (log_p, "stablehlo.log"), (log1p_p, "stablehlo.log_plus_one"),
    (expm1_p, "stablehlo.exponential_minus_one"), (tanh_p, "stablehlo.tanh"),
    (tan_p, "stablehlo.tan"), (sqrt_p, "stablehlo.sqrt"),
    (rsqrt_p, "stablehlo.rsqrt"), (cbrt_p, "stablehlo.cbrt"),
]:
    mlir.register_lowering(_prim, result_typed_op(_op, _accuracy_attributes))
for _prim in (exp_p, exp2_p, log_p, log1p_p, expm1_p, tanh_p, logistic_p, sin_p, cos_p, tan_p, sqrt_p, rsqrt_p,
              cbrt_p):
    _prim.def_params(accuracy=ACCURACY)


def _max_min_lowering(ctx, x, y):
    return mlir.max_min(ctx.primitive.name, ctx.avals_in[0].dtype)(x, y)


mlir.register_lowering(max_p, _max_min_lowering)


def _logistic_lowering(ctx, x, accuracy=None):     # (JAX's lowering leaves accuracy out too)
    """1 / (1 + exp(-x)), as JAX lowers it: XLA's own logistic rounds differently (bf16 above all)."""
    one = mlir.full(ctx.avals_in[0].shape, 1, ctx.avals_in[0].dtype)
    return hlo.divide(one, hlo.add(one, hlo.exponential(hlo.negate(x))))


mlir.register_lowering(logistic_p, _logistic_lowering)
mlir.register_lowering(min_p, _max_min_lowering)

def _compare_lowering(direction: str):
    return lambda ctx, x, y: mlir.compare(x, y, direction, ctx.avals_in[0].dtype)


for _prim, _direction in [(eq_p, "EQ"), (ne_p, "NE"), (lt_p, "LT"), (le_p, "LE"), (gt_p, "GT"), (ge_p, "GE")]:
    mlir.register_lowering(_prim, _compare_lowering(_direction))


def _identity_lowering(ctx, x, **_):
    return x


mlir.register_lowering(stop_gradient_p, _identity_lowering)
mlir.register_lowering(copy_p, _identity_lowering)


def _sign_lowering(ctx, x):
    aval = ctx.avals_in[0]
    if dt.is_unsigned(aval.dtype):    # stablehlo.sign is for signed and floating types
        return hlo.select(mlir.compare(x, mlir.zeros(aval), "EQ", aval.dtype), x,
                          mlir.full(aval.shape, 1, aval.dtype))
    return hlo.sign(x)


def _abs_lowering(ctx, x):
    return x if dt.is_unsigned(ctx.avals_in[0].dtype) else hlo.abs(x)


def _square_lowering(ctx, x):
    return hlo.multiply(x, x)


def _exp2_lowering(ctx, x, accuracy=None):
    aval = ctx.avals_in[0]
    return hlo.exponential(hlo.multiply(mlir.full(aval.shape, np.log(2), aval.dtype), x),
                           result_accuracy=accuracy_attr(accuracy))


def _round_lowering(ctx, x, *, rounding_method=0):
    to_even = param_name(rounding_method) in ("1", "TO_NEAREST_EVEN")
    return hlo.round_nearest_even(x) if to_even else hlo.round_nearest_afz(x)


def _integer_pow_lowering(ctx, x, *, y):
    """Exponentiation by squaring; a negative exponent takes the reciprocal, as in JAX."""
    aval = ctx.avals_in[0]
    acc, base, n = None, x, builtins.abs(int(y))
    while n:
        if n & 1:
            acc = base if acc is None else hlo.multiply(acc, base)
        n >>= 1
        if n:
            base = hlo.multiply(base, base)
    if acc is not None and y > 0:       # no constant 1: it would be a dead op in the module
        return acc
    one = mlir.full(aval.shape, 1, aval.dtype)
    return one if acc is None else hlo.divide(one, acc)


def _conj_lowering(ctx, x):
    return hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))


def _convert_element_type_lowering(ctx, x, *, new_dtype, weak_type=False, **_):
    (aval_in,), (aval_out,) = ctx.avals_in, ctx.avals_out
    if dt.is_complex(aval_in.dtype) and not dt.is_complex(aval_out.dtype):
        x = hlo.real(x)                        # JAX drops the imaginary part
        aval_in = aval_in.update(dtype=dt.float32 if aval_in.dtype == dt.complex64 else dt.float64)
    if aval_in.dtype == aval_out.dtype:
        return x
    if aval_out.dtype == dt.bool_:             # nonzero -> True (a plain convert would truncate)
        return mlir.compare(x, mlir.zeros(aval_in), "NE", aval_in.dtype)
    return hlo.convert(mlir.aval_to_ir_type(aval_out), x)


def _bitcast_convert_type_lowering(ctx, x, *, new_dtype):
    return hlo.bitcast_convert(mlir.aval_to_ir_type(ctx.avals_out[0]), x)


def _clamp_lowering(ctx, lo, x, hi):
    return hlo.clamp(lo, x, hi)


def _select_n_lowering(ctx, which, *cases):
    """Case i where which == i: a balanced tree of two-way selects on the selector."""
    which_aval = ctx.avals_in[0]
    if len(cases) == 1:
        return cases[0]
    if which_aval.dtype == dt.bool_:
        return hlo.select(which, cases[1], cases[0])

    def pick(lo, hi):              # cases[lo:hi]
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        below = mlir.compare(which, mlir.full(which_aval.shape, mid, which_aval.dtype), "LT",
                             which_aval.dtype)
        return hlo.select(below, pick(lo, mid), pick(mid, hi))
    return pick(0, len(cases))


mlir.register_lowering(sign_p, _sign_lowering)
mlir.register_lowering(abs_p, _abs_lowering)
mlir.register_lowering(square_p, _square_lowering)
mlir.register_lowering(exp2_p, _exp2_lowering)
mlir.register_lowering(round_p, _round_lowering)
mlir.register_lowering(integer_pow_p, _integer_pow_lowering)
mlir.register_lowering(conj_p, _conj_lowering)
mlir.register_lowering(convert_element_type_p, _convert_element_type_lowering)
mlir.register_lowering(bitcast_convert_type_p, _bitcast_convert_type_lowering)
mlir.register_lowering(clamp_p, _clamp_lowering)
mlir.register_lowering(select_n_p, _select_n_lowering)


# ---------------------------------------------------------- jet (Taylor series)
# Rules of JAX's jax.experimental.jet, by the same recurrences (some beyond it, marked). The
# primal output is always the primitive itself (JAX computes some from the compositions its
# series come from: tanh as 2 logistic(2x) - 1). Terms are Taylor coefficients.

for _p in (le_p, lt_p, gt_p, ge_p, eq_p, ne_p, not_p, and_p, or_p, xor_p, floor_p, ceil_p, round_p,
           sign_p, stop_gradient_p, is_finite_p, shift_left_p, shift_right_arithmetic_p,
           shift_right_logical_p, bitcast_convert_type_p):
    jet.defzero(_p)
for _p in (neg_p, real_p, complex_p, conj_p, imag_p, add_p, sub_p, convert_element_type_p, copy_p):
    jet.deflinear(_p)
jet.defbilinear(mul_p)


def _select_n_jet(primals_in, series_in):
    which, *cases = primals_in
    return (select_n_p.bind(which, *cases),
            [select_n_p.bind(which, *terms) for terms in zip(*series_in[1:])])


def _div_jet(primals_in, series_in):
    """``v w = u``, solved term by term: ``v_k = (u_k - sum_{j<k} v_j w_{k-j}) / w_0``."""
    (x, y), (xs, ys) = primals_in, series_in
    u, w = [x] + xs, [y] + ys
    v = [div_p.bind(x, y)]
    for k in range(1, len(u)):
        v.append((u[k] - jet.sum_terms(v[j] * w[k - j] for j in range(k))) / w[0])
    return v[0], v[1:]


def _exp_series(v0, u, scale=None):
    """The series of ``v = exp(s u)`` given ``v_0``: ``v' = s v u'``."""
    v = [v0]
    for k in range(1, len(u)):
        term = jet.ode_term(v, u, k)
        v.append(term if scale is None else scale * term)
    return v


def _exp_jet(primals_in, series_in, **params):
    x, = primals_in
    v = _exp_series(exp_p.bind(x, **params), [x] + series_in[0])
    return v[0], v[1:]


def _exp2_jet(primals_in, series_in, **params):      # beyond JAX: exp2(u) = exp(log(2) u)
    x, = primals_in
    v = _exp_series(exp2_p.bind(x, **params), [x] + series_in[0], float(np.log(2.)))
    return v[0], v[1:]


def _log_jet(primals_in, series_in, **params):
    """``u v' = u'``: ``v_k = (u_k - sum_{0<j<k} j v_j u_{k-j} / k) / u_0``."""
    x, = primals_in
    u = [x] + series_in[0]
    v = [log_p.bind(x, **params)]
    for k in range(1, len(u)):
        rest = u[k] if k == 1 else u[k] - jet.sum_terms(j * v[j] * u[k - j] for j in range(1, k)) / k
        v.append(rest / u[0])
    return v[0], v[1:]


def _pow_jet(primals_in, series_in):
    """``x ** y = exp(y log x)``."""
    x, y = primals_in
    e0, es = jet.jet_call(lambda x, y: lax.mul(y, lax.log(x)), primals_in, series_in)
    v = _exp_series(pow_p.bind(x, y), [e0] + es)
    return v[0], v[1:]


def _pow_by_squaring(x, n: int):
    if n < 0:
        return _pow_by_squaring(1 / x, -n)
    if n == 0:
        return 1
    if n % 2 == 0:
        return _pow_by_squaring(x * x, n // 2)
    return x * _pow_by_squaring(x * x, (n - 1) // 2)


def _integer_pow_jet(primals_in, series_in, *, y):
    x, = primals_in
    out = integer_pow_p.bind(x, y=y)
    if y == 0:
        return out, [lax.full_like(t, 0) for t in series_in[0]]
    return out, jet.jet_call(lambda x: _pow_by_squaring(x, y), primals_in, series_in)[1]


def _logistic_series(v0, u):
    """``v = logistic(u)``: ``v' = e u'`` with ``e = v (1 - v)``, both expanded together."""
    v, e = [v0], [v0 * (1 - v0)]
    for k in range(1, len(u)):
        v.append(jet.ode_term(e, u, k))
        e.append((1 - v[0]) * v[k] - jet.sum_terms(v[j] * v[k - j] for j in range(1, k + 1)))
    return v


def _logistic_jet(primals_in, series_in, **params):
    x, = primals_in
    v = _logistic_series(logistic_p.bind(x, **params), [x] + series_in[0])
    return v[0], v[1:]


def _tanh_jet(primals_in, series_in, **params):
    """``tanh(x) = 2 logistic(2x) - 1``."""
    x, = primals_in
    v = _logistic_series(logistic(2 * x), [2 * x] + [2 * t for t in series_in[0]])
    return tanh_p.bind(x, **params), [2 * t for t in v[1:]]


def _sinusoidal_jet(sign, pair, which, primals_in, series_in, **params):
    """``s' = c u'`` and ``c' = sign s u'``, expanded together (sin/cos: -1, sinh/cosh: +1)."""
    x, = primals_in
    u = [x] + series_in[0]
    s, c = [pair[0](x)], [pair[1](x)]
    for k in range(1, len(u)):
        s.append(jet.ode_term(c, u, k))
        c.append(jet.ode_term(s, u, k) * sign)
    return pair[2 + which].bind(x, **params), (s, c)[which][1:]


def _atan2_jet(primals_in, series_in):
    """``atan2(x, y)`` has the series of ``atan(x / y)``, whose derivative is ``1 / (1 + q^2)``."""
    q0, qs = jet.jet_call(lax.div, primals_in, series_in)
    c0, cs = jet.jet_call(lambda q: lax.div(lax.full_like(q, 1), 1 + lax.square(q)), [q0], [qs])
    c, u = [c0] + cs, [q0] + qs
    return atan2_p.bind(*primals_in), [jet.ode_term(c, u, k) for k in range(1, len(u))]


def _rem_jet(primals_in, series_in):
    """``rem(x, y) = x - y trunc(x / y)``, the quotient locally constant. (JAX's jet composes
    ``x - y floor(x / y)``, another function where x / y < 0.)"""
    x, y = primals_in
    q = lax.div(x, y)
    q = lax.mul(lax.sign(q), lax.floor(lax.abs(q)))
    return rem_p.bind(x, y), [tx - ty * q for tx, ty in zip(*series_in)]


def _erf_inv_jet(primals_in, series_in):
    """``v = erf_inv(u)``: ``v' = c u'`` with ``c = sqrt(pi)/2 exp(v^2)``, a function of the
    result, so c's series is built alongside v's (through ``s = v^2`` and ``e = exp(s)``)."""
    x, = primals_in
    u = [x] + series_in[0]
    const = np.sqrt(np.pi) / 2.
    v = [erf_inv_p.bind(x)]
    s = [lax.square(v[0])]
    e = [lax.exp(s[0])]
    c = [const * e[0]]
    for k in range(1, len(u)):
        v.append(jet.ode_term(c, u, k))
        if k + 1 < len(u):
            s.append(jet.sum_terms(v[k - j] * v[j] for j in range(k + 1)))
            e.append(jet.ode_term(e, s, k))
            c.append(const * e[k])
    return v[0], v[1:]


def _abs_jet(primals_in, series_in):
    """The terms times the sign of x (+1 at 0, as JAX's jet)."""
    x, = primals_in
    negs = lax.select(lax.lt(x, lax.full_like(x, 0)), lax.full_like(x, -1), lax.full_like(x, 1))
    return abs_p.bind(x), [negs * t for t in series_in[0]]


def _max_min_jet(prim, compare, primals_in, series_in):
    """The terms of the chosen operand; at ties, their mean (as JAX's jet)."""
    x, y = primals_in
    chosen, tie = compare(x, y), lax.eq(x, y)

    def pick(tx, ty):
        return lax.select(tie, (tx + ty) / 2, lax.select(chosen, tx, ty))
    return prim.bind(x, y), [pick(tx, ty) for tx, ty in zip(*series_in)]


jet.jet_rules.update({
    select_n_p: _select_n_jet, div_p: _div_jet, exp_p: _exp_jet, exp2_p: _exp2_jet, log_p: _log_jet,
    pow_p: _pow_jet, integer_pow_p: _integer_pow_jet, logistic_p: _logistic_jet, tanh_p: _tanh_jet,
    sin_p: partial(_sinusoidal_jet, -1, (sin, cos, sin_p, cos_p), 0),
    cos_p: partial(_sinusoidal_jet, -1, (sin, cos, sin_p, cos_p), 1),
    sinh_p: partial(_sinusoidal_jet, 1, (sinh, cosh, sinh_p, cosh_p), 0),
    cosh_p: partial(_sinusoidal_jet, 1, (sinh, cosh, sinh_p, cosh_p), 1),
    atan2_p: _atan2_jet, rem_p: _rem_jet, erf_inv_p: _erf_inv_jet, abs_p: _abs_jet,
    max_p: partial(_max_min_jet, max_p, gt), min_p: partial(_max_min_jet, min_p, lt),
})
jet.def_deriv(erf_p, lambda x: (2. / np.sqrt(np.pi)) * lax.exp(lax.neg(lax.square(x))))
# beyond JAX: tan, the inverse trigonometric functions, cbrt, lgamma and digamma
jet.def_deriv(tan_p, lambda x: 1 + lax.square(lax.tan(x)))
jet.def_deriv(asin_p, lambda x: lax.rsqrt(1 - lax.square(x)))
jet.def_deriv(acos_p, lambda x: lax.neg(lax.rsqrt(1 - lax.square(x))))
jet.def_deriv(atan_p, lambda x: lax.div(lax.full_like(x, 1), 1 + lax.square(x)))
jet.def_deriv(cbrt_p, lambda x: lax.div(lax.full_like(x, 1), 3 * lax.square(lax.cbrt(x))))
jet.def_deriv(lgamma_p, lambda x: lax.digamma(x))
jet.def_deriv(digamma_p, lambda x: lax.polygamma(lax.full_like(x, 1), x))
for _p, _comp in {
    expm1_p: lambda x: lax.exp(x) - 1,
    log1p_p: lambda x: lax.log(1 + x),
    sqrt_p: lambda x: x ** 0.5,
    square_p: lambda x: x * x,
    rsqrt_p: lambda x: x ** -0.5,
    asinh_p: lambda x: lax.log(x + lax.sqrt(lax.square(x) + 1)),
    acosh_p: lambda x: lax.log(x + lax.sqrt(lax.square(x) - 1)),
    atanh_p: lambda x: 0.5 * lax.log(lax.div(1 + x, 1 - x)),
    erfc_p: lambda x: 1 - lax.erf(x),
    clamp_p: lambda lo, x, hi: lax.min(lax.max(lo, x), hi),
}.items():
    jet.def_comp(_p, _comp)


# -- canonicalization patterns (exact under IEEE: no x + 0.0 -> x, no x * 0 -> 0) ---------------
def _exact_identity(dtype) -> bool:
    """Whether x * 1, x / 1, x + (-0) and x - (+0) are x bit for bit: in real dtypes only (a
    complex product with 1 + 0j computes inf * 0 in the imaginary part)."""
    return not dt.is_complex(dtype) and dtype != dt.bool_


def _is_zero_of_sign(value, negative: bool) -> bool:
    """0 for integers; -0.0 (``negative``) or +0.0 for floats."""
    value = np.asarray(value)
    if value.dtype.kind in "iu":
        return int(value) == 0
    return value == 0 and bool(np.signbit(value)) == negative


@pattern(CANONICALIZE, Pat(mul_p, "x", Splat(1), commute=True))
@pattern(CANONICALIZE, Pat(div_p, "x", Splat(1)))
def _times_one(x):
    return x if _exact_identity(x.aval.dtype) else None


@pattern(CANONICALIZE, Pat(add_p, "x", Splat(name="zero"), commute=True))
def _plus_negative_zero(x, zero):
    return x if _exact_identity(x.aval.dtype) and _is_zero_of_sign(zero, negative=True) else None


@pattern(CANONICALIZE, Pat(sub_p, "x", Splat(name="zero")))
def _minus_positive_zero(x, zero):
    return x if _exact_identity(x.aval.dtype) and _is_zero_of_sign(zero, negative=False) else None


@pattern(CANONICALIZE, Pat(neg_p, Pat(neg_p, "x")))
def _double_negation(x):
    return x


@pattern(CANONICALIZE, Pat(convert_element_type_p, "x", as_="convert"))
def _convert_to_same_type(x, convert):
    return x if convert.outvars[0].aval == x.aval else None


@pattern(CANONICALIZE, Pat(select_n_p, Splat(name="which"), "*cases"))
def _select_constant(which, cases):
    return cases[int(which)] if 0 <= int(which) < len(cases) else None
