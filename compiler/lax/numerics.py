"""Number-format operations: ``reduce_precision`` (round floats to a narrower format, kept in
their dtype) and ``mulhi`` (the high half of the double-width product of integers).

``reduce_precision`` is linear in JAX's sense (its tangent and cotangent are
rounded alike); ``mulhi`` has a zero derivative, as integer ops do.
"""
from __future__ import annotations

import operator

from jaxlib.mlir.dialects import chlo

from jaxprc.interpreters import ad, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.params import Int

from .support import operands as ops
from .elementwise import INTEGRAL, IS_FLOAT, _linear_unary, elementwise

__all__ = ["reduce_precision", "mulhi", "reduce_precision_p", "mulhi_p"]


reduce_precision_p = elementwise("reduce_precision", 1, IS_FLOAT, params=("exponent_bits", "mantissa_bits"))
reduce_precision_p.def_params(exponent_bits=Int(min=1), mantissa_bits=Int(min=0))

mulhi_p = elementwise("mulhi", 2, INTEGRAL)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """``operand`` rounded (to nearest even) to a float format with the given exponent and
    mantissa bits, overflowing to infinity, and returned in its own dtype."""
    try:
        exponent_bits, mantissa_bits = operator.index(exponent_bits), operator.index(mantissa_bits)
    except TypeError:
        raise TypeError(f"reduce_precision: exponent_bits and mantissa_bits must be Python ints, got "
                        f"{exponent_bits!r}, {mantissa_bits!r}") from None
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got {mantissa_bits}")
    if ops.is_py_scalar(operand):
        operand = ops.match_python_scalars("reduce_precision", (operand,))[0]
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


@ops.builder
def mulhi(x, y, /):
    """The high half of the double-width product ``x * y`` (signed or unsigned integers)."""
    return ops.nary(mulhi_p, "mulhi", x, y)


ad.defjvp_linear(reduce_precision_p)
ad.primitive_transposes[reduce_precision_p] = _linear_unary(
    lambda ct, x, **params: reduce_precision_p.bind(ct, **params))
ad.defjvp_zero(mulhi_p)


def _i32(n: int):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), n)


def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    return hlo.reduce_precision(x, _i32(exponent_bits), _i32(mantissa_bits))


mlir.register_lowering(reduce_precision_p, _reduce_precision_lowering)
mlir.register_lowering(mulhi_p, lambda ctx, x, y: chlo.mulhi(x, y))
