"""The dimension family: a symbolic dimension used as a value (``x * x.shape[0]``).

A symbolic dimension (``ir.shape_poly``) that meets an array operation enters
the trace as ``dim_as_value[dim=b]``, a weakly typed scalar of the default int
type (as JAX's). It has no operands: its value is the size that the dimension
takes when the program is called, known once the program is specialised for
concrete shapes, where it lowers to a constant.
"""
from __future__ import annotations

import numpy as np

from jaxprc.engine import dynamic_shapes
from jaxprc.interpreters import ad, mlir
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, ShapedArray
from jaxprc.ir.params import Size
from jaxprc.ir.shape_poly import DimExpr, InconclusiveDimensionOperation, set_value_conversion
from jaxprc.ir.tracing import pytype_aval_mappings, trace_value_converters

__all__ = ["dim_as_value", "dim_as_value_p"]

dim_as_value_p = Primitive("dim_as_value")
dim_as_value_p.def_params(dim=Size(min=0))


def _dim_value_aval() -> ShapedArray:
    return ShapedArray((), dt.default_int_dtype(), weak_type=True)


@dim_as_value_p.def_abstract_eval
def _dim_as_value_rule(*, dim):
    return _dim_value_aval()


@dim_as_value_p.def_impl
def _dim_as_value_impl(*, dim):
    if type(dim) is DimExpr:
        raise InconclusiveDimensionOperation(
            f"The value of symbolic dimension '{dim}' is needed outside a trace; it is known only "
            "when the program is called with concrete shapes.")
    return np.asarray(dim, _dim_value_aval().dtype)


def dim_as_value(dim):
    """The value of a dimension: an int stays one; a symbolic one becomes a traced scalar."""
    return dim_as_value_p.bind(dim=dim) if type(dim) is DimExpr else dim


def _dim_as_value_lowering(ctx, *, dim):
    if type(dim) is DimExpr and dynamic_shapes.has_dynamic_values():     # a dynamic lowering (export)
        return hlo.convert(mlir.aval_to_ir_type(ctx.avals_out[0]), dynamic_shapes.dim_value(dim))
    if type(dim) is DimExpr:
        raise InconclusiveDimensionOperation(
            f"dim_as_value[dim={dim}] reached the lowering with a symbolic dimension: a polymorphic "
            "program lowers once its dimension variables have values (jit calls it with arrays).")
    return mlir.ir_constant(np.asarray(dim, ctx.avals_out[0].dtype))


pytype_aval_mappings[DimExpr] = lambda d: _dim_value_aval()
trace_value_converters[DimExpr] = dim_as_value
set_value_conversion(dim_as_value)
ad.defjvp_zero(dim_as_value_p)
mlir.register_lowering(dim_as_value_p, _dim_as_value_lowering)
