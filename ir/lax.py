"""jaxprc.lax's op builders: one function per primitive, with JAX's signatures.

Each function normalises its arguments (Python scalars, negative axes, lists
to tuples, dtypes) and binds a primitive, so the same call records an
equation inside a trace and runs eagerly outside one.

Binary ops require equal dtypes, as in JAX, with two conveniences the
primitives lack: a Python scalar operand takes the dtype of the other
operands (staying weakly typed), when that dtype can hold its kind
(``add(f16_array, 1.0)`` is float16; ``add(i32_array, 1.5)`` is an error);
and rank-0 operands are broadcast to the others' shape with
``broadcast_in_dim``.
"""
from __future__ import annotations

import enum

import numpy as np

from . import dtypes as dt
from .core import Literal, ShapedArray
from .prims import elementwise as ew
from .tracing import current_builder, get_aval
from .tree_util import tree_map

_PY_SCALARS = (bool, int, float, complex)


# ---------------------------------------------------------------- operands

def _aval(x) -> ShapedArray:
    return x.aval if isinstance(x, Literal) else get_aval(x)


def _is_py_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def _canonical_axis(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else axis


def _canonical_axes(axes, ndim: int) -> tuple[int, ...]:
    return tuple(_canonical_axis(a, ndim) for a in axes)


def _ints(xs) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _scalar_of_dtype(x, dtype, weak: bool):
    """A scalar constant of ``dtype``: a Literal inside a trace, a converted value outside."""
    value = np.asarray(x, dtype=dtype)[()]
    if current_builder() is not None:
        return Literal(value, ShapedArray((), dtype, weak))
    if weak:   # keep the weak bit on the eager value (a plain numpy scalar would lose it)
        return ew.convert_element_type_p.bind(value, new_dtype=np.dtype(dtype), weak_type=True)
    return value


def _match_python_scalars(name: str, args):
    """Give Python scalar operands the dtype of the typed operands (see the module docstring)."""
    typed = [_aval(a) for a in args if not _is_py_scalar(a)]
    if len(typed) == len(args):
        return list(args)
    if typed:
        dtype = typed[0].dtype
    else:
        dtype, _ = dt.promote_types(*[(dt.python_scalar_dtype(a), not isinstance(a, bool)) for a in args])
    out = []
    for a in args:
        if not _is_py_scalar(a):
            out.append(a)
            continue
        weak = not isinstance(a, bool)
        kind = (dt.python_scalar_dtype(a), weak)
        if dt.promote_types((dtype, False), kind)[0] != dtype:
            raise TypeError(f"lax.{name} requires arguments to have the same dtypes: the Python scalar "
                            f"{a!r} cannot take the dtype {dtype.name} of the other operands "
                            f"({', '.join(t.str_short() for t in typed)}). Convert it explicitly, or "
                            f"use jaxprc.numpy.{name}, which promotes.")
        out.append(_scalar_of_dtype(a, dtype, weak))
    return out


def _broadcast_rank0(args):
    """Broadcast rank-0 operands to the shape of the others (lax's only implicit broadcasting)."""
    shapes = [_aval(a).shape for a in args]
    target = next((s for s in shapes if s != ()), None)
    if target is None:
        return list(args)
    return [broadcast_in_dim(a, target, ()) if s == () else a for a, s in zip(args, shapes)]


def _nary(prim, name: str, *args, **params):
    args = _broadcast_rank0(_match_python_scalars(name, args))
    return prim.bind(*args, **params)


# -------------------------------------------------------------- elementwise

def _unary(prim):
    def op(x):
        return prim.bind(x)
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Elementwise ``{prim.name}``."
    return op


def _binary(prim, name=None):
    name = name or prim.name

    def op(x, y):
        return _nary(prim, name, x, y)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{prim.name}`` of operands of equal dtypes (Python scalars adapt)."
    return op


neg, sign, floor, ceil = map(_unary, (ew.neg_p, ew.sign_p, ew.floor_p, ew.ceil_p))
is_finite, exp, exp2, log, log1p, expm1 = map(_unary, (ew.is_finite_p, ew.exp_p, ew.exp2_p, ew.log_p,
                                                       ew.log1p_p, ew.expm1_p))
tanh, logistic, sin, cos, tan = map(_unary, (ew.tanh_p, ew.logistic_p, ew.sin_p, ew.cos_p, ew.tan_p))
asin, acos, atan, sinh, cosh = map(_unary, (ew.asin_p, ew.acos_p, ew.atan_p, ew.sinh_p, ew.cosh_p))
asinh, acosh, atanh = map(_unary, (ew.asinh_p, ew.acosh_p, ew.atanh_p))
sqrt, rsqrt, cbrt, square, abs = map(_unary, (ew.sqrt_p, ew.rsqrt_p, ew.cbrt_p, ew.square_p, ew.abs_p))
erf, erfc, erf_inv, lgamma, digamma = map(_unary, (ew.erf_p, ew.erfc_p, ew.erf_inv_p, ew.lgamma_p,
                                                   ew.digamma_p))
real, imag, conj = map(_unary, (ew.real_p, ew.imag_p, ew.conj_p))
population_count, clz = map(_unary, (ew.population_count_p, ew.clz_p))
bitwise_not = _unary(ew.not_p)
bitwise_not.__name__ = "bitwise_not"

add, sub, mul, div, rem, pow = map(_binary, (ew.add_p, ew.sub_p, ew.mul_p, ew.div_p, ew.rem_p, ew.pow_p))
max, min, atan2, nextafter = map(_binary, (ew.max_p, ew.min_p, ew.atan2_p, ew.nextafter_p))
complex = _binary(ew.complex_p)
complex.__doc__ = "Elementwise ``x + yi`` from float32/float64 parts of equal dtypes (Python scalars adapt)."
bitwise_and = _binary(ew.and_p, "bitwise_and")
bitwise_or = _binary(ew.or_p, "bitwise_or")
bitwise_xor = _binary(ew.xor_p, "bitwise_xor")
shift_left, shift_right_arithmetic, shift_right_logical = map(
    _binary, (ew.shift_left_p, ew.shift_right_arithmetic_p, ew.shift_right_logical_p))
eq, ne, lt, le, gt, ge = map(_binary, (ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p))


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Elementwise rounding; halves go away from zero unless ``TO_NEAREST_EVEN``."""
    return ew.round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y: int):
    """``x ** y`` for a static Python int ``y``."""
    return ew.integer_pow_p.bind(x, y=int(y))


# -------------------------------------------------------------- conversions

def _convert(x, dtype, weak_type: bool):
    """``x`` as ``dtype`` with the given weak bit, to feed a bind (scalars become Literals)."""
    dtype = np.dtype(dtype)
    if _is_py_scalar(x) or isinstance(x, np.generic) or (type(x) is np.ndarray and x.ndim == 0):
        return _scalar_of_dtype(x, dtype, weak_type)
    aval = _aval(x)
    if aval.dtype == dtype and aval.weak_type == weak_type and not isinstance(x, np.ndarray):
        return x
    return ew.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak_type)


def convert_element_type(operand, new_dtype):
    """``operand`` converted to ``new_dtype`` (canonicalized: 64-bit types narrow without x64)."""
    dtype = dt.canonicalize_dtype(new_dtype)
    aval = _aval(operand)
    if aval.dtype == dtype and not aval.weak_type and not isinstance(operand, (np.ndarray, np.generic)):
        return operand
    return ew.convert_element_type_p.bind(operand, new_dtype=dtype, weak_type=False)


def bitcast_convert_type(operand, new_dtype):
    return ew.bitcast_convert_type_p.bind(operand, new_dtype=dt.canonicalize_dtype(new_dtype))


def clamp(min, x, max):
    """``x`` limited to [min, max]; the bounds are scalars or of ``x``'s shape."""
    lo, x, hi = _match_python_scalars("clamp", (min, x, max))
    return ew.clamp_p.bind(lo, x, hi)


def select_n(which, *cases):
    """Case ``i`` where ``which == i`` (``which`` bool for <= 2 cases, else int32)."""
    cases = _broadcast_rank0(_match_python_scalars("select_n", cases))
    return ew.select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred``, else ``on_false``."""
    return select_n(pred, on_false, on_true)


def stop_gradient(x):
    """The identity, with zero derivative; maps over a pytree, leaving non-float leaves alone."""
    def stop(leaf):
        return ew.stop_gradient_p.bind(leaf) if dt.is_inexact(_aval(leaf).dtype) else leaf
    return tree_map(stop, x)


# ------------------------------------------------- sorting and cumulative ops

__all__ = [
    # elementwise
    "neg", "sign", "floor", "ceil", "round", "RoundingMethod", "is_finite", "exp", "exp2", "log",
    "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "square", "abs", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "integer_pow", "real", "imag", "conj", "bitwise_not", "population_count", "clz",
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "complex",
    "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_arithmetic", "shift_right_logical",
    "eq", "ne", "lt", "le", "gt", "ge",
    # conversions and selection
    "convert_element_type", "bitcast_convert_type", "clamp", "select", "select_n", "stop_gradient",
]
