"""Reductions over a set of axes: the reduced dimensions disappear from the result.

The result keeps the operand's dtype and weak type, as in JAX.
"""
from __future__ import annotations

from ..core import Primitive, ShapedArray
from .elementwise import ANY, BOOL_OR_INT, KIND_NAMES, NUM
from .structural import check_axes, type_error


def _reduction(name: str, accepts) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axes):
        check_axes(name, x, axes)
        if not accepts(x.dtype):
            raise type_error(name, [x], KIND_NAMES[accepts], axes=axes)
        return ShapedArray([s for i, s in enumerate(x.shape) if i not in axes], x.dtype, x.weak_type)

    prim.def_abstract_eval(rule)
    return prim


reduce_sum_p = _reduction("reduce_sum", NUM)
reduce_prod_p = _reduction("reduce_prod", NUM)
reduce_max_p = _reduction("reduce_max", ANY)     # complex: by (real, imag), as in JAX
reduce_min_p = _reduction("reduce_min", ANY)
reduce_and_p = _reduction("reduce_and", BOOL_OR_INT)
reduce_or_p = _reduction("reduce_or", BOOL_OR_INT)
reduce_xor_p = _reduction("reduce_xor", BOOL_OR_INT)
